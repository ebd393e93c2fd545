#include "runtime/compare.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <onnx/onnx_pb.h>
#include <set>

#include "onnx/loader.h"
#include "runtime/dot.h"
#include "onnx2ggml_core.h"
#include "util/error.h"
#include "util/io.h"
#include "util/progress.h"

namespace onnx2ggml::core {

std::string value_file_name(const std::string& value) {
    std::string r;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '.' || c == '_' || c == '-') r += char(c);
        else {
            char b[4];
            snprintf(b, sizeof b, "%%%02X", c);
            r += b;
        }
    }
    return r + ".npy";
}

static bool file_exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

static std::string shell_quote(const std::string& s) {
    std::string r = "'";
    for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

static std::string json_string(const std::string& s) {
    std::string r = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') r += '\\', r += char(c);
        else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            r += b;
        } else r += char(c);
    }
    return r + "\"";
}

// reference "host": every node folded by its host evaluator, the inputs frozen to the given values, in
// float64 where the model computes float32 (the evaluators compute in double: the reference then does
// not round where ggml rounds, and float32 values are compared with what they approximate)
std::map<std::string, Tensor> host_values(const std::string& path, const std::map<std::string, Tensor>& inputs,
                                          const CompileOptions& copts, std::string* gaps) {
    Graph g = load_onnx(path);
    promote_float64(g);
    CompileOptions c = copts;
    for (auto& kv : inputs) c.frozen_inputs[kv.first] = kv.second;
    for (auto& kv : c.frozen_inputs)
        if (kv.second.dtype == DType::F32) kv.second = kv.second.cast(DType::F64);
    c.fold_all = true;
    std::vector<UnsupportedOp> bad;  // nodes without a host evaluator stay unknown: their rows say so
    specialize(g, c, &bad);
    // the nodes whose values the host could not compute: the first few, with the reason
    for (const Node& n : g.nodes) {
        bool done = true;
        for (int out : n.outputs) done &= out < 0 || g.values[size_t(out)].constant.has_value();
        bool inputs_known = true;
        for (int in : n.inputs) inputs_known &= in < 0 || g.values[size_t(in)].constant.has_value();
        if (done || !inputs_known) continue;
        std::string why = "no host evaluator";
        for (auto& u : bad)
            if (u.node == n.name) why = u.reason;
        if (std::count(gaps->begin(), gaps->end(), '\n') < 3)
            *gaps += "  node '" + n.name + "' (" + n.op_type + "): " + why + "\n";
    }
    std::map<std::string, Tensor> r;
    for (auto& v : g.values)
        if (v.constant && !v.is_initializer) r[v.name] = *v.constant;
    return r;
}

// reference "ort": the model with every node output made a graph output, run by onnxruntime-node
static std::map<std::string, Tensor> ort_reference(const std::string& path, const std::map<std::string, Tensor>& inputs,
                                                   const CompareOptions& o) {
    std::string mod =
        std::getenv("NODE_PATH") ? std::getenv("NODE_PATH") : std::string(ONNX2GGML_SOURCE_DIR) + "/bench/node_modules";
    std::string script = std::string(ONNX2GGML_SOURCE_DIR) + "/scripts/ort_run.js";
    struct stat st;
    if (stat((mod + "/onnxruntime-node").c_str(), &st) != 0)
        bad_input("--reference ort needs onnxruntime-node (scripts/setup.sh --bench installs it in " + mod +
                  "; or set NODE_PATH)");
    std::ifstream f(path, std::ios::binary);
    onnx::ModelProto m;
    if (!f || !m.ParseFromIstream(&f)) bad_input(path + ": cannot read the model for --reference ort");
    onnx::GraphProto* gp = m.mutable_graph();
    std::set<std::string> have;
    for (auto& out : gp->output()) have.insert(out.name());
    bool external = false;
    for (auto& t : gp->initializer()) external |= t.data_location() == onnx::TensorProto::EXTERNAL;
    for (auto& n : gp->node())
        for (auto& out : n.output())
            if (!out.empty() && have.insert(out).second) gp->add_output()->set_name(out);
    std::vector<std::string> names;
    for (auto& out : gp->output()) names.push_back(out.name());
    std::string work = o.work_dir;
    std::string cmd = "mkdir -p " + shell_quote(work + "/ort");
    if (std::system(cmd.c_str()) != 0) bad_input(work + ": cannot create the work folder");
    // external data is found next to the model: the rewritten model then sits in the model's folder
    std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    std::string rewritten =
        external ? dir + "/.onnx2ggml-compare-" + std::to_string(getpid()) + ".onnx" : work + "/all_outputs.onnx";
    {
        std::ofstream w(rewritten, std::ios::binary);
        if (!w || !m.SerializeToOstream(&w)) bad_input(rewritten + ": cannot write the rewritten model");
    }
    std::string manifest = work + "/manifest.json", outdir = work + "/ort";
    std::string ins;
    for (auto& kv : inputs) {
        std::string file = work + "/input_" + value_file_name(kv.first);
        write_npy(file, kv.second);
        ins += (ins.empty() ? "" : ", ") + json_string(kv.first) + ": " + json_string(file);
    }
    std::ofstream(manifest) << "[{\"model\": " << json_string(rewritten) << ", \"sets\": [{\"inputs\": {" << ins
                            << "}, \"outdir\": " << json_string(outdir) << "}]}]\n";
    cmd = "NODE_PATH=" + shell_quote(mod) + " node " + shell_quote(script) + " " + shell_quote(manifest);
    int rc = std::system(cmd.c_str());
    if (external) std::remove(rewritten.c_str());
    if (rc != 0) bad_input("--reference ort: node " + script + " failed (exit " + std::to_string(rc) + ")");
    if (file_exists(outdir + "/error.txt")) {
        std::ifstream e(outdir + "/error.txt");
        std::string msg((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
        bad_input("--reference ort: ONNX Runtime failed on " + path + ": " + msg);
    }
    std::map<std::string, Tensor> r;
    for (size_t k = 0; k < names.size(); ++k) {
        std::string file = outdir + "/output_" + std::to_string(k) + ".npy";
        if (file_exists(file)) r[names[k]] = read_npy(file);
    }
    return r;
}

static std::map<std::string, Tensor> dir_reference(const std::string& dir, const Graph& g) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        bad_input("--reference " + dir + ": not host, ort or a folder of NAME.npy files");
    std::map<std::string, Tensor> r;
    for (auto& v : g.values) {
        std::string file = dir + "/" + value_file_name(v.name);
        if (file_exists(file)) r[v.name] = read_npy(file);
    }
    return r;
}

// max |got - ref| and max |ref| over all elements; a NaN on one side only is an infinite error
static void errors(const Tensor& got, const Tensor& ref, CompareRow& row) {
    row.max_abs = row.max_ref = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
        double a = got.getf(i), b = ref.getf(i);
        if (std::isnan(a) || std::isnan(b)) {
            if (std::isnan(a) != std::isnan(b)) row.max_abs = std::numeric_limits<double>::infinity();
            continue;
        }
        if (std::isinf(a) || std::isinf(b)) {
            if (a != b) row.max_abs = std::numeric_limits<double>::infinity();
            continue;
        }
        row.max_abs = std::max(row.max_abs, std::fabs(a - b));
        row.max_ref = std::max(row.max_ref, std::fabs(b));
    }
    row.rel =
        row.max_ref > 0 ? row.max_abs / row.max_ref : (row.max_abs > 0 ? std::numeric_limits<double>::infinity() : 0.0);
}

