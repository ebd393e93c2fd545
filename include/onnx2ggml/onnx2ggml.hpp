// onnx2ggml's C++ API: load an ONNX model, open a Session on a ggml backend, run it on tensors the
// caller owns. The same engine as `onnx2ggml run`: dynamic dims are bound from the inputs given,
// graph inputs that decide compile-time facts (an If's condition, a Reshape's target) are found
// and specialized on, and each specialization is cached (SessionOptions::max_specializations).
//
//     onnx2ggml::Model model = onnx2ggml::Model::load("resnet18.onnx");
//     onnx2ggml::Session session(model, {/*backend*/ "auto", /*threads*/ 2});
//     std::vector<float> x(1 * 3 * 224 * 224);
//     auto outs = session.run({onnx2ggml::TensorRef::of(x.data(), {1, 3, 224, 224})});
//     const float* logits = outs[0].data<float>();
//
// Ownership and threads: a Model is immutable once loaded and may be shared by any number of
// sessions on any threads; a Session holds a reference to its Model's data, so the Model object
// may be destroyed first. A Session runs one call at a time (run() takes a lock); for parallel
// runs open one Session per thread.
//
// Errors: every function throws onnx2ggml::Error, whose category is the CLI's exit code
// (README, "Exit codes") and whose message names the file, node, op and opset as the CLI prints them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(_WIN32)
#define ONNX2GGML_API __declspec(dllexport)
#else
#define ONNX2GGML_API __attribute__((visibility("default")))
#endif

namespace onnx2ggml {

// Element types: the values of onnx.TensorProto.DataType.
enum class DType : int {
    Undefined = 0,
    Float = 1,
    UInt8 = 2,
    Int8 = 3,
    UInt16 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    String = 8,
    Bool = 9,
    Float16 = 10,
    Double = 11,
    UInt32 = 12,
    UInt64 = 13,
    BFloat16 = 16,
};
ONNX2GGML_API size_t dtype_size(DType t);       // bytes per element; 0 for String and Undefined
ONNX2GGML_API const char* dtype_name(DType t);  // "float32", "int64", ...

// What went wrong, as the CLI's exit codes.
enum class ErrorCategory : int {
    Mismatch = 1,     // numbers differ from a reference
    BadInput = 2,     // bad usage or argument, malformed model, wrong input name, dtype or shape
    Unsupported = 3,  // a valid model that onnx2ggml cannot run
    Internal = 4,     // a bug of onnx2ggml's
};

class ONNX2GGML_API Error : public std::runtime_error {
public:
    Error(ErrorCategory c, const std::string& message) : std::runtime_error(message), category_(c) {}
    ErrorCategory category() const { return category_; }
    int exit_code() const { return int(category_); }

private:
    ErrorCategory category_;
};

// A graph input or output: its name, element type and shape (-1 for a dynamic dim, whose name,
// when the model gives one, is in dim_names; "" for static dims).
struct TensorInfo {
    std::string name;
    DType dtype = DType::Undefined;
    std::vector<int64_t> shape;
    std::vector<std::string> dim_names;
};

// An input tensor in the caller's memory: dense, row-major, read in place (not copied on the host)
// and only during run(). A String tensor's data is an array of numel NUL-terminated UTF-8 strings.
struct TensorRef {
    DType dtype = DType::Undefined;
    std::vector<int64_t> shape;
    const void* data = nullptr;

