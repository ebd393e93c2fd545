// The onnx2ggml command line: its usage text and its parser (into Args, cli.h). Every check that needs no
// model happens here, so a mistyped option exits 2 before any work.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "cli.h"

namespace onnx2ggml::cli {

const char* const kUsage =
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

namespace {

constexpr int64_t kMaxDimValues = 128;  // compile --dim: CompileOptions::dims takes at most 128 combinations

Dims parse_dims(const std::string& s, const std::string& what) {
    Dims r;
    if (s == "scalar" || s.empty()) return r;
    std::stringstream ss(s);
    std::string tok;
    while (std::getline(ss, tok, 'x')) {
        if (tok.empty() || tok.size() > 12 || tok.find_first_not_of("0123456789") != std::string::npos)
            bad("bad dims '" + s + "' in " + what + " (expected e.g. 1x3x224x224)");
        r.push_back(std::stoll(tok));
    }
    return r;
}

std::pair<std::string, std::string> split_eq(const std::string& v, const char* opt) {
    auto p = v.rfind('=');
    if (p == std::string::npos || p == 0) bad(std::string(opt) + " expects NAME=VALUE, got '" + v + "'");
    return {v.substr(0, p), v.substr(p + 1)};
}

}  // namespace

std::pair<std::string, Dims> parse_dim_spec(const std::string& spec) {
    auto fail = [&](const std::string& why) -> std::pair<std::string, Dims> {
        bad("--dim '" + spec + "': " + why + " (expected NAME=MIN:MAX[:STEP] or NAME=V1,V2,...)");
    };
    size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0) return fail("no NAME=");
    std::pair<std::string, Dims> d;
    d.first = spec.substr(0, eq);
    std::string v = spec.substr(eq + 1);
    auto num = [&](const std::string& t) -> int64_t {
        if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos)
            fail("'" + t + "' is not a positive number");
        int64_t x = std::stoll(t);
        if (x < 1) fail("dims are at least 1");
        return x;
    };
    if (v.find(':') != std::string::npos) {
        std::vector<std::string> p;
        std::stringstream ss(v);
        for (std::string t; std::getline(ss, t, ':');) p.push_back(t);
        if (p.size() < 2 || p.size() > 3) return fail("a range has 2 or 3 parts");
        int64_t lo = num(p[0]), hi = num(p[1]), step = p.size() == 3 ? num(p[2]) : 1;
        if (hi < lo) return fail("MAX below MIN");
        if ((hi - lo) / step + 1 > int64_t(kMaxDimValues)) return fail("more than 128 values");
        for (int64_t x = lo; x <= hi; x += step) d.second.push_back(x);
    } else {
        std::stringstream ss(v);
        for (std::string t; std::getline(ss, t, ',');) d.second.push_back(num(t));
        std::sort(d.second.begin(), d.second.end());
        d.second.erase(std::unique(d.second.begin(), d.second.end()), d.second.end());
    }
    if (d.second.empty()) return fail("no values");
    return d;
}

Args parse(int argc, char** argv) {
    Args a;
    InputSet cur;  // the set being read; --then starts the next
    if (argc < 2) bad(std::string("missing command\n") + kUsage);
    a.cmd = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) bad("missing value after " + s);
            return argv[++i];
        };
        auto num = [&](const std::string& v) {
            try {
                size_t p;
                double d = std::stod(v, &p);
                if (p != v.size()) throw 0;
                return d;
            } catch (...) { bad("bad number '" + v + "' after " + s); }
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
            auto d = parse_dim_spec(next());
            a.dims[d.first] = d.second;
        } else if (s == "--output-dir") a.output_dir = next();
        else if (s == "-o") a.outdir = next();
        else if (s == "--backend") a.backend = next(), a.backend_given = true;
        else if (s == "--threads") a.threads = int(num(next()));
        else if (s == "--repeat") a.repeat = std::max(1, int(num(next())));
        else if (s == "--warmup") a.warmup = std::max(0, int(num(next())));
        else if (s == "--rtol") a.rtol = num(next());
        else if (s == "--atol") a.atol = num(next());
        else if (s == "--max-memory") a.max_memory = onnx2ggml::parse_size(next());
        else if (s == "--json") a.json = true;
        else if (s == "--reference") a.reference = next(), a.reference_given = true;
        else if (s == "--dot") a.dot = next();
        else if (s == "--no-inplace") a.no_inplace = true;
        else if (s == "--quiet") set_progress_bars(false);
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
            a.weights = next();
            check_weights(a.weights, {});  // checked here: exit 2 before any work
        } else if (s == "--weights-rule") {
            a.weight_rules.push_back(next());
            check_weights("f32", {a.weight_rules.back()});
        } else if (s == "--gguf") a.gguf = next();
        else if (s == "--disable-pass") a.disabled_passes.push_back(next());
        else if (s == "-h" || s == "--help") {
            std::cout << kUsage;
            std::exit(0);
        } else if (!s.empty() && s[0] == '-') bad("unknown option '" + s + "'\n" + kUsage);
        else if (a.model.empty()) a.model = s;
        else bad("unexpected argument '" + s + "'");
    }
    a.sets.push_back(cur);
    return a;
}

}  // namespace onnx2ggml::cli
