#include "codegen/codegen.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gguf.h"
#include "lower/host_kernel.h"
#include "lower/lower.h"
#include "o2g_build_version.h"
#include "runtime/build.h"
#include "util/error.h"
#include "util/progress.h"

namespace onnx2ggml::core {

namespace templates {
const char* get(const std::string& name);
const char* const* names();
}  // namespace templates
namespace host_sources {  // the evaluators' sources (CMakeLists.txt: host_sources.cpp)
const char* get(const std::string& name);
const char* const* names();
}  // namespace host_sources

static void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) bad_input(path + ": cannot write file");
}

static void make_dirs(const std::string& dir) {
    std::string cur;
    std::stringstream ss(dir);
    std::string seg;
    if (!dir.empty() && dir[0] == '/') cur = "/";
    while (std::getline(ss, seg, '/')) {
        if (seg.empty()) continue;
        cur += seg + "/";
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
            bad_input(dir + ": cannot create folder: " + std::strerror(errno));
    }
}

static void set_arr_str(gguf_context* gg, const std::string& key, const std::vector<std::string>& v) {
    std::vector<const char*> p;
    for (auto& s : v) p.push_back(s.c_str());
    gguf_set_arr_str(gg, key.c_str(), p.data(), p.size());
}

void write_gguf(const std::string& path, const std::vector<Weight>& weights,
                const std::vector<std::pair<std::string, std::string>>& meta,
                const std::vector<std::pair<std::string, std::vector<std::string>>>& arrays,
                const std::vector<std::pair<std::string, std::string>>& blobs) {
    gguf_context* gg = gguf_init_empty();
    for (auto& kv : meta) gguf_set_val_str(gg, kv.first.c_str(), kv.second.c_str());
    for (auto& kv : arrays) set_arr_str(gg, kv.first, kv.second);
    for (auto& kv : blobs)
        if (!kv.second.empty())
            gguf_set_arr_data(gg, kv.first.c_str(), GGUF_TYPE_UINT8, kv.second.data(), kv.second.size());
    std::vector<std::string> onnx_names;
    std::vector<uint8_t> transposed;
    for (const auto& w : weights)
        onnx_names.push_back(w.initializer ? w.onnx_name : ""), transposed.push_back(w.transpose);
    set_arr_str(gg, gguf_keys::onnx_names, onnx_names);
    // an empty numeric array would reach fwrite(nullptr, ...) inside gguf.cpp: a model without
    // weights has no transposed key (the reader takes a missing key as "no tensors")
    if (!transposed.empty())
        gguf_set_arr_data(gg, gguf_keys::transposed, GGUF_TYPE_UINT8, transposed.data(), transposed.size());
    ggml_init_params p = {ggml_tensor_overhead() * (weights.size() + 1), nullptr, true};
    ggml_context* tctx = ggml_init(p);
    for (const auto& w : weights) {
        ggml_tensor* t = ggml_dup_tensor(tctx, w.t);
        ggml_set_name(t, w.t->name);
        gguf_add_tensor(gg, t);  // header only: the data follows, one weight at a time
    }
    size_t align = gguf_get_alignment(gg);
    FILE* f = std::fopen(path.c_str(), "wb");
    bool ok = f && gguf_write_to_file_ptr(gg, f, true);
    static const char zeros[64] = {0};
    auto pad = [&]() {
        long pos = std::ftell(f);
        size_t n = pos < 0 ? 0 : (align - size_t(pos) % align) % align;
        return pos >= 0 && std::fwrite(zeros, 1, n, f) == n;
    };
    Progress bar("writing " + path, weights.size());
    for (size_t i = 0; ok && i < weights.size(); ++i) {
        bar.update(i);
        ok = pad();
        Tensor d = weights[i].data();
        ok = ok && std::fwrite(d.data(), 1, d.nbytes(), f) == d.nbytes();
    }
    ok = ok && (weights.empty() || pad());
    if (f && std::fclose(f) != 0) ok = false;
    gguf_free(gg);
    ggml_free(tctx);
    if (!ok) bad_input(path + ": cannot write GGUF file");
}

