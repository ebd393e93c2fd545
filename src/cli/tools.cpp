// `onnx2ggml inspect`, `quantize`, `compare` and `check TESTDIR`: what the compiler sees of a model, on the
// public API's model tools (onnx2ggml::inspect, quantize, compare_model, reference_outputs, load_tensor_proto).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"  // (the public API and the arguments: this target sees no internal header)

namespace onnx2ggml::cli {

namespace {

// The graph options of inspect, quantize and check TESTDIR: the first input set's shapes, --freeze, the passes,
// the weights
CompileOptions graph_options(const Args& a) {
    CompileOptions o;
    o.input_shapes = a.sets[0].shapes;
    o.frozen_inputs = frozen_inputs(a);
    o.optimize = a.optimize;
    o.disabled_passes = a.disabled_passes;
    o.weights = a.weights;
    o.weight_rules = a.weight_rules;
    o.gguf = a.gguf;
    return o;
}

// Writes `dot` to `file`: as DOT text, or as SVG through Graphviz's `dot -Tsvg` when `svg`.
void write_picture(const std::string& dot, const std::string& file, bool svg) {
    std::string text = svg ? file + ".dot.tmp" : file;
    {
        std::ofstream f(text);
        if (!(f << dot)) bad(text + ": cannot write");
    }
    if (!svg) return;
    for (const std::string& p : {text, file})
        if (p.find('\'') != std::string::npos) bad(p + ": a file name with a quote");
    if (std::system("command -v dot >/dev/null 2>&1") != 0) {
        std::remove(text.c_str());
        bad("--svg needs Graphviz's dot (Debian: graphviz; scripts/setup.sh installs it); --dot FILE writes the DOT "
            "text");
    }
    int rc = std::system(("dot -Tsvg '" + text + "' -o '" + file + "'").c_str());
    std::remove(text.c_str());
    if (rc != 0) bad(file + ": Graphviz's dot failed (exit " + std::to_string(rc) + ")");
}

// --dot FILE / --svg FILE
void write_pictures(const Args& a, const std::string& dot) {
    if (!a.dot.empty()) write_picture(dot, a.dot, false);
    if (!a.svg.empty()) write_picture(dot, a.svg, true);
}

// "1x3xheightx224", "scalar"
std::string shape_text(const TensorInfo& t) {
    if (t.shape.empty()) return "scalar";
    std::string s;
    for (size_t i = 0; i < t.shape.size(); ++i)
        s += (i ? "x" : "") + (t.shape[i] >= 0          ? std::to_string(t.shape[i])
                               : t.dim_names[i].empty() ? std::string("?")
                                                        : t.dim_names[i]);
    return s;
}

template <class Map>
void json_map(std::ostream& o, const Map& m) {
    o << "{";
    bool first = true;
    for (auto& kv : m) {
        o << (first ? "" : ", ") << json_str(kv.first) << ": " << kv.second;
        first = false;
    }
    o << "}";
}

void json_infos(std::ostream& o, const std::vector<TensorInfo>& v) {
    o << "[";
    for (size_t k = 0; k < v.size(); ++k) {
        o << (k ? ", " : "") << "{\"name\": " << json_str(v[k].name) << ", \"dtype\": \"" << dtype_name(v[k].dtype)
          << "\", \"shape\": [";
        for (size_t i = 0; i < v[k].shape.size(); ++i)
            o << (i ? ", " : "")
              << (v[k].shape[i] < 0 ? json_str(v[k].dim_names[i].empty() ? "?" : v[k].dim_names[i])
                                    : std::to_string(v[k].shape[i]));
        o << "]}";
    }
    o << "]";
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// the test folders' entries with this prefix, in numeric order (input_2 before input_10)
std::vector<std::string> list_dir(const std::string& d, const std::string& prefix) {
    std::vector<std::string> r;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
        std::string n = e.path().filename().string();
        if (n.rfind(prefix, 0) == 0) r.push_back(n);
    }
    std::sort(r.begin(), r.end(), [](const std::string& x, const std::string& y) {
        return x.size() != y.size() ? x.size() < y.size() : x < y;
    });
    return r;
}

// numpy has no bfloat16: the ONNX backend test data holds bfloat16 tensors as their uint16 bit patterns
Tensor bf16_bits(const Tensor& t, DType want) {
    if (want != DType::BFloat16 || t.dtype() != DType::UInt16) return t;
    TensorRef r = t.ref();
    r.dtype = DType::BFloat16;
    return Tensor::copy(r, t.name());
}

}  // namespace

int cmd_inspect(const Args& a) {
    InspectOptions o;
    o.graph = graph_options(a);
    o.ggml_ops = a.ggml;
    if (a.backend_given) o.backend = a.backend;
    o.threads = a.threads;
    if (!a.dot.empty() || !a.svg.empty())
        o.picture = a.ggml ? InspectOptions::Picture::Ggml : InspectOptions::Picture::Onnx;
    ModelReport r = inspect(a.model, o);
    if (!r.dot.empty()) write_pictures(a, r.dot);
    const std::string placement = !r.placed ? ""
                                  : a.json  ? placement_json(r.placement)
                                            : placement_text(r.placement, true);
    if (a.json) {
        std::ostringstream j;
        j << "{\"model\": " << json_str(a.model) << ", \"opsets\": ";
        json_map(j, r.opsets);
        j << ", \"nodes\": " << r.nodes << ", \"parameters\": " << r.parameters << ", \"inputs\": ";
        json_infos(j, r.inputs);
        j << ", \"outputs\": ";
        json_infos(j, r.outputs);
        j << ", \"op_histogram\": ";
        json_map(j, r.op_histogram);
        j << ", \"unsupported\": [";
        for (size_t k = 0; k < r.unsupported.size(); ++k) {
            const UnsupportedNode& u = r.unsupported[k];
            j << (k ? ", " : "") << "{\"op_type\": " << json_str(u.op_type) << ", \"node\": " << json_str(u.node)
              << ", \"opset\": " << u.opset << ", \"reason\": " << json_str(u.reason) << "}";
        }
        j << "]";
        if (!r.shape_error.empty()) j << ", \"shape_error\": " << json_str(r.shape_error);
        if (!r.ggml_ops.empty()) {
            j << ", \"ggml_ops\": ";
            json_map(j, r.ggml_ops);
        }
        if (!placement.empty()) j << ", \"placement\": " << placement;
        j << "}\n";
        std::cout << j.str();
    } else {
        std::cout << "model: " << a.model << "\nproducer: " << r.producer << "\nopsets:";
        for (auto& kv : r.opsets) std::cout << " " << kv.first << "=" << kv.second;
        std::cout << "\nparameters: " << r.parameters << "\ninputs:\n";
        for (auto& t : r.inputs)
            std::cout << "  " << t.name << "\t" << dtype_name(t.dtype) << "\t" << shape_text(t) << "\n";
        std::cout << "outputs:\n";
        for (auto& t : r.outputs)
            std::cout << "  " << t.name << "\t" << dtype_name(t.dtype) << "\t" << shape_text(t) << "\n";
        std::cout << "operators (" << r.nodes << " nodes):\n";
        for (auto& kv : r.op_histogram) std::cout << "  " << kv.first << "\t" << kv.second << "\n";
        if (!r.shape_error.empty()) std::cout << "shapes: not inferred: " << r.shape_error << "\n";
        if (!r.unsupported.empty()) {
            std::cout << "unsupported (" << r.unsupported.size() << "):\n";
            for (auto& u : r.unsupported)
                std::cout << "  node '" << u.node << "' (" << u.op_type << ", opset " << u.opset << "): " << u.reason
                          << "\n";
        } else if (r.shape_error.empty()) {
            std::cout << "unsupported: none\n";
        }
        if (!r.ggml_ops.empty()) {
            int total = 0;
            for (auto& kv : r.ggml_ops) total += kv.second;
            std::cout << "ggml graph (" << total << " nodes):\n";
            for (auto& kv : r.ggml_ops) std::cout << "  " << kv.first << "\t" << kv.second << "\n";
        }
        std::cout << placement;
    }
    return r.unsupported.empty() ? 0 : int(ErrorCategory::Unsupported);
}

// `quantize`: the GGUF of the initializers' weights as the rules store them, read by --gguf
int cmd_quantize(const Args& a) {
    if (a.outdir.empty()) bad("quantize needs -o FILE.gguf");
    if (!a.gguf.empty()) bad("quantize takes the weights from the model, not --gguf");
    CompileOptions o = graph_options(a);
    o.max_memory = a.max_memory;
    QuantizeReport r = quantize(a.model, a.outdir, o);
    std::cout << "wrote " << a.outdir << ": " << r.weights << " weights, " << r.bytes << " bytes (";
    bool first = true;
    for (auto& kv : r.types) std::cout << (first ? "" : ", ") << kv.first << ": " << kv.second, first = false;
    std::cout << ")\n";
    return 0;
}

// `compare`: the table in graph order, the first divergence marked; exit 1 when there is one
int cmd_compare(const Args& a) {
    std::map<std::string, Tensor> ins;
    {  // the inputs as `run` gathers them (files, random, shapes), through a session that only resolves them
        SessionOptions so = session_options(a);
        so.weights = "f32", so.weight_rules.clear(), so.gguf.clear();
        Session s(a.model, so);
        std::vector<Tensor> v = gather_inputs(s, a, a.sets[0]);
        std::vector<TensorInfo> infos = s.inputs();
        for (size_t k = 0; k < v.size(); ++k) ins[infos[k].name] = v[k];
    }
    CompareModelOptions o;
    o.reference = a.reference;
    o.tolerance = a.tolerance;
    o.session = session_options(a);
    o.no_inplace = a.no_inplace;
    o.picture = !a.dot.empty() || !a.svg.empty();
    o.work_dir = a.output_dir.empty() ? std::filesystem::temp_directory_path().string() + "/onnx2ggml-compare-" +
                                            std::to_string(getpid())
                                      : a.output_dir;
    ModelComparison r = compare_model(a.model, ins, o);
    if (a.output_dir.empty()) std::filesystem::remove_all(o.work_dir);
    write_pictures(a, r.dot);
    const ValueComparison* first = r.first >= 0 ? &r.rows[size_t(r.first)] : nullptr;
    if (a.json) {
        std::cout << "{\"model\": " << json_str(a.model) << ", \"reference\": " << json_str(a.reference)
                  << ", \"backend\": " << json_str(r.backend) << ", \"tolerance\": " << a.tolerance
                  << ", \"first_divergence\": " << (first ? json_str(first->node) : "null") << ", \"rows\": [";
        for (size_t k = 0; k < r.rows.size(); ++k) {
            const ValueComparison& w = r.rows[k];
            auto num = [](double x) {
                char b[32];
                snprintf(b, sizeof b, "%.6g", x);
                return std::isfinite(x) ? std::string(b) : std::string("\"inf\"");
            };
            std::cout << (k ? "," : "") << "\n  {\"node\": " << json_str(w.node) << ", \"op\": " << json_str(w.op_type)
                      << ", \"ggml\": " << json_str(w.ggml_ops) << ", \"value\": " << json_str(w.value)
                      << ", \"shape\": " << json_str(shape_str(w.shape));
            if (w.compared)
                std::cout << ", \"max_abs_err\": " << num(w.max_abs) << ", \"rel_err\": " << num(w.rel)
                          << ", \"over\": " << (w.over ? "true" : "false");
            else std::cout << ", \"note\": " << json_str(w.note);
            std::cout << ", \"first\": " << (w.first ? "true" : "false") << "}";
        }
        std::cout << "\n]}\n";
        return first ? 1 : 0;
    }
    printf("compare %s on %s against %s; error = max|got-ref| / max|ref|, tolerance %.3g\n", a.model.c_str(),
           r.backend.c_str(), r.reference.c_str(), a.tolerance);
    if (!r.reference_gaps.empty())
        printf("the host reference cannot compute these nodes (their values and what follows are not compared):\n%s",
               r.reference_gaps.c_str());
    printf("%-3s %-28s %-16s %-24s %-36s %-14s %10s %10s\n", "", "node", "op", "ggml ops", "value", "shape", "max_abs",
           "error");
    auto cut = [](const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 2) + ".."; };
    for (const ValueComparison& w : r.rows) {
        const char* mark = w.first ? ">>" : w.over ? "!" : "";
        if (w.compared)
            printf("%-3s %-28s %-16s %-24s %-36s %-14s %10.3g %10.3g\n", mark, cut(w.node, 28).c_str(),
                   cut(w.op_type, 16).c_str(), cut(w.ggml_ops, 24).c_str(), cut(w.value, 36).c_str(),
                   shape_str(w.shape).c_str(), w.max_abs, w.rel);
        else
            printf("%-3s %-28s %-16s %-24s %-36s %-14s %21s\n", mark, cut(w.node, 28).c_str(),
                   cut(w.op_type, 16).c_str(), cut(w.ggml_ops, 24).c_str(), cut(w.value, 36).c_str(),
                   shape_str(w.shape).c_str(), ("(" + w.note + ")").c_str());
    }
    if (first)
        printf(
            "first divergence: node '%s' (%s): error %.3g of its value's range while its inputs are within %.3g (>> "
            "above; ! marks every value over)\n",
            first->node.c_str(), first->op_type.c_str(), first->rel, a.tolerance);
    else printf("no divergence: every compared value within %.3g\n", a.tolerance);
    return first ? 1 : 0;
}

