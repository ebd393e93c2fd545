// The public C++ and C APIs (include/onnx2ggml/), linked through libonnx2ggml.so only: the same
// numbers as the CLI bit for bit on the exported torchvision models, errors that name the input,
// a Session outliving its Model, two sessions on two threads.
// Environment: O2G_CLI (the onnx2ggml program), O2G_MODELS (tests/models/export_models.py's
// folder), O2G_WORK (a scratch folder).
#include <dirent.h>
#include <malloc.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "onnx2ggml/onnx2ggml.h"
#include "onnx2ggml/onnx2ggml.hpp"

namespace {

std::string env(const char* k) {
    const char* v = std::getenv(k);
    return v ? v : "";
}

// A little-endian .npy file (version 1/2, C order): its dtype text, shape and bytes.
struct Npy {
    std::string descr;
    std::vector<int64_t> shape;
    std::string bytes;
};

Npy read_npy(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (all.size() < 10 || all.compare(1, 5, "NUMPY") != 0) throw std::runtime_error(path + ": not a .npy file");
    size_t hlen = all[6] == 1 ? size_t(uint8_t(all[8])) | size_t(uint8_t(all[9])) << 8
                              : size_t(uint8_t(all[8])) | size_t(uint8_t(all[9])) << 8 | size_t(uint8_t(all[10])) << 16;
    size_t start = all[6] == 1 ? 10 : 12;
    std::string h = all.substr(start, hlen);
    Npy r;
    size_t d = h.find("'descr': '") + 10;
    r.descr = h.substr(d, h.find('\'', d) - d);
    size_t s = h.find("'shape': (") + 10;
    std::stringstream dims(h.substr(s, h.find(')', s) - s));
    for (std::string tok; std::getline(dims, tok, ',');)
        if (tok.find_first_not_of(' ') != std::string::npos) r.shape.push_back(std::stoll(tok));
    r.bytes = all.substr(start + hlen);
    return r;
}

const char* kTorchvision[] = {"tinycnn",      "mlp", "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
                              "squeezenet1_1"};

std::string model_path(const std::string& m) { return env("O2G_MODELS") + "/" + m + "/model.onnx"; }

// The CLI's output 0 for the model's input.npy (two threads, as the API runs below).
Npy cli_output(const std::string& m, const std::string& input_name) {
    std::string dir = env("O2G_WORK") + "/cli_" + m;
    std::string cmd = "'" + env("O2G_CLI") + "' run '" + model_path(m) + "' --input " + input_name + "='" +
                      env("O2G_MODELS") + "/" + m + "/input.npy' --threads 2 --output-dir '" + dir + "' 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    return read_npy(dir + "/output_0.npy");
}

onnx2ggml::SessionOptions two_threads() {
    onnx2ggml::SessionOptions o;
    o.threads = 2;
    return o;
}

std::string bytes_of(const onnx2ggml::Tensor& t) { return std::string(static_cast<const char*>(t.raw()), t.nbytes()); }

void expect_same_bytes(const onnx2ggml::Tensor& t, const Npy& ref, const std::string& what) {
    ASSERT_EQ(t.shape(), ref.shape) << what;
    ASSERT_EQ(t.nbytes(), ref.bytes.size()) << what;
    EXPECT_EQ(std::memcmp(t.raw(), ref.bytes.data(), t.nbytes()), 0) << what << ": not bit for bit the CLI's output";
}

}  // namespace

TEST(CppApi, TorchvisionModelsMatchTheCliBitForBit) {
    for (const char* m : kTorchvision) {
        onnx2ggml::Model model = onnx2ggml::Model::load(model_path(m));
        ASSERT_EQ(model.inputs().size(), 1u) << m;
        EXPECT_EQ(model.inputs()[0].dtype, onnx2ggml::DType::Float) << m;
        Npy in = read_npy(env("O2G_MODELS") + "/" + m + "/input.npy");
        ASSERT_EQ(in.descr, "<f4");
        onnx2ggml::Session s(model, two_threads());
        auto outs = s.run({onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape)});
        ASSERT_EQ(outs.size(), model.outputs().size()) << m;
        EXPECT_EQ(outs[0].name(), model.outputs()[0].name) << m;
        expect_same_bytes(outs[0], cli_output(m, model.inputs()[0].name), m);
        EXPECT_FALSE(s.backend().empty()) << m;
        // by name, the output asked for by name: the same tensor
        auto named = s.run({{model.inputs()[0].name,
                             onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape)}},
                           {model.outputs()[0].name});
        ASSERT_EQ(named.size(), 1u);
        EXPECT_EQ(std::memcmp(named[0].raw(), outs[0].raw(), outs[0].nbytes()), 0) << m;
        onnx2ggml::SessionStats st = s.stats();
        EXPECT_EQ(st.runs, 2u);
        EXPECT_EQ(st.misses, 1u);  // one signature: specialized once, then found cached
        EXPECT_EQ(st.hits, 1u);
    }
}