    static TensorRef of(const float* p, std::vector<int64_t> s) { return {DType::Float, std::move(s), p}; }
    static TensorRef of(const int64_t* p, std::vector<int64_t> s) { return {DType::Int64, std::move(s), p}; }
    static TensorRef of(const int32_t* p, std::vector<int64_t> s) { return {DType::Int32, std::move(s), p}; }
    static TensorRef of(const double* p, std::vector<int64_t> s) { return {DType::Double, std::move(s), p}; }
    static TensorRef of(const uint8_t* p, std::vector<int64_t> s) { return {DType::UInt8, std::move(s), p}; }
    static TensorRef of(const int8_t* p, std::vector<int64_t> s) { return {DType::Int8, std::move(s), p}; }
};

// An output, owned (shared by copies of it). data() is dense and row-major.
class ONNX2GGML_API Tensor {
public:
    Tensor();
    const std::string& name() const;
    DType dtype() const;
    const std::vector<int64_t>& shape() const;
    int64_t numel() const;
    size_t nbytes() const;  // 0 for a String tensor
    const void* raw() const;
    template <class T>
    const T* data() const {
        return static_cast<const T*>(raw());
    }
    std::vector<std::string> strings() const;  // the elements of a String tensor
    double at(int64_t i) const;                // element i (row-major) of a number or Bool tensor, as a double
    TensorRef ref() const;                     // this tensor as an input of Session::run (valid while it lives)
    static Tensor copy(const TensorRef& r, const std::string& name = "");  // an owned copy of r
    struct Impl;
    explicit Tensor(std::shared_ptr<const Impl> impl);  // (made by Session::run)

private:
    friend struct TensorAccess;  // (the implementation's)
    std::shared_ptr<const Impl> impl_;
};

// numpy .npy files (the format of `onnx2ggml run --input` and `--output-dir`): every numeric dtype, bool and
// str (`<U`); errors name the file.
ONNX2GGML_API Tensor load_npy(const std::string& path);
ONNX2GGML_API void save_npy(const std::string& path, const Tensor& t);
// The values `onnx2ggml run --random-inputs SEED` feeds: deterministic in (dtype, shape, seed); floats in
// [-1, 1), integers in [0, 10), booleans 0/1 (not for String).
ONNX2GGML_API Tensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed);

// `onnx2ggml check`'s comparison of an output with its expected value: numpy.testing.assert_allclose's rule
// |got - expected| <= atol + rtol * |expected| per element, NaNs where the expected has them; integers and
// booleans exactly; dtypes and shapes must match.
struct Comparison {
    bool pass = true;
    double max_abs = 0, max_rel = 0, ref_max = 0;  // largest |got - expected|, and relative to |expected|
    std::string why;                               // the first reason for a failure
};
ONNX2GGML_API Comparison compare(const Tensor& got, const Tensor& expected, double rtol = 1e-3, double atol = 1e-7);

class ONNX2GGML_API Model {
public:
    // An .onnx file; its external data is read from the file's folder (never outside it).
    static Model load(const std::string& path);
    // A serialized ModelProto in memory; external data is read from base_dir.
    static Model from_bytes(const void* data, size_t size, const std::string& base_dir = ".");
    const std::string& path() const;
    const std::vector<TensorInfo>& inputs() const;
    const std::vector<TensorInfo>& outputs() const;
    struct Impl;
    explicit Model(std::shared_ptr<const Impl> impl);  // (made by load and from_bytes)

private:
    friend class Session;
    std::shared_ptr<const Impl> impl_;
};

struct SessionOptions {
    std::string backend = "auto";  // a ggml device name (case-insensitive prefix), "cpu" (ggml's CPU backend), "auto"
    int threads = 0;               // 0: the cores this process may use that are not busy elsewhere
    std::string weights = "f32";   // how MatMul/Gemm/Conv weights are stored: f32, f16, bf16, q8_0, q5_0, q4_0, ...
    std::vector<std::string> weight_rules;  // "REGEX=TYPE", first match wins (`--weights-rule`)
    std::string gguf;                       // weights from a GGUF written by `onnx2ggml quantize` for this model
    uint64_t max_memory = 0;  // the process-wide memory budget in bytes (`--max-memory`); 0 keeps the current one
    bool optimize = true;     // the fusion passes (`--no-optimize` turns them off)
    std::vector<std::string> disabled_passes;  // passes turned off by name (`--disable-pass`)
    size_t max_specializations = 8;            // cached specializations (input shapes + control values)
    // Graph inputs bound to these values at compile time (`--freeze`); run() then takes the other inputs.
    std::map<std::string, Tensor> frozen_inputs;
    // Drop the host copy of the weights once they are uploaded, when no other signature can come (static
    // shapes, no control inputs), or with one_signature after the first specialization: less memory
    // (`onnx2ggml run`); a second signature is then an error (BadInput).
    bool release_host_weights = false;
    bool one_signature = false;  // the caller runs one signature (input shapes and control values) only
    bool verbose = false;        // a line on stderr per run: specialization cache hit or miss, signature, time
};

