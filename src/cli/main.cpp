// The onnx2ggml command: inspect / run / compile / check / bench / compare / quantize.
// Exit codes: 0 ok, 1 numeric mismatch, 2 bad usage or bad input, 3 unsupported model, 4 internal error.
// This file parses the command line and holds the commands that report the compiler's internals (inspect,
// compare, quantize, check on an ONNX backend-test folder); run, check MODEL, bench and compile are
// written on the public API (run.cpp).
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "api/api_internal.h"
#include "cli/cli.h"
#include "codegen/dynamic.h"
#include "onnx/loader.h"
#include "onnx2ggml_core.h"
#include "o2g_build_version.h"
#include "o2g_info.h"
#include "o2g_runtime.h"
#include "runtime/compare.h"
#include "runtime/dot.h"
#include "ops/op.h"
#include "util/limits.h"
#include "util/progress.h"

using namespace onnx2ggml::core;
using onnx2ggml::cli::Args;
using onnx2ggml::cli::InputSet;
using onnx2ggml::cli::json_str;

namespace {

const char* kUsage =
    "usage: onnx2ggml COMMAND ...\n"
    "  inspect MODEL [--input-shape NAME=DIMS ...] [--json] [--ggml] [--dot FILE | --svg FILE] (--ggml with a picture: "
    "the ggml graph)\n"
    "                [--backend B] (where its nodes run on B: per backend and ggml op, the CPU's fallback, the "
    "scheduler's splits)\n"
    "  run     MODEL [--input NAME=FILE.npy ...] [--random-inputs SEED] [--input-shape NAME=DIMS ...]\n"
    "                [--then --input ... (another input set, same session)] [--output-dir DIR] [--backend "
    "NAME|auto|rpc:HOST:PORT[,...]]\n"
    "                [--threads N] [--profile] [--verbose] [--max-specializations N]\n"
    "  compile MODEL -o OUTDIR [--input-shape NAME=DIMS ...] [--dim NAME=MIN:MAX[:STEP] | --dim NAME=V1,V2,...]\n"
    "          (--dim: the program reads the symbolic dim NAME of its inputs at run time, at those values)\n"
    "  quantize MODEL -o FILE.gguf --weights TYPE [--weights-rule REGEX=TYPE ...] [--input-shape NAME=DIMS ...]\n"
    "          (the model's weights stored in those types; run/check/bench/compare/compile --gguf FILE.gguf take them "
    "as they are)\n"
    "  check   MODEL --input NAME=FILE.npy ... --expect NAME=FILE.npy ... [--then --input ... --expect ...] [--rtol R] "
    "[--atol A]\n"
    "  check   TESTDIR [--reference host]  (an ONNX backend-test folder: model.onnx + test_data_set_*/; --reference "
    "host:\n"
    "          the outputs of compare's host reference, float64 host evaluators, instead of ggml's)\n"
    "  bench   MODEL [--input ... | --random-inputs SEED] [--repeat N] [--warmup W] [--threads N] [--backend B]\n"
    "  compare MODEL [--input ... | --random-inputs SEED] [--reference host|ort|DIR] [--tolerance T] [--json] "
    "[--backend B] [--svg FILE] [--no-inplace]\n"
    "          (every intermediate value against a reference; marks the first node that diverges)\n"
    "  rpc-server [--host 127.0.0.1] [--port 50052] [--backend cpu] [--threads N]\n"
    "          (serves a device to `--backend rpc:HOST:PORT[,rpc:HOST:PORT...]` of other processes through ggml RPC;\n"
    "          no authentication: a trusted network only)\n"
    "  ops     (list the supported ONNX operators)\n"
    "  --version (onnx2ggml's version and commit, ggml's and oneDNN's, the backends and their devices)\n"
    "dynamic dims are taken from the --input files (--input-shape: for --random-inputs and compile)\n"
    "common: --max-memory SIZE (e.g. 4G; default: physical memory), --freeze NAME=FILE.npy (bind a graph input to a "
    "value at compile time), --no-optimize, --disable-pass NAME,\n"
    "        --weights f32|f16|q8_0|q5_0|q5_1|q4_0|q4_1|q2_K|q3_K|q4_K|q5_K|q6_K (how MatMul/Gemm/Conv weights are "
    "stored in the\n"
    "          runtime and the GGUF; default f32), --weights-rule 'REGEX=TYPE' (repeatable). A weight's type, first "
    "that applies:\n"
    "          1. the first --weights-rule whose REGEX matches (std::regex search) the ONNX initializer's name;\n"
    "          2. a weight of fewer than 4096 elements or with one dim above 1 stays f32; 3. --weights.\n"
    "          Under a quantized type, convolution kernels are f16; rows not dividing into 256 take for a _K type q4_0 "
    "(q2_K,\n"
    "          q3_K), q5_0 (q4_K), q5_1 (q5_K) or q8_0 (q6_K); rows not dividing into 32 are f16;\n"
    "          biases, norm scales and other constants are always f32. A rule naming no initializer: a warning.\n"
    "        --gguf FILE (run/check/bench/compare/compile: the initializers' weights from a GGUF written by quantize "
    "or\n"
    "          compile, as stored, with its rules unless --weights/--weights-rule are given; one for another model: "
    "exit 2)\n"
    "        --quiet (no progress bars; they are drawn on a terminal only, for steps longer than half a second)\n"
    "exit codes: 0 ok, 1 numeric mismatch, 2 bad usage or input, 3 unsupported model, 4 internal error\n";

Shape parse_dims(const std::string& s, const std::string& what) {
    Shape r;
    if (s == "scalar" || s.empty()) return r;
    std::stringstream ss(s);
    std::string tok;
    while (std::getline(ss, tok, 'x')) {
        if (tok.empty() || tok.size() > 12 || tok.find_first_not_of("0123456789") != std::string::npos)
            bad_input("bad dims '" + s + "' in " + what + " (expected e.g. 1x3x224x224)");
        r.push_back(std::stoll(tok));
    }
    return r;
}

std::pair<std::string, std::string> split_eq(const std::string& v, const char* opt) {
    auto p = v.rfind('=');
    if (p == std::string::npos || p == 0) bad_input(std::string(opt) + " expects NAME=VALUE, got '" + v + "'");
    return {v.substr(0, p), v.substr(p + 1)};
}

Args parse(int argc, char** argv) {
    Args a;
    InputSet cur;  // the set being read; --then starts the next
    if (argc < 2) bad_input(std::string("missing command\n") + kUsage);
    a.cmd = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) bad_input("missing value after " + s);
            return argv[++i];
        };
        auto num = [&](const std::string& v) {
            try {
                size_t p;
                double d = std::stod(v, &p);
                if (p != v.size()) throw 0;
                return d;
            } catch (...) { bad_input("bad number '" + v + "' after " + s); }
        };
        if (s == "--input-shape") {
            auto kv = split_eq(next(), "--input-shape");
            cur.shapes[kv.first] = parse_dims(kv.second, "--input-shape");
        } else if (s == "--input") cur.inputs.push_back(split_eq(next(), "--input"));
        else if (s == "--expect") cur.expects.push_back(split_eq(next(), "--expect"));
        else if (s == "--freeze") {
            auto kv = split_eq(next(), "--freeze");
            a.freeze.push_back(kv);
        } else if (s == "--random-inputs") {
            a.seed = uint64_t(num(next()));
            a.has_seed = true;
        } else if (s == "--dim") {
            DynamicDim d = parse_dynamic_dim(next());
            a.dims[d.name] = d.values;
        } else if (s == "--output-dir") a.output_dir = next();
        else if (s == "-o") a.outdir = next();
        else if (s == "--backend") a.backend = next(), a.backend_given = true;
        else if (s == "--threads") a.threads = int(num(next()));
        else if (s == "--repeat") a.repeat = std::max(1, int(num(next())));
        else if (s == "--warmup") a.warmup = std::max(0, int(num(next())));
        else if (s == "--rtol") a.rtol = num(next());
        else if (s == "--atol") a.atol = num(next());
        else if (s == "--max-memory") a.max_memory = parse_size(next());
        else if (s == "--json") a.json = true;
        else if (s == "--reference") a.reference = next(), a.reference_given = true;
        else if (s == "--dot") a.dot = next();
        else if (s == "--no-inplace") a.no_inplace = true;
        else if (s == "--quiet") set_progress_quiet(true);
        else if (s == "--svg") a.svg = next();
        else if (s == "--tolerance") a.tolerance = num(next());
        else if (s == "--ggml") a.ggml = true;
        else if (s == "--profile") a.profile = true;
        else if (s == "--verbose") a.verbose = true;
        else if (s == "--max-specializations") a.max_specs = size_t(std::max(1.0, num(next())));
        else if (s == "--then") {
            a.sets.push_back(cur);
            cur = InputSet{};
        } else if (s == "--no-optimize") a.optimize = false;
        else if (s == "--weights") {
            std::string w = next();
            a.weights = w;
            if (weight_type_by_name(w) == GGML_TYPE_COUNT)
                bad_input("--weights takes " + weight_type_names() + ", not '" + w + "'");
        } else if (s == "--weights-rule") {
            a.weight_rules.push_back(next());
            parse_weight_rule(a.weight_rules.back());  // checked here: exit 2 before any work
        } else if (s == "--gguf") a.gguf = next();
        else if (s == "--disable-pass") a.disabled_passes.push_back(next());
        else if (s == "-h" || s == "--help") {
            std::cout << kUsage;
            exit(0);
        } else if (!s.empty() && s[0] == '-') bad_input("unknown option '" + s + "'\n" + kUsage);
        else if (a.model.empty()) a.model = s;
        else bad_input("unexpected argument '" + s + "'");
    }
    a.sets.push_back(cur);
    return a;
}