// What the CLI's run/check/bench are written on: npy files, the random inputs of --random-inputs, check's
// comparison, the shapes of inputs not given, specializing before a timed run, profiling and placement.
TEST(CppApi, TheCliIsBuiltOnThePublicApi) {
    const std::string work = env("O2G_WORK"), in_path = env("O2G_MODELS") + "/tinycnn/input.npy";
    onnx2ggml::Tensor x = onnx2ggml::load_npy(in_path);
    Npy in = read_npy(in_path);
    ASSERT_EQ(x.shape(), in.shape);
    ASSERT_EQ(bytes_of(x), in.bytes);
    onnx2ggml::save_npy(work + "/api_copy.npy", onnx2ggml::Tensor::copy(x.ref(), "copy"));
    EXPECT_EQ(read_npy(work + "/api_copy.npy").bytes, in.bytes);  // written back bit for bit
    EXPECT_THROW(onnx2ggml::load_npy(work + "/missing.npy"), onnx2ggml::Error);

    onnx2ggml::Model model = onnx2ggml::Model::load(model_path("tinycnn"));
    onnx2ggml::Session s(model, two_threads());
    EXPECT_THROW(s.placement(), onnx2ggml::Error);  // nothing has run yet
    ASSERT_EQ(s.inputs().size(), 1u);
    auto shapes = s.input_shapes({});  // a static model: its declared shape
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0], in.shape);
    EXPECT_THROW(s.input_shapes({{"nope", x.ref()}}), onnx2ggml::Error);

    // --random-inputs 7: the CLI's outputs are the API's on random_tensor(dtype, shape, 7 + input index)
    onnx2ggml::Tensor r = onnx2ggml::random_tensor(onnx2ggml::DType::Float, in.shape, 7);
    EXPECT_EQ(bytes_of(r), bytes_of(onnx2ggml::random_tensor(onnx2ggml::DType::Float, in.shape, 7)));
    EXPECT_NE(bytes_of(r), bytes_of(onnx2ggml::random_tensor(onnx2ggml::DType::Float, in.shape, 8)));
    std::string dir = work + "/cli_random";
    std::string cmd = "'" + env("O2G_CLI") + "' run '" + model_path("tinycnn") +
                      "' --random-inputs 7 --threads 2 --output-dir '" + dir + "' 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    s.prepare({r.ref()});
    EXPECT_EQ(s.stats().misses, 1u);
    EXPECT_EQ(s.stats().runs, 0u);  // specialized, not run
    auto outs = s.run({r.ref()});
    expect_same_bytes(outs[0], read_npy(dir + "/output_0.npy"), "tinycnn --random-inputs 7");

    // check's comparison: equal passes; 1% off fails and says why
    onnx2ggml::Tensor same = onnx2ggml::load_npy(dir + "/output_0.npy");
    onnx2ggml::Comparison c = onnx2ggml::compare(outs[0], same);
    EXPECT_TRUE(c.pass);
    EXPECT_EQ(c.max_abs, 0.0);
    std::vector<float> off(static_cast<const float*>(same.raw()), static_cast<const float*>(same.raw()) + same.numel());
    for (float& v : off) v *= 1.01f;
    c = onnx2ggml::compare(outs[0], onnx2ggml::Tensor::copy(onnx2ggml::TensorRef::of(off.data(), same.shape())));
    EXPECT_FALSE(c.pass);
    EXPECT_FALSE(c.why.empty());
    EXPECT_NEAR(outs[0].at(0), double(static_cast<const float*>(outs[0].raw())[0]), 0.0);

    // --profile: every node timed alone while profiling is on; where the nodes ran
    s.set_profiling(true);
    s.run({r.ref()});
    onnx2ggml::Profile p = s.profile();
    s.set_profiling(false);
    ASSERT_FALSE(p.ops.empty());
    ASSERT_FALSE(p.nodes.empty());
    double total = 0;
    for (auto& op : p.ops) total += op.ms;
    EXPECT_GT(total, 0.0);
    onnx2ggml::Placement pl = s.placement();
    EXPECT_EQ(pl.backend, s.backend());
    EXPECT_FALSE(pl.ops.empty());
    EXPECT_FALSE(pl.nodes.empty());
}

