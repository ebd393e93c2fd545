// The onnx2ggml command's arguments and what its two halves share. run.cpp (run, check, bench, compile)
// is written on the public C++ API alone (include/onnx2ggml/onnx2ggml.hpp), as an application would be;
// main.cpp parses the command line and holds the commands that report the compiler's own internals
// (inspect: the graph, its shapes and ggml ops; compare: every intermediate value; quantize; check on an
// ONNX backend-test folder), which the API does not expose.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "onnx2ggml/onnx2ggml.hpp"

namespace onnx2ggml::cli {

using Dims = std::vector<int64_t>;

// One set of inputs (and expected outputs) of run/check: `--then` starts the next, run in the same session.
struct InputSet {
    std::vector<std::pair<std::string, std::string>> inputs, expects;  // NAME, FILE.npy
    std::map<std::string, Dims> shapes;                                // --input-shape
};

struct Args {
    std::string cmd, model, outdir, output_dir, backend = "auto";
    bool backend_given = false;  // --backend on the command line (inspect then reports the placement)
    std::vector<InputSet> sets;  // at least one after parsing; compile, inspect, bench and compare take the first
    std::vector<std::pair<std::string, std::string>> freeze;  // --freeze NAME=FILE.npy
    std::map<std::string, Dims> dims;                         // compile --dim NAME=VALUES
    bool optimize = true;                                     // --no-optimize
    std::vector<std::string> disabled_passes;                 // --disable-pass
    int threads = 0, repeat = 10, warmup = 2;
    size_t max_specs = 8;
    uint64_t max_memory = 0;  // --max-memory (0: the default, physical memory)
    bool json = false, ggml = false, has_seed = false, profile = false, verbose = false;
    uint64_t seed = 0;
    double rtol = 1e-3, atol = 1e-7;
    std::string weights = "f32";            // --weights
    std::vector<std::string> weight_rules;  // --weights-rule
    std::string gguf;                       // --gguf
    std::string reference = "host";         // compare; check TESTDIR --reference host
    bool reference_given = false;
    std::string dot, svg;     // inspect, compare: pictures
    bool no_inplace = false;  // compare
    double tolerance = 1e-4;  // compare
};

// args.cpp: the usage text and the parser
extern const char* const kUsage;
Args parse(int argc, char** argv);
// compile --dim's "NAME=MIN:MAX[:STEP]" or "NAME=V1,V2,..." -> (NAME, the values ascending); BadInput otherwise
std::pair<std::string, Dims> parse_dim_spec(const std::string& spec);
[[noreturn]] void bad(const std::string& message);  // throws Error(BadInput, message)

// run.cpp: run, check MODEL, bench, compile
int cmd_run(const Args& a);
int cmd_check_model(const Args& a);  // check MODEL --input ... --expect ...
int cmd_bench(const Args& a);
int cmd_compile(const Args& a);
SessionOptions session_options(const Args& a);
std::map<std::string, Tensor> frozen_inputs(const Args& a);  // --freeze's files
// The inputs of one set in s.inputs()'s order: --input files (their shapes bind the dynamic dims), else
// random with --random-inputs (shapes from --input-shape and the dims the files bind).
std::vector<Tensor> gather_inputs(const Session& s, const Args& a, const InputSet& set);

// Where a session's nodes run, as text (inspect --backend, run --profile) and JSON (inspect --json)
// check MODEL and check TESTDIR: a line per output (errors, PASS/FAIL); false on a mismatch
bool report_outputs(const std::vector<Tensor>& outs, const std::vector<Tensor>& expected, const Args& a,
                    const std::string& tag);

// tools.cpp: the commands that report what the compiler sees (on the API's model tools)
int cmd_inspect(const Args& a);
int cmd_quantize(const Args& a);
int cmd_compare(const Args& a);
int cmd_check_dir(const Args& a);  // check TESTDIR (an ONNX backend-test folder)

std::string placement_text(const Placement& p, bool per_op);
std::string placement_json(const Placement& p);
std::string json_str(const std::string& s);
std::string dims_str(const Dims& d);  // [1,3,224,224]

}  // namespace onnx2ggml::cli