CompareResult compare_model(const std::string& model_path, const std::map<std::string, Tensor>& inputs,
                            const CompareOptions& o) {
    CompileOptions copts = o.copts;
    for (auto& kv : inputs) copts.input_shapes[kv.first] = kv.second.shape;
    Graph g = prepare(model_path, copts);
    SessionOptions so = o.session;
    so.keep_values = true;
    Session s(g, so);
    std::vector<Tensor> ins;
    for (int id : g.inputs) {
        auto it = inputs.find(g.values[size_t(id)].name);
        if (it == inputs.end()) bad_input(model_path + ": no value for input '" + g.values[size_t(id)].name + "'");
        ins.push_back(it->second);
    }
    s.run(ins);

    CompareResult res;
    res.backend = s.backend_name();
    std::map<std::string, Tensor> ref;
    if (o.reference == "host")
        ref = host_values(model_path, inputs, o.copts, &res.reference_gaps),
        res.reference = "host (onnx2ggml's host evaluators)";
    else if (o.reference == "ort")
        ref = ort_reference(model_path, inputs, o), res.reference = "ort (ONNX Runtime, every node output exposed)";
    else ref = dir_reference(o.reference, g), res.reference = o.reference;

    std::vector<double> rel(g.values.size(), -1);  // value id -> relative error (-1: unknown)
    for (int id : g.inputs) rel[size_t(id)] = 0;
    for (size_t id = 0; id < g.values.size(); ++id)
        if (g.values[id].constant) rel[id] = 0;  // weights and host-folded values: exact by construction
    std::vector<bool> live = live_nodes(g);
    Progress bar("comparing", g.nodes.size());
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        bar.update(ni);
        const Node& n = g.nodes[ni];
        if (!live[ni]) continue;
        for (int out : n.outputs) {
            if (out < 0) continue;
            const Value& v = g.values[size_t(out)];
            CompareRow row;
            row.node = int(ni);
            row.node_name = n.name;
            row.op_type = (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
            row.ggml_ops = s.node_ops(int(ni));
            row.value = v.name;
            row.shape = v.shape;
            std::string why;
            std::optional<Tensor> got = s.value(out, &why);
            auto r = ref.find(v.name);
            if (!got) row.note = why;
            else if (r == ref.end())
                row.note = o.reference == "host" ? "no host reference: an op without a host evaluator before it"
                                                 : "no reference value";
            else if (r->second.dtype == DType::String || got->dtype == DType::String) row.note = "string tensor";
            else if (r->second.shape != got->shape) row.note = "reference has shape " + shape_str(r->second.shape);
            else {
                row.compared = true;
                errors(*got, r->second, row);
                rel[size_t(out)] = row.rel;
                row.over = row.rel > o.tolerance;
            }
            res.rows.push_back(row);
        }
    }
    // the first node over the tolerance whose known inputs are all within it
    for (size_t k = 0; k < res.rows.size() && res.first < 0; ++k) {
        CompareRow& row = res.rows[k];
        if (!row.over) continue;
        bool inputs_ok = true;
        for (int in : g.nodes[size_t(row.node)].inputs)
            if (in >= 0 && rel[size_t(in)] > o.tolerance) inputs_ok = false;
        if (inputs_ok) row.first = true, res.first = int(k);
    }
    if (o.picture) {
        DotOptions d;
        d.compare = &res;
        d.tolerance = o.tolerance;
        res.dot = onnx_graph_dot(g, d);
    }
    return res;
}

}  // namespace onnx2ggml::core