TEST(CApi, ResnetMatchesTheCliAndNamesItsInputs) {
    o2g_model* model = nullptr;
    ASSERT_EQ(o2g_model_load(model_path("resnet18").c_str(), &model), O2G_OK) << o2g_last_error();
    ASSERT_EQ(o2g_model_input_count(model), 1u);
    ASSERT_EQ(o2g_model_output_count(model), 1u);
    const char* name = nullptr;
    int dtype = 0;
    size_t rank = 0;
    const int64_t* dims = nullptr;
    ASSERT_EQ(o2g_model_input(model, 0, &name, &dtype, &rank, &dims), O2G_OK);
    EXPECT_EQ(dtype, O2G_FLOAT);
    ASSERT_EQ(rank, 4u);
    EXPECT_EQ(dims[1], 3);
    EXPECT_EQ(o2g_model_input(model, 1, &name, nullptr, nullptr, nullptr), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("out of range"), std::string::npos);

    o2g_options* opts = o2g_options_create();
    EXPECT_EQ(o2g_options_set(opts, "threads", "2"), O2G_OK);
    EXPECT_EQ(o2g_options_set(opts, "threads", "two"), O2G_BAD_INPUT);
    EXPECT_EQ(o2g_options_set(opts, "colour", "blue"), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("unknown option 'colour'"), std::string::npos);
    o2g_session* s = nullptr;
    ASSERT_EQ(o2g_session_create(model, opts, &s), O2G_OK) << o2g_last_error();
    o2g_options_free(opts);
    o2g_model_free(model);  // the session keeps what it needs

    Npy in = read_npy(env("O2G_MODELS") + "/resnet18/input.npy");
    o2g_tensor_ref ref = {nullptr, O2G_FLOAT, in.shape.size(), in.shape.data(), in.bytes.data()};
    o2g_tensor* out = nullptr;
    ASSERT_EQ(o2g_session_run(s, &ref, 1, &out, 1), O2G_OK) << o2g_last_error();
    Npy cli = cli_output("resnet18", "input");
    ASSERT_EQ(o2g_tensor_nbytes(out), cli.bytes.size());
    EXPECT_EQ(std::memcmp(o2g_tensor_data(out), cli.bytes.data(), cli.bytes.size()), 0);
    EXPECT_EQ(o2g_tensor_dtype(out), O2G_FLOAT);
    EXPECT_EQ(std::vector<int64_t>(o2g_tensor_shape(out), o2g_tensor_shape(out) + o2g_tensor_rank(out)), cli.shape);
    o2g_tensor_free(out);

    // errors: the message names the input; nothing is written to the outputs
    o2g_tensor* none = nullptr;
    o2g_tensor_ref wrong_name = {"pixels", O2G_FLOAT, in.shape.size(), in.shape.data(), in.bytes.data()};
    EXPECT_EQ(o2g_session_run(s, &wrong_name, 1, &none, 1), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("'pixels' is not an input"), std::string::npos) << o2g_last_error();
    o2g_tensor_ref wrong_type = {"input", O2G_INT64, in.shape.size(), in.shape.data(), in.bytes.data()};
    EXPECT_EQ(o2g_session_run(s, &wrong_type, 1, &none, 1), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("input 'input'"), std::string::npos) << o2g_last_error();
    EXPECT_EQ(o2g_session_run(s, &ref, 1, &none, 2), O2G_BAD_INPUT);  // the model has one output
    EXPECT_EQ(none, nullptr);
    uint64_t runs = 0, hits = 0, misses = 0;
    ASSERT_EQ(o2g_session_stats(s, &runs, &hits, &misses), O2G_OK);
    EXPECT_EQ(misses, 1u);
    o2g_session_free(s);

    std::string out_dir = env("O2G_WORK") + "/c_compile_resnet18";
    int64_t fixed[4] = {1, 3, 224, 224};
    o2g_tensor_ref shape = {"input", 0, 4, fixed, nullptr};
    ASSERT_EQ(o2g_compile(model_path("resnet18").c_str(), out_dir.c_str(), &shape, 1, nullptr), O2G_OK)
        << o2g_last_error();
    EXPECT_TRUE(std::ifstream(out_dir + "/model.cpp").good());
    EXPECT_TRUE(std::ifstream(out_dir + "/model.gguf").good());
    EXPECT_EQ(o2g_compile("/nonexistent/model.onnx", out_dir.c_str(), nullptr, 0, nullptr), O2G_BAD_INPUT);

    o2g_model* missing = nullptr;
    EXPECT_EQ(o2g_model_load("/nonexistent/model.onnx", &missing), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("/nonexistent/model.onnx"), std::string::npos);
    EXPECT_EQ(missing, nullptr);
}

