// The builder: every ggml call of the lowering goes through Builder::call (macro G),
// which makes the call on a real ggml context and, when recording, writes the same call
// as one line of C++. `run` executes the graph that was built; `compile` emits the
// recorded lines. Both come from the same calls, so they cannot disagree.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ggml.h"
#include "ir/tensor.h"
#include "lower/weights.h"

namespace onnx2ggml::core {

// A weight of the graph. `host` is its source (often the initializer's own storage: a file
// mapping or the bytes taken over from the protobuf); the stored form (ggml type, last-two-dims
// transpose) is made by data() one weight at a time, when it is uploaded or written to GGUF, so
// that no second copy of all weights is ever held.
struct Weight {
    std::string onnx_name;  // value it came from ("" for derived constants)
    Tensor host;            // source data, row-major, rank <= 4
    ggml_tensor* t = nullptr;
    bool transpose = false;    // store host transposed in its last two dims
    bool initializer = false;  // host is an initializer's value (as loaded: the same in every specialization)
    std::shared_ptr<const GgufWeights> gguf;  // --gguf: the stored bytes are its tensor gguf_index
    int64_t gguf_index = -1;
    Tensor data() const;  // the bytes as stored: ggml_nbytes(t) of them
    // The same bytes written to dst (host memory of ggml_nbytes(t)): a transpose or F16 conversion straight into
    // it, with no intermediate copy (the weights of a model are made this way at load: the SD UNet's 3.3 GB)
    void write(void* dst) const;
};

// Tensors that several built graphs of one model share: the model's initializers, stored once for
// every run-time specialization (runtime/specializing_session.h). get() returns the pool's tensor
// of that stored form (key: initializer name, ggml type, ne, transpose); `*fresh` says that it was
// made for this graph, which must then upload it.
struct WeightShare {
    virtual ~WeightShare() = default;
    virtual ggml_tensor* get(const std::string& key, ggml_type type, const int64_t ne[4], bool* fresh) = 0;
    virtual void begin(size_t max_tensors) = 0;  // a lowering starts (again): forget what an attempt made
};

struct HostKernel;  // lower/host_kernel.h

class Builder {
public:
    Builder(ggml_context* compute, ggml_context* weights, bool record) : ctx(compute), wctx(weights), record_(record) {}

    // Thrown when a ggml context would run out of tensor slots; build_graph retries larger.
    struct ContextFull {};

    template <class F, class... A>
    ggml_tensor* call(const char* fn, F f, A... a) {
        reserve(ctx);
        ggml_tensor* r = f(ctx, a...);
        if (record_) emit(r, fn, {fmt(a)...});
        return r;
    }

    // `shareable`: host is an initializer's value, the same in every specialization of the model
    ggml_tensor* weight(const Tensor& host, ggml_type type, const std::string& onnx_name, bool transpose = false,
                        bool shareable = false);
    WeightShare* share = nullptr;  // where shareable weights live (none: every weight is this graph's)
    // How the float MatMul/Gemm/Conv weights are stored (--weights, --weights-rule: WeightRules::choose),
    // and where an initializer's stored bytes come from (--gguf: read as they are, not converted again)
    WeightRules weight_rules;
    // `compare`: keep every value readable after a run: plain layouts only (no backend-private
    // layouts between nodes); lower_graph then fills `values` and `node_ops`
    bool keep_values = false;
    bool no_inplace =
        false;  // `compare --no-inplace`: no node writes onto another node's output (see LowerCtx::sole_reader)
    std::vector<ggml_tensor*> values;   // after lower_graph: value id -> the ggml tensor that holds it (nullptr: none)
    std::vector<std::string> node_ops;  // graph node index -> the ggml ops its lowering made ("" if none)
    // A host kernel's node (lower/host_kernel.h): a ggml custom op; recorded as o2g_host::kernel(ctx, K, ...) with K
    // its index in host_kernels (codegen stores their records in the GGUF file).
    ggml_tensor* custom(ggml_type type, const int64_t ne[4], std::vector<ggml_tensor*> args,
                        std::shared_ptr<HostKernel> k);
    std::vector<std::shared_ptr<HostKernel>> host_kernels;  // owned here: the graph's custom ops point at them
    ggml_tensor* input(int index, ggml_type type, const int64_t ne[4], const std::string& onnx_name);
    void name(ggml_tensor* t, const std::string& onnx_name);
    void comment(const std::string& text);
    void mark_output(int index, ggml_tensor* t);

    ggml_context* ctx;
    ggml_context* wctx;
    std::vector<Weight> weights;
    std::vector<ggml_tensor*> inputs, outputs;
    std::vector<int64_t> index_bound;  // per input: > 0 when the input indexes a dim of that size
                                       // (negatives are normalized and the range checked at upload)
    std::vector<std::string> lines;    // recorded C++ statements
    bool recording() const { return record_; }
    std::string var(const ggml_tensor* t) const;

private:
    static void reserve(ggml_context* c) {  // room for the few tensors one ggml call may create
        if (ggml_used_mem(c) + 8 * ggml_tensor_overhead() > ggml_get_mem_size(c)) throw ContextFull{};
    }
    void emit(ggml_tensor* r, const char* fn, std::vector<std::string> args);
    std::string fmt(ggml_tensor* t) const { return var(t); }
    static std::string fmt(int v) { return std::to_string(v); }
    static std::string fmt(int64_t v) { return std::to_string(v) + "LL"; }
    static std::string fmt(uint32_t v) { return std::to_string(v) + "u"; }
    static std::string fmt(size_t v) { return std::to_string(v) + "ull"; }
    static std::string fmt(std::nullptr_t) { return "nullptr"; }
    static std::string fmt(ggml_custom1_op_t f) { return kernel_name(reinterpret_cast<void*>(f)); }
    static std::string fmt(ggml_custom2_op_t f) { return kernel_name(reinterpret_cast<void*>(f)); }
    static std::string fmt(ggml_custom3_op_t f) { return kernel_name(reinterpret_cast<void*>(f)); }
    static std::string kernel_name(void* f);  // "o2g::erf" (src/lower/kernels.cpp)
    static std::string fmt(bool v) { return v ? "true" : "false"; }
    static std::string fmt(float v);
    static std::string fmt(ggml_op_pool v) { return v == GGML_OP_POOL_MAX ? "GGML_OP_POOL_MAX" : "GGML_OP_POOL_AVG"; }
    static std::string fmt(ggml_type v) { return std::string("GGML_TYPE_") + upper(ggml_type_name(v)); }
    static std::string fmt(ggml_unary_op v) { return std::string("GGML_UNARY_OP_") + ggml_unary_op_name(v); }
    static std::string upper(std::string s);

    bool record_;
    std::unordered_map<const ggml_tensor*, std::string> vars_;
    int next_ = 0;
};

#define G(b, fn, ...) (b).call(#fn, fn, __VA_ARGS__)

// --weights: a type by its ggml name ("f32", "f16", "q8_0", "q4_K", ...; GGML_TYPE_COUNT when not one of
// weight_type_names()).
ggml_type weight_type_by_name(const std::string& name);
std::string weight_type_names();  // "f32, f16, q8_0, ..."

// C++ text helpers shared with the code generator.
std::string cpp_string_literal(const std::string& s);  // escaped, inert for any input
std::string cpp_comment_text(const std::string& s);    // printable ASCII, no comment terminators

}  // namespace onnx2ggml::core