// Where the nodes of a specialization run: the backend that run() names, the computing nodes per (backend,
// ggml op), the nodes that fall back to the CPU (those the device cannot run), the scheduler's splits and copies.
struct Placement {
    std::string backend;
    std::map<std::string, int> nodes;                        // graph nodes per backend
    std::map<std::pair<std::string, std::string>, int> ops;  // computing nodes per (backend, ggml op)
    struct Fallback {
        std::string name, op, backend;  // the ONNX value a node computes (node_N for intermediates), its op
    };
    std::vector<Fallback> fallback;
    int splits = 0, copies = 0;
    uint64_t copy_bytes = 0;
};

// Time per ggml op type and backend, and per node, over the runs since profiling was turned on (each node
// computed and timed alone); both by time, largest first.
struct Profile {
    struct Op {
        std::string op, backend;
        int nodes = 0;
        double ms = 0;
    };
    struct Node {
        std::string name, op, backend;
        double ms = 0;
    };
    std::vector<Op> ops;
    std::vector<Node> nodes;
};

struct SessionStats {
    uint64_t runs = 0, hits = 0, misses = 0, evictions = 0;  // specialization cache
    size_t cached = 0;                                       // specializations held now
    double specialize_ms = 0, last_specialize_ms = 0;
    std::vector<std::string> control_inputs;  // graph inputs whose values are specialized on, found so far
    uint64_t shared_weight_bytes = 0;         // the uploaded weights every specialization shares
};

namespace core {
struct Graph;  // (the implementation's)
}

class ONNX2GGML_API Session {
public:
    explicit Session(const Model& model, const SessionOptions& options = {});
    // Loads the model itself (as ONNX Runtime's InferenceSession(path) does) and holds its only copy: with
    // release_host_weights the host weights are then freed once uploaded (a Model the caller holds keeps them).
    explicit Session(const std::string& path, const SessionOptions& options = {});
    ~Session();
    Session(Session&&) noexcept;
    Session& operator=(Session&&) noexcept;
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    const Model& model() const;
    // Inputs in model().inputs() order; outputs in model().outputs() order.
    std::vector<Tensor> run(const std::vector<TensorRef>& inputs);
    // Inputs by name (every input given once); the outputs named, in that order (empty: all).
    std::vector<Tensor> run(const std::map<std::string, TensorRef>& feeds,
                            const std::vector<std::string>& output_names = {});
    // What run() takes, in order: model().inputs() less the frozen ones.
    std::vector<TensorInfo> inputs() const;
    // The shapes of run()'s inputs when only some are `given` (to make the others, e.g. random ones): a
    // given input's own (checked as run() checks it); for another, `shapes[name]`, else its static dims and
    // the symbolic dims the given inputs bind; BadInput on a dim left unknown. `sources[name]` (a file
    // name, say) is named in the messages about that input.
    std::vector<std::vector<int64_t>> input_shapes(const std::map<std::string, TensorRef>& given,
                                                   const std::map<std::string, std::vector<int64_t>>& shapes = {},
                                                   const std::map<std::string, std::string>& sources = {}) const;
    // Specializes (and caches) for these inputs without running: what a first run() would add to its time.
    void prepare(const std::vector<TensorRef>& inputs);
    SessionStats stats() const;
    std::string backend() const;  // the device of the latest run ("" before the first)
    // Profiling the latest run's specialization: while on, its nodes are computed and timed one by one
    // (slower); turning it on again starts the counts anew. profile() reports what was counted.
    void set_profiling(bool on);
    Profile profile() const;
    Placement placement() const;  // of the latest run's specialization (BadInput before the first run)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    void init(const Model& model, core::Graph&& loaded, const SessionOptions& options);
};