// The model tools the CLI's inspect, quantize, compare and check TESTDIR are written on: inspect's report, a
// quantized GGUF that a Session takes as the CLI's `run --gguf` does (bit for bit), the host reference against
// the session (float64 evaluators: within the op suite's tolerance), a backend-test tensor file.
TEST(CppApi, TheModelToolsAreWhatTheCliReports) {
    const std::string work = env("O2G_WORK");
    onnx2ggml::InspectOptions io;
    io.ggml_ops = true;
    io.backend = "cpu";
    onnx2ggml::ModelReport r = onnx2ggml::inspect(model_path("tinycnn"), io);
    EXPECT_TRUE(r.unsupported.empty());
    EXPECT_TRUE(r.shape_error.empty());
    EXPECT_EQ(r.producer, "pytorch");
    ASSERT_EQ(r.inputs.size(), 1u);
    EXPECT_EQ(r.inputs[0].shape, (std::vector<int64_t>{1, 3, 32, 32}));
    EXPECT_EQ(r.op_histogram["Conv"], 5);
    EXPECT_GT(r.ggml_ops["MUL_MAT"], 0);
    EXPECT_TRUE(r.placed);
    EXPECT_TRUE(r.placement.fallback.empty());
    EXPECT_THROW(onnx2ggml::inspect(work + "/missing.onnx"), onnx2ggml::Error);

    // quantize -> a Session on the GGUF == `onnx2ggml run --gguf` bit for bit
    const std::string gguf = work + "/api_r18_q8.gguf";
    onnx2ggml::CompileOptions qo;
    qo.weights = "q8_0";
    onnx2ggml::QuantizeReport q = onnx2ggml::quantize(model_path("resnet18"), gguf, qo);
    EXPECT_GT(q.weights, 0u);
    EXPECT_GE(q.types["q8_0"], 1);  // the classifier at least (convolution kernels: see `onnx2ggml --help`)
    onnx2ggml::SessionOptions so = two_threads();
    so.gguf = gguf;
    onnx2ggml::Session s(model_path("resnet18"), so);
    const std::string in_path = env("O2G_MODELS") + "/resnet18/input.npy";
    onnx2ggml::Tensor x = onnx2ggml::load_npy(in_path);
    auto out = s.run({x.ref()});
    std::string dir = work + "/cli_r18_q8";
    std::string cmd = "'" + env("O2G_CLI") + "' run '" + model_path("resnet18") + "' --input input='" + in_path +
                      "' --gguf '" + gguf + "' --threads 2 --output-dir '" + dir + "' 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    expect_same_bytes(out[0], read_npy(dir + "/output_0.npy"), "resnet18 q8_0");

    // the host reference (float64) against ggml's f32 run
    onnx2ggml::Session f32(model_path("tinycnn"), two_threads());
    onnx2ggml::Tensor t = onnx2ggml::load_npy(env("O2G_MODELS") + "/tinycnn/input.npy");
    auto ggml_out = f32.run({t.ref()});
    auto host_out = onnx2ggml::reference_outputs(model_path("tinycnn"), {{"input", t}});
    ASSERT_EQ(host_out.size(), 1u);
    EXPECT_EQ(host_out[0].dtype(), onnx2ggml::DType::Float);
    onnx2ggml::Comparison c = onnx2ggml::compare(ggml_out[0], host_out[0], 1e-3, 1e-6);
    EXPECT_TRUE(c.pass) << c.why;
    onnx2ggml::CompareModelOptions co;
    co.session = two_threads();
    onnx2ggml::ModelComparison mc = onnx2ggml::compare_model(model_path("tinycnn"), {{"input", t}}, co);
    EXPECT_EQ(mc.first, -1);
    EXPECT_GT(mc.rows.size(), 10u);

    // a tensor file of the ONNX backend tests (written here as the ONNX runner's are: a serialized TensorProto)
    EXPECT_THROW(onnx2ggml::load_tensor_proto(work + "/missing.pb"), onnx2ggml::Error);
    auto ops = onnx2ggml::supported_operators();
    EXPECT_NE(std::find(ops.begin(), ops.end(), "Conv"), ops.end());
}