// The compiler's options of the internal commands (inspect, compare, quantize, check TESTDIR): the first
// input set's shapes, --freeze, the passes
CompileOptions core_options(const Args& a) {
    CompileOptions o;
    o.input_shapes = a.sets[0].shapes;
    for (auto& kv : onnx2ggml::cli::frozen_inputs(a)) o.frozen_inputs[kv.first] = onnx2ggml::core_of(kv.second);
    o.optimize = a.optimize;
    o.disabled_passes = a.disabled_passes;
    return o;
}

// --weights and --weights-rule as given (checked by parse)
WeightRules given_rules(const Args& a) {
    WeightRules r;
    r.base = weight_type_by_name(a.weights);
    for (auto& x : a.weight_rules) r.rules.push_back(parse_weight_rule(x));
    return r;
}

// ... and with --gguf, as run takes them (onnx2ggml::rules_for: the API's)
WeightRules rules_for(const Args& a, const Graph& loaded) {
    return onnx2ggml::rules_for(loaded, a.weights, a.weight_rules, a.gguf);
}

// --dot FILE / --svg FILE
void write_pictures(const Args& a, const std::string& dot) {
    if (!a.dot.empty()) write_picture(dot, a.dot, false);
    if (!a.svg.empty()) write_picture(dot, a.svg, true);
}