// `check TESTDIR`: an ONNX backend-test folder (model.onnx, test_data_set_N/input_K.pb and output_K.pb), every
// set run in one session; dynamic dims take each set's shapes, and inputs an op needs as compile-time values
// (Reshape's shape, Resize's scales, ...) are found by the session and specialized on
int cmd_check_dir(const Args& a) {
    const std::string dir = a.model, model = dir + "/model.onnx";
    auto sets = list_dir(dir, "test_data_set_");
    if (sets.empty()) bad(dir + ": no test_data_set_* folders");
    if (a.reference_given && a.reference != "host") bad("check TESTDIR takes --reference host only");
    SessionOptions so = session_options(a);
    Session s(model, so);
    const std::vector<TensorInfo> ins = s.inputs();
    const std::vector<TensorInfo>& outs_info = s.model().outputs();
    bool all = true;
    for (auto& set : sets) {
        const std::string sd = dir + "/" + set;
        // inputs by name (the .pb's name, else the graph-input order)
        auto in_files = list_dir(sd, "input_");
        if (in_files.size() != ins.size())
            bad(sd + ": " + std::to_string(in_files.size()) + " input files for " + std::to_string(ins.size()) +
                " graph inputs");
        std::map<std::string, Tensor> values;
        for (size_t k = 0; k < in_files.size(); ++k) {
            Tensor t = load_tensor_proto(sd + "/" + in_files[k]);
            auto named = std::find_if(ins.begin(), ins.end(), [&](const TensorInfo& i) { return i.name == t.name(); });
            const TensorInfo& in = named != ins.end() ? *named : ins[k];
            values[in.name] = bf16_bits(t, in.dtype);
        }
        std::vector<Tensor> exp;
        for (auto& f : list_dir(sd, "output_")) exp.push_back(load_tensor_proto(sd + "/" + f));
        if (exp.size() != outs_info.size())
            bad(sd + ": " + std::to_string(exp.size()) + " output files for " + std::to_string(outs_info.size()) +
                " graph outputs");
        for (size_t k = 0; k < exp.size(); ++k) exp[k] = bf16_bits(exp[k], outs_info[k].dtype);
        std::vector<Tensor> outs;
        if (a.reference_given) {  // the host reference's outputs (checked as ggml's would be)
            CompileOptions o = graph_options(a);
            outs = reference_outputs(model, values, o);
        } else {
            std::map<std::string, TensorRef> feeds;
            for (auto& kv : values) feeds[kv.first] = kv.second.ref();
            outs = s.run(feeds);
            std::vector<std::string> frozen = s.stats().control_inputs;
            for (auto& f : a.freeze) frozen.push_back(f.first);
            if (!frozen.empty()) {
                std::string f;
                for (auto& n : frozen) f += (f.empty() ? "" : ", ") + n;
                printf("%s frozen at compile time: %s\n", set.c_str(), f.c_str());
            }
        }
        all &= report_outputs(outs, exp, a, set + " ");
    }
    printf("%s\n", all ? "PASS" : "FAIL");
    return all ? 0 : int(ErrorCategory::Mismatch);
}

}  // namespace onnx2ggml::cli