// The C API's file-level calls: a session loading its model, the model it names, .npy in and out, quantize.
TEST(CApi, SessionOfAPathNpyFilesAndQuantize) {
    const std::string work = env("O2G_WORK");
    o2g_options* opts = o2g_options_create();
    ASSERT_EQ(o2g_options_set(opts, "threads", "2"), O2G_OK);
    ASSERT_EQ(o2g_options_set(opts, "release_host_weights", "1"), O2G_OK);
    o2g_session* s = nullptr;
    ASSERT_EQ(o2g_session_load(model_path("resnet18").c_str(), opts, &s), O2G_OK) << o2g_last_error();
    const o2g_model* m = o2g_session_model(s);
    ASSERT_EQ(o2g_model_input_count(m), 1u);
    const char* name = nullptr;
    ASSERT_EQ(o2g_model_input(m, 0, &name, nullptr, nullptr, nullptr), O2G_OK);
    EXPECT_STREQ(name, "input");
    o2g_tensor* in = nullptr;
    ASSERT_EQ(o2g_tensor_load_npy((env("O2G_MODELS") + "/resnet18/input.npy").c_str(), &in), O2G_OK);
    o2g_tensor_ref ref = {nullptr, o2g_tensor_dtype(in), o2g_tensor_rank(in), o2g_tensor_shape(in),
                          o2g_tensor_data(in)};
    o2g_tensor* out = nullptr;
    ASSERT_EQ(o2g_session_run(s, &ref, 1, &out, 1), O2G_OK) << o2g_last_error();
    Npy cli = cli_output("resnet18", "input");
    ASSERT_EQ(o2g_tensor_nbytes(out), cli.bytes.size());
    EXPECT_EQ(std::memcmp(o2g_tensor_data(out), cli.bytes.data(), cli.bytes.size()), 0);
    const std::string saved = work + "/c_api_out.npy";
    ASSERT_EQ(o2g_tensor_save_npy(saved.c_str(), out), O2G_OK);
    EXPECT_EQ(read_npy(saved).bytes, cli.bytes);
    o2g_tensor* copy = nullptr;
    ASSERT_EQ(o2g_tensor_copy(&ref, &copy), O2G_OK);
    EXPECT_EQ(std::memcmp(o2g_tensor_data(copy), o2g_tensor_data(in), o2g_tensor_nbytes(in)), 0);
    EXPECT_EQ(o2g_tensor_load_npy((work + "/missing.npy").c_str(), &copy), O2G_BAD_INPUT);
    EXPECT_NE(std::string(o2g_last_error()).find("missing.npy"), std::string::npos);
    for (o2g_tensor* t : {in, out, copy}) o2g_tensor_free(t);
    o2g_session_free(s);

    const std::string gguf = work + "/c_api_q8.gguf";
    ASSERT_EQ(o2g_options_set(opts, "weights", "q8_0"), O2G_OK);
    ASSERT_EQ(o2g_quantize(model_path("resnet18").c_str(), gguf.c_str(), nullptr, 0, opts), O2G_OK) << o2g_last_error();
    std::ifstream f(gguf, std::ios::binary);
    char magic[4] = {};
    f.read(magic, 4);
    EXPECT_EQ(std::string(magic, 4), "GGUF");
    EXPECT_EQ(o2g_quantize(model_path("resnet18").c_str(), "", nullptr, 0, opts), O2G_BAD_INPUT);
    o2g_options_free(opts);
}