int cmd_inspect(const Args& a) {
    Graph g = load_onnx(a.model);
    const CompileOptions copts = core_options(a);
    std::vector<UnsupportedOp> bad;
    bool shapes_ok = true;
    std::string shape_error;
    try {
        specialize(g, copts, &bad);
    } catch (const Error& e) {
        if (e.code != kExitBadInput) throw;
        shapes_ok = false;  // e.g. dynamic dims without --input-shape: still report what we can
        shape_error = e.what();
    }
    std::map<std::string, int> hist;
    for (auto& n : g.nodes) hist[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
    int64_t params = 0;
    for (auto& v : g.values)
        if (v.is_initializer && v.constant) params += v.constant->numel();
    std::map<std::string, int> ghist;
    if (bad.empty() && shapes_ok) {
        optimize(g, copts);
        validate(g, &bad);
    }
    if ((!a.dot.empty() || !a.svg.empty()) && shapes_ok) {
        // colored by backend when the graph builds; the graph's own structure otherwise
        if (bad.empty()) {
            Session s(g, SessionOptions{a.backend, a.threads, given_rules(a)});
            DotOptions d;
            d.session = &s;
            write_pictures(a, a.ggml ? ggml_graph_dot(s) : onnx_graph_dot(g, d));
        } else {
            write_pictures(a, onnx_graph_dot(g, DotOptions{}));
        }
    }
    if (a.ggml && bad.empty() && shapes_ok) {
        auto bg = build_graph(g, false);
        ghist = ggml_op_histogram(bg->gf);
    }
    // --backend: the graph built on that backend (weights uploaded), and where its nodes run
    std::string placement;
    if (a.backend_given && bad.empty() && shapes_ok) {
        Session s(g, SessionOptions{a.backend, a.threads, given_rules(a)});
        onnx2ggml::Placement p = onnx2ggml::placement_of(s);
        placement = a.json ? onnx2ggml::cli::placement_json(p) : onnx2ggml::cli::placement_text(p, true);
    }
    auto io = [&](const std::vector<int>& ids) {
        std::vector<std::string> r;
        for (int id : ids) {
            const Value& v = g.values[id];
            std::string s;
            for (size_t i = 0; i < v.shape.size(); ++i)
                s += (i ? "x" : "") +
                     (v.shape[i] < 0 ? (v.dim_params.size() > i ? v.dim_params[i] : "?") : std::to_string(v.shape[i]));
            r.push_back(v.name + "\t" + dtype_name(v.dtype) + "\t" + (v.shape.empty() ? "scalar" : s));
        }
        return r;
    };
    if (a.json) {
        std::ostringstream o;
        o << "{\"model\": " << json_str(a.model) << ", \"opsets\": {";
        bool first = true;
        for (auto& kv : g.opsets) {
            o << (first ? "" : ", ") << json_str(kv.first.empty() ? "ai.onnx" : kv.first) << ": " << kv.second;
            first = false;
        }
        o << "}, \"nodes\": " << g.nodes.size() << ", \"parameters\": " << params << ", \"inputs\": [";
        auto io_json = [&](const std::vector<int>& ids) {
            for (size_t k = 0; k < ids.size(); ++k) {
                const Value& v = g.values[ids[k]];
                o << (k ? ", " : "") << "{\"name\": " << json_str(v.name) << ", \"dtype\": \"" << dtype_name(v.dtype)
                  << "\", \"shape\": [";
                for (size_t i = 0; i < v.shape.size(); ++i)
                    o << (i ? ", " : "") << (v.shape[i] < 0 ? json_str(v.dim_params[i]) : std::to_string(v.shape[i]));
                o << "]}";
            }
        };
        io_json(g.inputs);
        o << "], \"outputs\": [";
        io_json(g.outputs);
        o << "], \"op_histogram\": {";
        first = true;
        for (auto& kv : hist) {
            o << (first ? "" : ", ") << json_str(kv.first) << ": " << kv.second;
            first = false;
        }
        o << "}, \"unsupported\": [";
        for (size_t k = 0; k < bad.size(); ++k)
            o << (k ? ", " : "") << "{\"op_type\": " << json_str(bad[k].op_type)
              << ", \"node\": " << json_str(bad[k].node) << ", \"opset\": " << bad[k].opset
              << ", \"reason\": " << json_str(bad[k].reason) << "}";
        o << "]";
        if (!shapes_ok) o << ", \"shape_error\": " << json_str(shape_error);
        if (!ghist.empty()) {
            o << ", \"ggml_ops\": {";
            first = true;
            for (auto& kv : ghist) {
                o << (first ? "" : ", ") << json_str(kv.first) << ": " << kv.second;
                first = false;
            }
            o << "}";
        }
        if (!placement.empty()) o << ", \"placement\": " << placement;
        o << "}\n";
        std::cout << o.str();
    } else {
        std::cout << "model: " << a.model << "\nproducer: " << g.producer << "\nopsets:";
        for (auto& kv : g.opsets) std::cout << " " << (kv.first.empty() ? "ai.onnx" : kv.first) << "=" << kv.second;
        std::cout << "\nparameters: " << params << "\ninputs:\n";
        for (auto& s : io(g.inputs)) std::cout << "  " << s << "\n";
        std::cout << "outputs:\n";
        for (auto& s : io(g.outputs)) std::cout << "  " << s << "\n";
        std::cout << "operators (" << g.nodes.size() << " nodes):\n";
        for (auto& kv : hist) std::cout << "  " << kv.first << "\t" << kv.second << "\n";
        if (!shapes_ok) std::cout << "shapes: not inferred: " << shape_error << "\n";
        if (!bad.empty()) {
            std::cout << "unsupported (" << bad.size() << "):\n";
            for (auto& u : bad)
                std::cout << "  node '" << u.node << "' (" << u.op_type << ", opset " << u.opset << "): " << u.reason
                          << "\n";
        } else if (shapes_ok) {
            std::cout << "unsupported: none\n";
        }
        if (!ghist.empty()) {
            int total = 0;
            for (auto& kv : ghist) total += kv.second;
            std::cout << "ggml graph (" << total << " nodes):\n";
            for (auto& kv : ghist) std::cout << "  " << kv.first << "\t" << kv.second << "\n";
        }
        std::cout << placement;
    }
    return bad.empty() ? 0 : kExitUnsupported;
}

// `quantize`: the GGUF of the initializers' weights as the rules store them (the writer of `compile`), read
// by --gguf. The stored forms (type, transposition, shape) are those of the lowering: the graph is prepared
// and lowered as `run` would (dynamic dims: --input-shape).
int cmd_quantize(const Args& a) {
    if (a.outdir.empty()) bad_input("quantize needs -o FILE.gguf");
    if (!a.gguf.empty()) bad_input("quantize takes the weights from the model, not --gguf");
    Graph g = load_onnx(a.model);
    WeightRules rules = rules_for(a, g);
    GgufMeta meta = gguf_model_meta(g, rules);
    const CompileOptions copts = core_options(a);
    specialize(g, copts);
    optimize(g, copts);
    validate(g);
    auto bg = build_graph(g, false, rules);
    std::vector<Weight> ws;
    std::set<std::string> seen;
    std::map<std::string, int> per_type;
    size_t bytes = 0;
    for (const Weight& w : bg->b->weights) {
        if (!w.initializer || w.onnx_name.empty()) continue;  // derived constants are made at load
        std::string key = w.onnx_name + "|" + std::to_string(w.transpose) + "|" + ggml_type_name(w.t->type);
        for (int d = 0; d < 4; ++d) key += "|" + std::to_string(w.t->ne[d]);
        if (!seen.insert(key).second) continue;
        ws.push_back(w);
        per_type[ggml_type_name(w.t->type)]++;
        bytes += ggml_nbytes(w.t);
    }
    std::vector<std::pair<std::string, std::string>> strings = {
        {"general.architecture", "onnx2ggml"},
        {"onnx2ggml.source", a.model},
        {"onnx2ggml.producer", g.producer},
        {"onnx2ggml.version", ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")"}};
    strings.insert(strings.end(), meta.strings.begin(), meta.strings.end());
    write_gguf(a.outdir, ws, strings, meta.arrays);
    std::cout << "wrote " << a.outdir << ": " << ws.size() << " weights, " << bytes << " bytes (";
    bool first = true;
    for (auto& kv : per_type) std::cout << (first ? "" : ", ") << kv.first << ": " << kv.second, first = false;
    std::cout << ")\n";
    return 0;
}

bool is_dir(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> list_dir(const std::string& d, const std::string& prefix) {
    std::vector<std::string> r;
    if (DIR* dir = opendir(d.c_str())) {
        while (dirent* e = readdir(dir)) {
            std::string n = e->d_name;
            if (n.rfind(prefix, 0) == 0) r.push_back(n);
        }
        closedir(dir);
    }
    std::sort(r.begin(), r.end(), [](const std::string& x, const std::string& y) {
        return x.size() != y.size() ? x.size() < y.size() : x < y;
    });
    return r;
}

// prints per-output errors; returns false on mismatch
bool report(const Graph& g, const std::vector<Tensor>& outs, const std::vector<Tensor>& exp, const Args& a,
            const std::string& tag) {
    bool all = true;
    for (size_t k = 0; k < exp.size(); ++k) {
        Comparison c = compare(outs[k], exp[k], a.rtol, a.atol);
        all &= c.pass;
        printf("%s%s: max_abs_err=%.3g max_rel_err=%.3g %s%s\n", tag.c_str(), g.values[g.outputs[k]].name.c_str(),
               c.max_abs, c.max_rel, c.pass ? "PASS" : "FAIL", c.pass ? "" : (" (" + c.why + ")").c_str());
    }
    return all;
}

// numpy has no bfloat16: the ONNX backend test data holds bfloat16 tensors as their uint16 bit patterns
Tensor bf16_bits(Tensor t, DType want) {
    if (want == DType::BF16 && t.dtype == DType::U16) t.dtype = DType::BF16;
    return t;
}

// `compare`: the table in graph order, the first divergence marked; exit 1 when there is one
int cmd_compare(const Args& a) {
    Graph loaded = load_onnx(a.model);
    WeightRules rules = rules_for(a, loaded);
    std::map<std::string, Tensor> ins;
    {  // the inputs as `run` gathers them (files, random, shapes), through a session that only resolves them
        onnx2ggml::SessionOptions so = onnx2ggml::cli::session_options(a);
        so.weights = "f32", so.weight_rules.clear(), so.gguf.clear();
        onnx2ggml::Session s(onnx2ggml::model_of(std::move(loaded)), so);
        std::vector<onnx2ggml::Tensor> v = onnx2ggml::cli::gather_inputs(s, a, a.sets[0]);
        std::vector<onnx2ggml::TensorInfo> infos = s.inputs();
        for (size_t k = 0; k < v.size(); ++k) ins[infos[k].name] = onnx2ggml::core_of(v[k]);
    }
    CompareOptions o;
    o.reference = a.reference;
    o.tolerance = a.tolerance;
    o.session = SessionOptions{a.backend, a.threads, rules};
    o.session.no_inplace = a.no_inplace;
    o.copts = core_options(a);
    o.picture = !a.dot.empty() || !a.svg.empty();
    o.work_dir = (a.output_dir.empty() ? std::filesystem::temp_directory_path().string() + "/onnx2ggml-compare-" +
                                             std::to_string(getpid())
                                       : a.output_dir);
    CompareResult r = compare_model(a.model, ins, o);
    if (a.output_dir.empty()) std::filesystem::remove_all(o.work_dir);
    write_pictures(a, r.dot);
    const CompareRow* first = r.first >= 0 ? &r.rows[size_t(r.first)] : nullptr;
    if (a.json) {
        std::cout << "{\"model\": " << json_str(a.model) << ", \"reference\": " << json_str(a.reference)
                  << ", \"backend\": " << json_str(r.backend) << ", \"tolerance\": " << a.tolerance
                  << ", \"first_divergence\": " << (first ? json_str(first->node_name) : "null") << ", \"rows\": [";
        for (size_t k = 0; k < r.rows.size(); ++k) {
            const CompareRow& w = r.rows[k];
            auto num = [](double x) {
                char b[32];
                snprintf(b, sizeof b, "%.6g", x);
                return std::isfinite(x) ? std::string(b) : std::string("\"inf\"");
            };
            std::cout << (k ? "," : "") << "\n  {\"node\": " << json_str(w.node_name)
                      << ", \"op\": " << json_str(w.op_type) << ", \"ggml\": " << json_str(w.ggml_ops)
                      << ", \"value\": " << json_str(w.value) << ", \"shape\": " << json_str(shape_str(w.shape));
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
    for (const CompareRow& w : r.rows) {
        const char* mark = w.first ? ">>" : w.over ? "!" : "";
        if (w.compared)
            printf("%-3s %-28s %-16s %-24s %-36s %-14s %10.3g %10.3g\n", mark, cut(w.node_name, 28).c_str(),
                   cut(w.op_type, 16).c_str(), cut(w.ggml_ops, 24).c_str(), cut(w.value, 36).c_str(),
                   shape_str(w.shape).c_str(), w.max_abs, w.rel);
        else
            printf("%-3s %-28s %-16s %-24s %-36s %-14s %21s\n", mark, cut(w.node_name, 28).c_str(),
                   cut(w.op_type, 16).c_str(), cut(w.ggml_ops, 24).c_str(), cut(w.value, 36).c_str(),
                   shape_str(w.shape).c_str(), ("(" + w.note + ")").c_str());
    }
    if (first)
        printf(
            "first divergence: node '%s' (%s): error %.3g of its value's range while its inputs are within %.3g (>> "
            "above; ! marks every value over)\n",
            first->node_name.c_str(), first->op_type.c_str(), first->rel, a.tolerance);
    else printf("no divergence: every compared value within %.3g\n", a.tolerance);
    return first ? 1 : 0;
}

int cmd_check(const Args& a) {
    if (is_dir(a.model)) {  // ONNX backend test folder
        std::string dir = a.model, model = dir + "/model.onnx";
        auto sets = list_dir(dir, "test_data_set_");
        if (sets.empty()) bad_input(dir + ": no test_data_set_* folders");
        bool all = true;
        const CompileOptions copts = core_options(a);
        Graph loaded = load_onnx(model);
        SessionOptions so{a.backend, a.threads, rules_for(a, loaded), false};
        auto ss =
            std::make_unique<SpecializingSession>(std::move(loaded), copts, so, a.max_specs);  // one for every set
        ss->set_verbose(a.verbose);
        for (auto& set : sets) {
            std::string sd = dir + "/" + set;
            // inputs by name (the .pb's name, else the graph-input order)
            const Graph& g0 = ss->model();
            auto in_files = list_dir(sd, "input_");
            if (in_files.size() != g0.inputs.size())
                bad_input(sd + ": " + std::to_string(in_files.size()) + " input files for " +
                          std::to_string(g0.inputs.size()) + " graph inputs");
            std::map<std::string, Tensor> values;
            for (size_t k = 0; k < in_files.size(); ++k) {
                std::string name;
                Tensor t = load_tensor_pb(sd + "/" + in_files[k], &name);
                bool named = false;
                for (int id : g0.inputs) named |= g0.values[id].name == name;
                std::string n = named ? name : g0.values[g0.inputs[k]].name;
                values[n] = bf16_bits(t, g0.values[g0.find(n)].dtype);
            }
            // dynamic dims take the test data's shapes; inputs that an op needs as compile-time values
            // (Reshape's shape, Resize's scales, ...) are found by the session and frozen to this set's values
            std::vector<Tensor> exp;
            for (auto& f : list_dir(sd, "output_")) exp.push_back(load_tensor_pb(sd + "/" + f));
            if (a.reference_given) {  // the host reference's outputs (they are checked as ggml's would be)
                if (a.reference != "host") bad_input("check TESTDIR takes --reference host only");
                std::string gaps;
                auto host = host_values(model, values, copts, &gaps);
                std::vector<Tensor> outs;
                for (size_t k = 0; k < exp.size() && k < g0.outputs.size(); ++k)
                    exp[k] = bf16_bits(exp[k], g0.values[g0.outputs[k]].dtype);
                for (size_t k = 0; k < g0.outputs.size(); ++k) {
                    auto it = host.find(g0.values[g0.outputs[k]].name);
                    if (it == host.end())
                        throw Error(kExitUnsupported, model + ": the host reference cannot compute output '" +
                                                          g0.values[g0.outputs[k]].name + "':\n" + gaps);
                    DType want = k < exp.size() ? exp[k].dtype : it->second.dtype;
                    outs.push_back(it->second.dtype == DType::F64 && want != DType::F64 ? it->second.cast(want)
                                                                                        : it->second);
                }
                if (exp.size() != outs.size())
                    bad_input(sd + ": " + std::to_string(exp.size()) + " output files for " +
                              std::to_string(outs.size()) + " graph outputs");
                all &= report(g0, outs, exp, a, set + " ");
                continue;
            }
            std::vector<Tensor> ins;
            for (int id : ss->input_ids()) ins.push_back(values.at(g0.values[id].name));
            auto outs = ss->run(ins);
            std::vector<std::string> frozen = ss->control_inputs();
            for (auto& kv : copts.frozen_inputs) frozen.push_back(kv.first);
            if (!frozen.empty()) {
                std::string f;
                for (auto& n : frozen) f += (f.empty() ? "" : ", ") + n;
                printf("%s frozen at compile time: %s\n", set.c_str(), f.c_str());
            }
            const Graph& g = ss->model();  // outputs by name as loaded (a staged model's come from its stages)
            for (size_t k = 0; k < exp.size() && k < outs.size(); ++k) exp[k] = bf16_bits(exp[k], outs[k].dtype);
            if (exp.size() != g.outputs.size())
                bad_input(sd + ": " + std::to_string(exp.size()) + " output files for " +
                          std::to_string(g.outputs.size()) + " graph outputs");
            all &= report(g, outs, exp, a, set + " ");
        }
        printf("%s\n", all ? "PASS" : "FAIL");
        return all ? 0 : kExitMismatch;
    }
    return onnx2ggml::cli::cmd_check_model(a);
}

int cmd_ops() {
    for (auto& op : Registry::get().op_types()) std::cout << op << "\n";
    return 0;
}

// `onnx2ggml --version`: onnx2ggml's version and commit, then ggml's, oneDNN's and the backends
int cmd_version() {
    std::cout << "onnx2ggml " ONNX2GGML_VERSION " (commit " ONNX2GGML_COMMIT ")\n" << o2g_info::build_info();
    return 0;
}

}  // namespace

// `onnx2ggml rpc-server`: one of this build's devices served to other processes by ggml's RPC server
// (ggml_backend_rpc_start_server; clients: --backend rpc:HOST:PORT[,...]). Serves until killed.
int cmd_rpc_server(int argc, char** argv) {
    std::string host = "127.0.0.1", backend = "cpu";
    long port = 50052, threads = 0;
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        if (i + 1 >= argc) bad_input("rpc-server: missing value after " + s);
        std::string v = argv[++i];
        auto number = [&](long lo, long hi) {
            if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos ||
                std::stol(v) < lo || std::stol(v) > hi)
                bad_input("rpc-server: bad " + s + " '" + v + "'");
            return std::stol(v);
        };
        if (s == "--host") host = v;
        else if (s == "--port") port = number(1, 65535);
        else if (s == "--backend") backend = v;
        else if (s == "--threads") threads = number(0, 4096);
        else bad_input("rpc-server: unknown option " + s + " (--host, --port, --backend, --threads)");
    }
    using start_t = void (*)(const char*, const char*, size_t, size_t, ggml_backend_dev_t*);
    auto start = reinterpret_cast<start_t>(o2g_runtime::rpc_proc("ggml_backend_rpc_start_server"));
    if (!start) bad_input("rpc-server: this build has no ggml RPC (configure with -DGGML_RPC=ON)");
    ggml_backend_t be = init_backend(backend, int(threads));  // the device, by the name --backend takes
    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    ggml_backend_free(be);
    std::string ep = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
    bool loopback = host == "127.0.0.1" || host == "localhost" || host == "::1";
    fprintf(stderr,
            "WARNING: ggml RPC has no authentication and no encryption: whoever can connect to %s can read and write "
            "this process's memory through it. Serve on a trusted network only%s.\n",
            ep.c_str(), loopback ? "" : " (this is NOT the loopback address)");
    printf("rpc-server: serving %s (%s) on %s\n", ggml_backend_dev_name(dev), ggml_backend_dev_description(dev),
           ep.c_str());
    fflush(stdout);
    start(ep.c_str(), nullptr, size_t(threads > 0 ? threads : o2g_runtime::usable_cores()), 1, &dev);
    bad_input("rpc-server: cannot serve on " + ep + " (address in use, or not an address of this machine)");
    return kExitBadInput;
}

int main(int argc, char** argv) {
    ggml_set_abort_callback(o2g_runtime::exit_on_ggml_abort);  // an RPC server gone: exit 2, not a core dump
    try {
        if (argc >= 2 && std::strcmp(argv[1], "rpc-server") == 0) return cmd_rpc_server(argc, argv);
        Args a = parse(argc, argv);
        if (a.cmd == "ops") return cmd_ops();
        if (a.cmd == "-h" || a.cmd == "--help" || a.cmd == "help") {
            std::cout << kUsage;
            return 0;
        }
        if (a.cmd == "--version" || a.cmd == "version") return cmd_version();
        if (a.model.empty()) bad_input("missing MODEL\n" + std::string(kUsage));
        // on the public API (run.cpp)
        if (a.cmd == "run") return onnx2ggml::cli::cmd_run(a);
        if (a.cmd == "compile") return onnx2ggml::cli::cmd_compile(a);
        if (a.cmd == "bench") return onnx2ggml::cli::cmd_bench(a);
        // on the compiler's internals
        if (a.max_memory) set_memory_limit(a.max_memory);
        if (a.cmd == "inspect") return cmd_inspect(a);
        if (a.cmd == "quantize") return cmd_quantize(a);
        if (a.cmd == "check") return cmd_check(a);  // (a MODEL: run.cpp's cmd_check_model, on the API)
        if (a.cmd == "compare") return cmd_compare(a);
        bad_input("unknown command '" + a.cmd + "'\n" + kUsage);
    } catch (const onnx2ggml::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return e.exit_code();
    } catch (const Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return e.code;
    } catch (const std::bad_alloc&) {
        std::cerr << "error: out of memory\n";
        return kExitBadInput;
    } catch (const std::exception& e) {
        std::cerr << "internal error: " << e.what() << "\n";
        return kExitInternal;
    }
}