// `onnx2ggml compile`: writes the standalone ggml program of `model_path` into `out_dir` (its C++,
// the weights as GGUF, a CMakeLists.txt). input_shapes binds dynamic dims ("NAME" -> dims).
struct CompileOptions {
    std::map<std::string, std::vector<int64_t>> input_shapes;
    std::string weights = "f32";
    std::vector<std::string> weight_rules;
    std::string gguf;  // weights from a GGUF written by quantize() for this model, with its rules unless given
    bool optimize = true;
    std::vector<std::string> disabled_passes;
    std::map<std::string, Tensor> frozen_inputs;  // graph inputs bound to values (`--freeze`)
    uint64_t max_memory = 0;  // the process-wide memory budget in bytes (`--max-memory`); 0 keeps the current one
    // Dynamic dims of the generated program (`--dim`): a symbolic dim name of the inputs -> the values the
    // program takes (at most 128 combinations in all); it then reads its input shapes at run time.
    std::map<std::string, std::vector<int64_t>> dims;
};
struct CompileReport {
    size_t lines = 0, weights = 0;
    uint64_t weight_bytes = 0;
};
ONNX2GGML_API CompileReport compile(const std::string& model_path, const std::string& out_dir,
                                    const CompileOptions& options = {});

// `onnx2ggml quantize`: the GGUF of the model's weights as options.weights/weight_rules store them (in the forms
// the lowering keeps: type, transposition, shape), for SessionOptions::gguf and CompileOptions::gguf to take as
// they are. Dynamic dims are bound by options.input_shapes; options.gguf and options.dims are not taken.
struct QuantizeReport {
    size_t weights = 0;                // tensors written
    uint64_t bytes = 0;                // their bytes
    std::map<std::string, int> types;  // tensors per ggml type ("q8_0", "f32", ...)
};
ONNX2GGML_API QuantizeReport quantize(const std::string& model_path, const std::string& out_gguf,
                                      const CompileOptions& options = {});

// ---- What the compiler sees: `onnx2ggml inspect`, `compare`, `check TESTDIR`, `ops` ----------------------------

// inspect(): the model's graph as the compiler takes it. Graph options (input_shapes, frozen_inputs, passes, and
// the weights for a built graph) come from `graph`; its dims are not taken.
struct InspectOptions {
    CompileOptions graph;
    bool ggml_ops = false;  // build the ggml graph and count its nodes per ggml op
    std::string backend;    // non-empty: build on this backend (weights uploaded) and report the placement
    int threads = 0;
    enum class Picture { None, Onnx, Ggml } picture = Picture::None;  // a Graphviz DOT text of either graph
};
struct UnsupportedNode {
    std::string node, op_type, reason;
    int64_t opset = 0;
};
struct ModelReport {
    std::string path, producer;
    std::vector<std::pair<std::string, int64_t>> opsets;  // ("ai.onnx" for the default domain, version)
    size_t nodes = 0;                                     // as loaded
    int64_t parameters = 0;                               // elements of the initializers
    std::vector<TensorInfo> inputs, outputs;              // shapes as inferred (dims bound by input_shapes)
    std::map<std::string, int> op_histogram;              // nodes per op as loaded ("domain.Op" outside ai.onnx)
    std::vector<UnsupportedNode> unsupported;             // what keeps the model from running (empty: it runs)
    std::string shape_error;                              // non-empty: shapes not inferred, and why
    std::map<std::string, int> ggml_ops;                  // InspectOptions::ggml_ops: nodes per ggml op
    bool placed = false;                                  // InspectOptions::backend given and the graph built
    Placement placement;
    std::string dot;  // InspectOptions::picture: the ggml graph, or the ONNX graph (colored by backend when it
                      // builds; the ONNX graph uncolored for either picture when it does not)
};
ONNX2GGML_API ModelReport inspect(const std::string& model_path, const InspectOptions& options = {});