TEST(CppApi, BadFeedsRaiseOneErrorNamingTheInput) {
    onnx2ggml::Model model = onnx2ggml::Model::load(model_path("tinycnn"));
    onnx2ggml::Session s(model, two_threads());
    const onnx2ggml::TensorInfo& in = model.inputs()[0];
    std::vector<float> x(1 << 20);
    auto category = [&](const std::vector<onnx2ggml::TensorRef>& feeds, std::string* msg) {
        try {
            s.run(feeds);
        } catch (const onnx2ggml::Error& e) {
            *msg = e.what();
            return e.category();
        }
        return onnx2ggml::ErrorCategory(0);
    };
    std::string msg;
    std::vector<int64_t> bad_shape = in.shape;
    bad_shape[1] += 1;
    EXPECT_EQ(category({onnx2ggml::TensorRef::of(x.data(), bad_shape)}, &msg), onnx2ggml::ErrorCategory::BadInput);
    EXPECT_NE(msg.find("'" + in.name + "'"), std::string::npos) << msg;
    std::vector<int64_t> xi(1 << 20);
    EXPECT_EQ(category({onnx2ggml::TensorRef::of(xi.data(), in.shape)}, &msg), onnx2ggml::ErrorCategory::BadInput);
    EXPECT_NE(msg.find("'" + in.name + "'"), std::string::npos) << msg;
    EXPECT_EQ(category({}, &msg), onnx2ggml::ErrorCategory::BadInput);
    EXPECT_EQ(category({onnx2ggml::TensorRef{onnx2ggml::DType::Float, in.shape, nullptr}}, &msg),
              onnx2ggml::ErrorCategory::BadInput);
    EXPECT_NE(msg.find("no data"), std::string::npos) << msg;
    EXPECT_THROW(s.run({{"nope", onnx2ggml::TensorRef::of(x.data(), in.shape)}}), onnx2ggml::Error);

    onnx2ggml::SessionOptions o;
    o.weights = "q3_z";
    try {
        onnx2ggml::Session bad(model, o);
        ADD_FAILURE() << "weights q3_z accepted";
    } catch (const onnx2ggml::Error& e) { EXPECT_EQ(e.exit_code(), 2); }
    o = {};
    o.backend = "no-such-device";
    EXPECT_THROW(
        {
            onnx2ggml::Session bad(model, o);
            bad.run({onnx2ggml::TensorRef::of(x.data(), in.shape)});
        },
        onnx2ggml::Error);
    try {
        onnx2ggml::Model::load(env("O2G_WORK") + "/missing.onnx");
        ADD_FAILURE() << "a missing file loaded";
    } catch (const onnx2ggml::Error& e) {
        EXPECT_EQ(e.category(), onnx2ggml::ErrorCategory::BadInput);
        EXPECT_NE(std::string(e.what()).find("missing.onnx"), std::string::npos);
    }
}

TEST(CppApi, FromBytesAndSessionOutlivingItsModel) {
    std::ifstream f(model_path("mlp"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    Npy in = read_npy(env("O2G_MODELS") + "/mlp/input.npy");
    auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape);
    std::unique_ptr<onnx2ggml::Session> s;
    {
        onnx2ggml::Model model = onnx2ggml::Model::from_bytes(bytes.data(), bytes.size());
        s = std::make_unique<onnx2ggml::Session>(model, two_threads());
    }  // the Model object is gone; the session holds its data
    EXPECT_EQ(s->model().inputs().size(), 1u);
    auto out = s->run({x});
    expect_same_bytes(out[0], cli_output("mlp", s->model().inputs()[0].name), "mlp from bytes");
    std::string garbage = "this is not a model";
    EXPECT_THROW(onnx2ggml::Model::from_bytes(garbage.data(), garbage.size()), onnx2ggml::Error);
}

TEST(CppApi, TwoSessionsOnTwoThreadsEqualOneAfterAnother) {
    const char* models[2] = {"resnet18", "mobilenet_v2"};
    std::vector<Npy> ins;
    std::vector<onnx2ggml::Model> ms;
    std::vector<std::string> sequential(2), concurrent(2);
    for (const char* m : models) {
        ins.push_back(read_npy(env("O2G_MODELS") + "/" + m + "/input.npy"));
        ms.push_back(onnx2ggml::Model::load(model_path(m)));
    }
    auto run = [&](int k, std::string* out) {
        onnx2ggml::SessionOptions o;
        o.threads = 1;
        onnx2ggml::Session s(ms[size_t(k)], o);
        for (int rep = 0; rep < 3; ++rep) {
            auto y = s.run({onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(ins[size_t(k)].bytes.data()),
                                                     ins[size_t(k)].shape)});
            std::string bytes(static_cast<const char*>(y[0].raw()), y[0].nbytes());
            if (rep > 0 && bytes != *out) *out = "differs between runs";
            else *out = bytes;
        }
    };
    for (int k = 0; k < 2; ++k) run(k, &sequential[size_t(k)]);
    std::thread a(run, 0, &concurrent[0]), b(run, 1, &concurrent[1]);
    a.join();
    b.join();
    for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(concurrent[size_t(k)].size(), sequential[size_t(k)].size()) << models[k];
        EXPECT_TRUE(concurrent[size_t(k)] == sequential[size_t(k)]) << models[k] << ": concurrent run differs";
    }
    // one Session shared by two threads: runs are serialized, the results are the same
    onnx2ggml::SessionOptions o;
    o.threads = 1;
    onnx2ggml::Session shared(ms[0], o);
    auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(ins[0].bytes.data()), ins[0].shape);
    std::string r1, r2;
    std::thread c([&] {
        auto y = shared.run({x});
        r1.assign(static_cast<const char*>(y[0].raw()), y[0].nbytes());
    });
    std::thread d([&] {
        auto y = shared.run({x});
        r2.assign(static_cast<const char*>(y[0].raw()), y[0].nbytes());
    });
    c.join();
    d.join();
    EXPECT_TRUE(r1 == sequential[0] && r2 == sequential[0]);
}