// o2g_host.h and o2g_host/ (the sources of onnx2ggml's host evaluators and o2g_host.cpp) for a graph with host
// kernels; for one without, neither (what an earlier compile into the folder left is removed)
static void write_host_sources(const std::string& outdir, bool needed) {
    const std::string dir = outdir + "/o2g_host";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) bad_input(dir + ": cannot remove the earlier host sources: " + ec.message());
    if (!needed) {
        std::filesystem::remove(outdir + "/o2g_host.h", ec);  // (the model.cpp written now does not include it)
        return;
    }
    write_text(outdir + "/o2g_host.h", templates::get("o2g_host.h"));
    make_dirs(dir);
    write_text(dir + "/o2g_host.cpp", templates::get("o2g_host.cpp"));
    for (const char* const* n = host_sources::names(); *n; ++n) {
        std::string name = *n, path = dir + (name == "op_families.inc" ? "/" : "/src/") + name;
        make_dirs(path.substr(0, path.rfind('/')));
        write_text(path, host_sources::get(name));
    }
}

static std::string io_table(const Graph& g, const std::vector<int>& ids, const char* name,
                            const std::vector<int64_t>& bounds, const std::vector<std::vector<int>>& sym) {
    std::ostringstream s;
    s << "static const io_info " << name << "[] = {\n";
    for (size_t k = 0; k < ids.size(); ++k) {
        const Value& v = g.values[ids[k]];
        s << "    {" << cpp_string_literal(v.name) << ", " << int(v.dtype) << ", "
          << (k < bounds.size() ? bounds[k] : 0) << "LL, " << v.shape.size() << ", {";
        for (size_t i = 0; i < v.shape.size(); ++i) {
            int j = k < sym.size() && i < sym[k].size() ? sym[k][i] : -1;  // a dynamic dim: -1-j
            s << (i ? ", " : "") << (j >= 0 ? -1 - j : v.shape[i]) << "LL";
        }
        if (v.shape.empty()) s << "0";
        s << "}},\n";
    }
    s << "};\n";
    return s.str();
}

GgufMeta gguf_model_meta(const Graph& loaded, const WeightRules& rules) {
    GgufMeta m;
    std::vector<std::string> sigs = initializer_signatures(loaded), texts;
    for (auto& r : rules.rules) texts.push_back(r.text);
    m.strings = {{gguf_keys::model_key, model_key(sigs)}, {gguf_keys::weights, ggml_type_name(rules.base)}};
    m.arrays = {{gguf_keys::initializers, sigs}, {gguf_keys::rules, texts}};
    return m;
}

Recorded::Recorded() = default;
Recorded::Recorded(Recorded&&) noexcept = default;
Recorded& Recorded::operator=(Recorded&&) noexcept = default;
Recorded::~Recorded() = default;