// compare_model(): every intermediate value of a run against an independent reference, and the first node
// whose error exceeds the tolerance while its inputs are within it.
//   reference "host": onnx2ggml's host evaluators (float32 computed as float64), independent of ggml's kernels;
//   "ort": ONNX Runtime (onnxruntime-node, from scripts/setup.sh --bench) on the model with every value an output;
//   otherwise a folder of NAME.npy files, one per value (names with bytes outside [A-Za-z0-9._-] as %XX).
struct CompareModelOptions {
    std::string reference = "host";
    double tolerance = 1e-4;  // max |got - ref| relative to max |ref| of the value
    SessionOptions session;   // backend, threads, weights, passes, frozen inputs
    bool no_inplace = false;  // ggml's in-place ops off (a value they overwrite is then comparable too)
    std::string work_dir;     // "ort": where its model, inputs and outputs go (made if missing)
    bool picture = false;     // ModelComparison::dot: the graph colored by error
};
struct ValueComparison {
    std::string node, op_type, ggml_ops, value;
    std::vector<int64_t> shape;
    bool compared = false;                     // both sides known (else `note` says why not)
    double max_abs = 0, max_ref = 0, rel = 0;  // rel = max_abs / max|ref| (inf where one side alone is NaN)
    std::string note;
    bool over = false;   // rel above the tolerance
    bool first = false;  // the first divergence
};
struct ModelComparison {
    std::vector<ValueComparison> rows;  // graph order (the optimized graph's nodes, each output)
    int first = -1;                     // the row of the first divergence; -1: none
    std::string reference, backend, dot;
    std::string reference_gaps;  // host: the first nodes it cannot compute (they and what follows are not compared)
};
// inputs: every input of the model by name (less options.session.frozen_inputs).
ONNX2GGML_API ModelComparison compare_model(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                                            const CompareModelOptions& options = {});

// The outputs of the host reference (compare_model's "host"), in the model's order and dtypes (`check TESTDIR
// --reference host`). Unsupported when it cannot compute one (the message names the nodes).
ONNX2GGML_API std::vector<Tensor> reference_outputs(const std::string& model_path,
                                                    const std::map<std::string, Tensor>& inputs,
                                                    const CompileOptions& options = {});

// A serialized onnx.TensorProto (the input_N.pb/output_N.pb of the ONNX backend tests); name() is its name.
ONNX2GGML_API Tensor load_tensor_proto(const std::string& path);

ONNX2GGML_API std::vector<std::string> supported_operators();  // "Abs", ..., "com.microsoft.FusedConv", ...
ONNX2GGML_API std::string build_info();  // ggml's and oneDNN's versions, the backends and their devices

// ---- Process-wide settings ------------------------------------------------------------------------------------

ONNX2GGML_API void set_max_memory(uint64_t bytes);        // the budget SessionOptions::max_memory sets
ONNX2GGML_API uint64_t parse_size(const std::string& s);  // "512M", "4G", "1000000" -> bytes (BadInput otherwise)
ONNX2GGML_API void set_progress_bars(bool on);  // drawn on a terminal for steps over half a second (default on)
// BadInput unless `weights` and every "REGEX=TYPE" rule are what SessionOptions takes (checked before any work).
ONNX2GGML_API void check_weights(const std::string& weights, const std::vector<std::string>& rules);
// When ggml aborts, print its message and exit instead of dumping core: code 2 (BadInput) for an RPC server gone
// mid-run, 4 (Internal) otherwise. For command-line programs: ggml's abort callback is process-wide.
ONNX2GGML_API void exit_on_ggml_abort();
// Serves the device that `backend` names to other processes through ggml RPC (their SessionOptions::backend
// "rpc:HOST:PORT"), printing "rpc-server: serving DEVICE (DESCRIPTION) on HOST:PORT" on stdout when it listens;
// returns only on failure (BadInput: no RPC in this build, or the address cannot be served). No authentication.
ONNX2GGML_API void serve_rpc(const std::string& host, int port, const std::string& backend = "cpu", int threads = 0);

ONNX2GGML_API const char* version();  // "0.1.0 (commit COMMIT)"

}  // namespace onnx2ggml