// An application's worker threads: a Session first run on one thread, then on others, one at a
// time (oneDNN's default scratchpad is per thread: the backend makes its primitives anew for a new
// thread). Every run gives the same bytes.
TEST(CppApi, ASessionRunsOnWhicheverThreadCallsIt) {
    for (const char* m : kTorchvision) {
        onnx2ggml::Model model = onnx2ggml::Model::load(model_path(m));
        Npy in = read_npy(env("O2G_MODELS") + "/" + m + "/input.npy");
        auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape);
        onnx2ggml::Session s(model, two_threads());
        auto first = s.run({x});
        std::string ref(static_cast<const char*>(first[0].raw()), first[0].nbytes());
        for (int k = 0; k < 3; ++k) {
            std::string got;
            std::thread t([&] {
                auto y = s.run({x});
                got.assign(static_cast<const char*>(y[0].raw()), y[0].nbytes());
            });
            t.join();
            EXPECT_TRUE(got == ref) << m << ": a run on another thread differs";
        }
        EXPECT_TRUE(std::string(static_cast<const char*>(s.run({x})[0].raw()), ref.size()) == ref) << m;
    }
}

namespace {

// VmRSS in kB and the open descriptors of this process
std::pair<long, int> rss_and_fds() {
    std::ifstream f("/proc/self/status");
    long rss = 0;
    for (std::string line; std::getline(f, line);)
        if (line.rfind("VmRSS:", 0) == 0) rss = std::stol(line.substr(6));
    int fds = 0;
    if (DIR* d = opendir("/proc/self/fd")) {  // (its own descriptor counted: the same every time)
        while (dirent* ent = readdir(d)) fds += ent->d_name[0] != '.';
        closedir(d);
    }
    return {rss, fds};
}

}  // namespace

// `onnx2ggml run` holds one signature and releases the host copy of the weights once uploaded: a Session that
// loads the model itself holds its only copy, so they are freed (resnet18: 45 MB); a Model the caller keeps
// holds them (measured as VmRSS while each session lives, after a warm-up session: thread pools, caches).
TEST(CppApi, ASessionOfAPathFreesTheHostWeights) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "a sanitizer's allocator keeps freed memory (quarantine): RSS does not follow what is live";
#endif
    // large blocks from mmap, returned when freed: RSS then follows what is live, whatever earlier tests freed
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    malloc_trim(0);
    Npy in = read_npy(env("O2G_MODELS") + "/resnet18/input.npy");
    auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape);
    onnx2ggml::SessionOptions o = two_threads();
    o.release_host_weights = o.one_signature = true;
    auto grown_kb = [&](bool by_path) {
        long before = rss_and_fds().first;
        if (by_path) {
            onnx2ggml::Session s(model_path("resnet18"), o);
            s.run({x});
            return rss_and_fds().first - before;
        }
        onnx2ggml::Model m = onnx2ggml::Model::load(model_path("resnet18"));
        onnx2ggml::Session s(m, o);
        s.run({x});
        return rss_and_fds().first - before;
    };
    grown_kb(true);
    long with_model = grown_kb(false), by_path = grown_kb(true);
    EXPECT_LT(by_path, with_model - 10 * 1024) << "a Session of a path holds the host weights (" << by_path
                                               << " kB against " << with_model << " kB with a Model kept)";
}