Recorded record_program(Graph& g, const WeightRules& weight_rules) {
    for (int id : g.inputs)
        if (g.values[id].shape.size() > 8) unsupported(g.path + ": input rank above 8");
    for (int id : g.outputs)
        if (g.values[id].shape.size() > 8) unsupported(g.path + ": output rank above 8");
    for (int id : g.inputs)
        if (shape_numel(g.values[id].shape) == 0)
            unsupported(g.path + ": graph input '" + g.values[id].name +
                        "' has no elements: generated programs take non-empty inputs");
    for (const std::vector<int>* ids : {&g.inputs, &g.outputs})
        for (int id : *ids)
            if (ggml_type_for(g.values[id].dtype) == GGML_TYPE_COUNT || g.values[id].dtype == DType::BF16)
                unsupported(g.path + ": graph " + (ids == &g.inputs ? "input '" : "output '") + g.values[id].name +
                            "' has dtype " + dtype_name(g.values[id].dtype) +
                            ": generated programs take the numeric dtypes of .npy files (`run` takes all)");
    Recorded r;
    r.bg = build_graph(g, true, weight_rules);
    Builder& b = *r.bg->b;
    for (size_t k = 0; k < g.outputs.size(); ++k)
        if (!b.outputs[k] && shape_numel(g.values[g.outputs[k]].shape) > 0)
            unsupported(g.path + ": graph output '" + g.values[g.outputs[k]].name +
                        "' is a constant that ggml tensors cannot hold exactly (int64 beyond int32): `run` returns it");
    std::ostringstream m;
    m << "void model::build(ggml_context * ctx, ggml_tensor ** w, ggml_tensor ** in, ggml_tensor ** out, "
         "const int64_t * d) {\n"
      << "    (void)w;\n"
      << "@DIMS@\n";
    for (const auto& line : b.lines) {
        bool decl = line.rfind("ggml_tensor * ", 0) == 0;
        m << "    " << (decl ? "[[maybe_unused]] " : "") << line << "\n";
    }
    m << "}\n\n"
      << "void model::output_shape(int k, const int64_t * d, int64_t * s) {\n"
      << "@DIMS@\n"
      << "    switch (k) {\n";
    for (size_t k = 0; k < g.outputs.size(); ++k) {
        m << "        case " << k << ":";
        const Shape& sh = g.values[g.outputs[k]].shape;
        for (size_t i = 0; i < sh.size(); ++i) m << " s[" << i << "] = " << sh[i] << "LL;";
        m << " return;\n";
    }
    m << "        default: return;\n    }\n}\n";
    r.code = m.str();
    for (size_t k = 0; k < b.host_kernels.size(); ++k) r.blobs.push_back(save_host_kernel(*b.host_kernels[k]));
    r.max_tensors = r.bg->max_tensors;
    r.graph_size = r.bg->graph_size;
    return r;
}

