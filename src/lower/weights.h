// How the MatMul/Gemm/Conv weights are stored (--weights, --weights-rule), and the weights of a GGUF
// written by `quantize` or `compile` that `--gguf FILE` takes as they are (no second quantization).
//
// One rule set decides every weight's type (WeightRules::choose), in this order:
//   1. the --weights-rule REGEX=TYPE rules, in the order given: the first whose REGEX matches (std::regex
//      search, ECMAScript) the ONNX initializer's name gives the type;
//   2. the default: a weight with fewer than kSmallWeight elements, or with a single dim above 1, stays f32;
//   3. --weights TYPE (f32 when not given).
// Then what ggml can store: under a quantized type, convolution kernels stay f32 (ggml has no quantized
// convolution, and oneDNN's path takes f32 kernels only: f16 only when f16 is asked for); a matrix whose rows
// (the stored ne[0]) do not divide into 256 values takes, for a _K type, the 32-value type of about as many
// bits (q2_K, q3_K -> q4_0; q4_K -> q5_0; q5_K -> q5_1; q6_K -> q8_0), and rows that do not divide into 32
// are stored f16. Constants that are not a MatMul/Gemm/Conv weight (biases, norm scales, ...) are always f32.
#pragma once
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "ggml.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace onnx2ggml::core {

constexpr int64_t kSmallWeight = 4096;

struct WeightRule {
    std::string text;  // "REGEX=TYPE" as given
    std::shared_ptr<const std::regex> re;
    ggml_type type = GGML_TYPE_F32;
};

// "REGEX=TYPE" (the last '=' splits); exit 2 naming the rule for a bad regex or an unknown type
WeightRule parse_weight_rule(const std::string& text);

class GgufWeights;

struct WeightRules {
    ggml_type base = GGML_TYPE_F32;                        // --weights
    std::vector<WeightRule> rules;                         // --weights-rule, first match wins
    std::shared_ptr<const GgufWeights> gguf;               // --gguf: the initializers' weights are read from there
    WeightRules(ggml_type t = GGML_TYPE_F32) : base(t) {}  // NOLINT: a plain type is a rule set without rules

    // The stored type of the constant float MatMul/Gemm/Conv weight `name` of row-major shape `s`
    // (transposed in its last two dims when stored if `transpose`).
    ggml_type choose(const std::string& name, const Shape& s, bool transpose, bool conv_kernel) const;
    bool user_given() const { return base != GGML_TYPE_F32 || !rules.empty(); }
};

// Writes on stderr a warning for each rule whose REGEX matches none of the graph's initializers.
void warn_unmatched_rules(const WeightRules& r, const Graph& loaded);

// The initializers of a model as loaded: "name dtype shape" each, and a key (a 64-bit FNV-1a hash of
// them, in hex) that the GGUF records so that a GGUF is used only with the model it was written for.
std::vector<std::string> initializer_signatures(const Graph& loaded);
std::string model_key(const std::vector<std::string>& signatures);

// GGUF metadata keys (written by write_gguf's callers, read by GgufWeights)
namespace gguf_keys {
constexpr const char* model_key = "onnx2ggml.model_key";
constexpr const char* initializers = "onnx2ggml.initializers";     // array: initializer_signatures
constexpr const char* weights = "onnx2ggml.weights";               // --weights type name
constexpr const char* rules = "onnx2ggml.weight_rules";            // array: "REGEX=TYPE"
constexpr const char* onnx_names = "onnx2ggml.tensor.onnx_names";  // array: per tensor ("" for derived constants)
constexpr const char* transposed = "onnx2ggml.tensor.transposed";  // array of uint8: per tensor
constexpr const char* host_kernel = "onnx2ggml.host_kernel.";     // + K: array of uint8, host kernel K's record
}  // namespace gguf_keys

// A GGUF's tensors (header only; the data is read per weight, when uploaded).
class GgufWeights {
public:
    explicit GgufWeights(const std::string& path);  // exit 2 naming the file if it is not an onnx2ggml GGUF
    // exit 2 naming the file and the first initializer that differs when the GGUF is for another model
    void check_model(const Graph& loaded) const;
    WeightRules recorded_rules() const;  // the --weights and --weights-rule it was written with
    // The tensor for the initializer `name` stored with `type` and `ne` (transposed or not); exit 2 naming the
    // file and the tensor when there is none or it differs
    int64_t find(const std::string& name, bool transpose, ggml_type type, const int64_t ne[4]) const;
    Tensor read(int64_t index) const;  // the stored bytes (U8)
    const std::string& path() const { return path_; }

private:
    struct Entry {
        std::string name, onnx_name;
        bool transposed;
        ggml_type type;
        int64_t ne[4];
        size_t offset, size;
    };
    std::string path_, key_, base_;
    std::vector<std::string> sigs_, rules_;
    std::vector<Entry> entries_;
};

}  // namespace onnx2ggml::core