// --max-memory is the process's budget, not one session's: with room for one resnet18 session (its
// ~45 MiB of weights and its compute buffers) a second one in the same process is refused (category 2,
// naming the limit) while the first lives, and fits once it is gone, with the same bytes.
TEST(CppApi, MaxMemoryIsTheProcesssBudget) {
    onnx2ggml::Model model = onnx2ggml::Model::load(model_path("resnet18"));
    Npy in = read_npy(env("O2G_MODELS") + "/resnet18/input.npy");
    auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape);
    onnx2ggml::SessionOptions o = two_threads();
    o.max_memory = uint64_t(80) << 20;
    std::string ref;
    {
        onnx2ggml::Session a(model, o);
        ref = bytes_of(a.run({x})[0]);
        onnx2ggml::Session b(model, o);
        try {
            b.run({x});
            ADD_FAILURE() << "two resnet18 sessions fit in 80 MiB";
        } catch (const onnx2ggml::Error& e) {
            EXPECT_EQ(e.exit_code(), 2);
            EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("this process's sessions hold"), std::string::npos) << e.what();
        }
        EXPECT_EQ(bytes_of(a.run({x})[0]), ref);  // the first is unharmed
    }
    onnx2ggml::Session c(model, o);
    EXPECT_EQ(bytes_of(c.run({x})[0]), ref);
    onnx2ggml::SessionOptions none;  // the budget is process-wide: give the tests after this one room again
    none.max_memory = uint64_t(1) << 40;
    onnx2ggml::Session restore(model, none);
}

// Long-running use (issue 19): one Session of O2G_SOAK_MODEL (default tinycnn) run O2G_SOAK_RUNS times
// (default 2000; the figures in docs/performance.md are of 10,000): after a warm-up (the first tenth) resident
// memory grows by less than 1% and no descriptor stays open; then two more Sessions run on two threads at once,
// and their outputs are the bytes of a run alone, every time.
TEST(Soak, LongRunningSessionsHoldTheirMemory) {
    const char* e = std::getenv("O2G_SOAK_RUNS");
    const int runs = e ? std::atoi(e) : 2000;
    ASSERT_GE(runs, 100);
    const std::string name = env("O2G_SOAK_MODEL").empty() ? "tinycnn" : env("O2G_SOAK_MODEL");
    onnx2ggml::Model model = onnx2ggml::Model::load(model_path(name));
    Npy in = read_npy(env("O2G_MODELS") + "/" + name + "/input.npy");
    auto x = onnx2ggml::TensorRef::of(reinterpret_cast<const float*>(in.bytes.data()), in.shape);
    std::string ref;
    {
        onnx2ggml::Session alone(model, two_threads());
        ref = bytes_of(alone.run({x})[0]);
    }
    onnx2ggml::Session s(model, two_threads());
    std::pair<long, int> warm{0, 0}, most{0, 0};
    int wrong = 0;
    for (int i = 0; i < runs; ++i) {
        if (bytes_of(s.run({x})[0]) != ref) ++wrong;
        if (i == runs / 10) warm = most = rss_and_fds();
        if (i > runs / 10 && i % 50 == 0) {
            std::pair<long, int> now = rss_and_fds();
            most = {std::max(most.first, now.first), std::max(most.second, now.second)};
        }
    }
    std::pair<long, int> last = rss_and_fds();
    EXPECT_EQ(wrong, 0) << "runs whose output differs from the first session's";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // (a sanitizer's allocator keeps freed memory in quarantine: RSS follows what earlier tests freed, not what
    // this session holds; its leak checker covers the leaks at exit)
    const bool rss_follows_live_memory = false;
#else
    const bool rss_follows_live_memory = true;
#endif
    if (rss_follows_live_memory)
        EXPECT_LT(double(std::max(most.first, last.first) - warm.first), 0.01 * double(warm.first))
            << "resident memory grew from " << warm.first << " kB to " << most.first << " kB after the warm-up";
    EXPECT_LE(last.second, warm.second) << "open descriptors grew from " << warm.second << " to " << last.second;
    printf("soak: %s, %d runs, RSS after warm-up %ld kB, at most %ld kB; descriptors %d -> %d\n", name.c_str(), runs,
           warm.first, std::max(most.first, last.first), warm.second, last.second);
    // two sessions on two threads at once, each the bytes of a run alone every time
    std::atomic<int> differ{0};
    auto worker = [&] {
        onnx2ggml::Session t(model, two_threads());
        for (int i = 0; i < runs / 10; ++i)
            if (bytes_of(t.run({x})[0]) != ref) ++differ;
    };
    std::thread a(worker), b(worker);
    a.join();
    b.join();
    EXPECT_EQ(differ.load(), 0) << "concurrent runs that differ from a run alone";
}