EmitReport write_program(const Graph& g, const Recorded& r, const std::string& code, const ProgramDims& dims,
                         const std::string& outdir, const std::string& model_path, const GgufMeta& model_meta) {
    const Builder& b = *r.bg->b;
    make_dirs(outdir);
    std::vector<int64_t> bounds = b.index_bound;
    std::ostringstream h;
    h << "// Generated by onnx2ggml from " << cpp_comment_text(model_path) << ". Do not edit.\n"
      << "#pragma once\n#include <cstdint>\n#include \"ggml.h\"\n\nnamespace model {\n\n"
      << "// index_bound > 0: an integer input that indexes a dim of that size (range-checked, negatives wrapped);\n"
      << "// a shape entry -1-j: the dynamic dim dims[j] (compile --dim), taken from the input given\n"
      << "struct io_info { const char * name; int onnx_dtype; int64_t index_bound; int rank; int64_t shape[8]; };\n\n"
      << "// the onnx2ggml that wrote this program (its --version prints it)\n"
      << "constexpr const char * generator = \"onnx2ggml " ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")\";\n"
      << "constexpr int n_inputs = " << g.inputs.size() << ";\n"
      << "constexpr int n_outputs = " << g.outputs.size() << ";\n"
      << "constexpr int n_weights = " << b.weights.size() << ";\n"
      << "constexpr size_t max_tensors = " << r.max_tensors << ";\n"
      << "constexpr size_t graph_size = " << r.graph_size << ";\n"
      << "// nodes computed by onnx2ggml's host evaluators (o2g_host.h); their records are in model.gguf\n"
      << "constexpr int n_host_kernels = " << r.blobs.size() << ";\n"
      << (r.blobs.empty() ? "" : "#define O2G_HOST_KERNELS 1\n") << "\n"
      << "// dynamic dims (compile --dim): the values each may take; the program takes any combination of them\n"
      << "struct dim_info { const char * name; int n_values; const int64_t * values; };\n"
      << "constexpr int n_dims = " << dims.names.size() << ";\n";
    for (size_t j = 0; j < dims.names.size(); ++j) {
        h << "static const int64_t dim" << j << "_values[] = {";
        for (size_t i = 0; i < dims.values[j].size(); ++i) h << (i ? ", " : "") << dims.values[j][i] << "LL";
        h << "};\n";
    }
    h << "static const dim_info dims[] = {";
    for (size_t j = 0; j < dims.names.size(); ++j)
        h << (j ? ", " : "") << "{" << cpp_string_literal(dims.names[j]) << ", " << dims.values[j].size() << ", dim"
          << j << "_values}";
    if (dims.names.empty()) h << "{\"\", 0, nullptr}";
    h << "};\n\n"
      << io_table(g, g.inputs, "inputs", bounds, dims.input_dims) << "\n"
      << "// (output shapes: output_shape(); the table holds those of the first value of every dynamic dim)\n"
      << io_table(g, g.outputs, "outputs", {}, {}) << "\n"
      << "// Builds the graph: w = weights (w0.. in model.gguf), in = inputs (created here), out = outputs;\n"
      << "// d = the values of the dynamic dims (n_dims of them)\n"
      << "void build(ggml_context * ctx, ggml_tensor ** w, ggml_tensor ** in, ggml_tensor ** out, const int64_t * d);\n"
      << "// The shape of output k (its rank: outputs[k].rank) for the dynamic dims d\n"
      << "void output_shape(int k, const int64_t * d, int64_t * s);\n\n"
      << "}  // namespace model\n";

    std::ostringstream m;
    m << "// Generated by onnx2ggml from " << cpp_comment_text(model_path) << ". Do not edit.\n"
      << "// One ggml call per line; comments name the ONNX node each block comes from.\n"
      << dims.note << "#include <cmath>\n#include \"model.h\"\n#include \"o2g_kernels.h\"\n"
      << (r.blobs.empty() ? "" : "#include \"o2g_host.h\"\n") << "\n"
      << dims.helpers << code;

    write_text(outdir + "/model.h", h.str());
    write_text(outdir + "/model.cpp", m.str());
    write_text(outdir + "/main.cpp", templates::get("main.cpp"));
    write_text(outdir + "/npy.h", templates::get("npy.h"));
    write_text(outdir + "/o2g_info.h", templates::get("o2g_info.h"));
    write_text(outdir + "/o2g_kernels.h", templates::get("o2g_kernels.h"));
    make_dirs(outdir + "/onednn");  // the oneDNN backend (src/backends/onednn/)
    for (const char* const* n = templates::names(); *n; ++n)
        if (std::string(*n).rfind("onednn/", 0) == 0) write_text(outdir + "/" + *n, templates::get(*n));
    write_text(outdir + "/o2g_runtime.h", templates::get("o2g_runtime.h"));
    write_host_sources(outdir, !r.blobs.empty());
    std::string cm = templates::get("CMakeLists.txt");
    const std::string key = "@GGML_SOURCE_DIR@";
    for (size_t p; (p = cm.find(key)) != std::string::npos;) cm.replace(p, key.size(), ONNX2GGML_GGML_DIR);
    write_text(outdir + "/CMakeLists.txt", cm);

    std::vector<std::pair<std::string, std::string>> meta = {
        {"general.architecture", "onnx2ggml"},
        {"onnx2ggml.source", model_path},
        {"onnx2ggml.producer", g.producer},
        {"onnx2ggml.version", ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")"}};
    meta.insert(meta.end(), model_meta.strings.begin(), model_meta.strings.end());
    std::vector<std::pair<std::string, std::string>> blobs;
    for (size_t k = 0; k < r.blobs.size(); ++k)
        blobs.emplace_back(gguf_keys::host_kernel + std::to_string(k), r.blobs[k]);
    write_gguf(outdir + "/model.gguf", b.weights, meta, model_meta.arrays, blobs);

    EmitReport rep;
    rep.weights = b.weights.size();
    for (auto& w : b.weights) rep.weight_bytes += ggml_nbytes(w.t);
    rep.lines = b.lines.size();
    return rep;
}

EmitReport emit_project(Graph& g, const std::string& outdir, const std::string& model_path,
                        const WeightRules& weight_rules, const GgufMeta& model_meta) {
    Recorded r = record_program(g, weight_rules);
    std::string code = r.code;
    for (size_t p; (p = code.find("@DIMS@\n")) != std::string::npos;) code.replace(p, 7, "    (void)d;\n");
    return write_program(g, r, code, ProgramDims{}, outdir, model_path, model_meta);
}

}  // namespace onnx2ggml::core
