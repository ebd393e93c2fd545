#include "lower/weights.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "gguf.h"
#include "lower/builder.h"
#include "util/error.h"

namespace onnx2ggml::core {

WeightRule parse_weight_rule(const std::string& text) {
    auto p = text.rfind('=');
    if (p == std::string::npos || p == 0)
        bad_input("--weights-rule '" + text + "': expected REGEX=TYPE (e.g. 'attn.*=q8_0')");
    WeightRule r;
    r.text = text;
    std::string tn = text.substr(p + 1);
    r.type = weight_type_by_name(tn);
    if (r.type == GGML_TYPE_COUNT)
        bad_input("--weights-rule '" + text + "': unknown type '" + tn + "' (types: " + weight_type_names() + ")");
    try {
        r.re = std::make_shared<const std::regex>(text.substr(0, p), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        bad_input("--weights-rule '" + text + "': invalid regular expression '" + text.substr(0, p) + "' (" + e.what() +
                  ")");
    }
    return r;
}

// A _K type's rows that do not divide into 256 values: the 32-value type of about as many bits (as llama.cpp does)
static ggml_type k_fallback(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K: return GGML_TYPE_Q4_0;
        case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
        case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
        case GGML_TYPE_Q6_K: return GGML_TYPE_Q8_0;
        default: return t;
    }
}

ggml_type WeightRules::choose(const std::string& name, const Shape& s, bool transpose, bool conv_kernel) const {
    ggml_type t = base;
    bool ruled = false;
    for (const WeightRule& r : rules)
        if (std::regex_search(name, *r.re)) {
            t = r.type;
            ruled = true;
            break;
        }
    int64_t n = 1, big = 0;
    for (int64_t d : s) n *= d, big += d > 1;
    if (!ruled && (n < kSmallWeight || big < 2)) t = GGML_TYPE_F32;
    // a quantized type's blocks run along a row (ggml's ne[0]: the stored last dim)
    int64_t row = s.empty() ? 1 : transpose ? (s.size() >= 2 ? s[s.size() - 2] : 1) : s.back();
    // ggml has no quantized convolution: under --weights TYPE a kernel stays f32 (oneDNN's fast path; a
    // quantized kernel's product also quantizes the activations: resnet50's q8_0 error would pass 1e-2). A rule
    // naming it quantizes it: a Conv lowered as im2col and a quantized matrix product (ops/conv.cpp), its kernel
    // [OC, IC*KH*KW] (`s` is given so, rows of IC*KH*KW)
    if (ggml_is_quantized(t) && conv_kernel && !ruled) t = GGML_TYPE_F32;
    if (ggml_is_quantized(t) && row % ggml_blck_size(t) != 0) t = k_fallback(t);  // rows of 32k, not 256k
    if (ggml_is_quantized(t) && row % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
    return t;
}

void warn_unmatched_rules(const WeightRules& r, const Graph& g) {
    for (const WeightRule& rule : r.rules) {
        bool any = false;
        for (const Value& v : g.values)
            if (v.is_initializer && std::regex_search(v.name, *rule.re)) {
                any = true;
                break;
            }
        if (!any)
            fprintf(stderr, "onnx2ggml: warning: --weights-rule '%s' names no initializer of %s\n", rule.text.c_str(),
                    g.path.c_str());
    }
}

std::vector<std::string> initializer_signatures(const Graph& g) {
    std::vector<std::string> r;
    for (const Value& v : g.values)
        if (v.is_initializer) r.push_back(v.name + " " + dtype_name(v.dtype) + " " + shape_str(v.shape));
    return r;
}

std::string model_key(const std::vector<std::string>& sigs) {
    uint64_t h = 1469598103934665603ull;
    for (const std::string& s : sigs)
        for (unsigned char c : s + "\n") h = (h ^ c) * 1099511628211ull;
    char buf[24];
    snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

static std::string ne_str(const int64_t ne[4]) {
    return std::to_string(ne[0]) + "x" + std::to_string(ne[1]) + "x" + std::to_string(ne[2]) + "x" +
           std::to_string(ne[3]);
}

GgufWeights::GgufWeights(const std::string& path) : path_(path) {
    gguf_init_params p = {true, nullptr};
    gguf_context* gg = gguf_init_from_file(path.c_str(), p);
    if (!gg) bad_input(path + ": cannot read it as a GGUF file");
    auto str = [&](const char* key) -> std::string {
        int64_t k = gguf_find_key(gg, key);
        return k >= 0 && gguf_get_kv_type(gg, k) == GGUF_TYPE_STRING ? gguf_get_val_str(gg, k) : "";
    };
    auto strs = [&](const char* key, int64_t* id) {
        std::vector<std::string> r;
        *id = gguf_find_key(gg, key);
        if (*id >= 0 && gguf_get_kv_type(gg, *id) == GGUF_TYPE_ARRAY && gguf_get_arr_type(gg, *id) == GGUF_TYPE_STRING)
            for (size_t i = 0; i < gguf_get_arr_n(gg, *id); ++i) r.push_back(gguf_get_arr_str(gg, *id, i));
        return r;
    };
    key_ = str(gguf_keys::model_key);
    base_ = str(gguf_keys::weights);
    int64_t kid, rid, nid;
    sigs_ = strs(gguf_keys::initializers, &kid);
    rules_ = strs(gguf_keys::rules, &rid);
    std::vector<std::string> names = strs(gguf_keys::onnx_names, &nid);
    int64_t tid = gguf_find_key(gg, gguf_keys::transposed);
    int64_t n = gguf_get_n_tensors(gg);
    bool ok = !key_.empty() && kid >= 0 && nid >= 0 && int64_t(names.size()) == n &&
              (n == 0 || (tid >= 0 && gguf_get_kv_type(gg, tid) == GGUF_TYPE_ARRAY &&
                          gguf_get_arr_type(gg, tid) == GGUF_TYPE_UINT8 && int64_t(gguf_get_arr_n(gg, tid)) == n));
    if (!ok) {
        gguf_free(gg);
        bad_input(path + ": not a GGUF written by onnx2ggml quantize or compile (no " + gguf_keys::model_key + "/" +
                  gguf_keys::onnx_names + " metadata)");
    }
    const uint8_t* tr = n > 0 ? static_cast<const uint8_t*>(gguf_get_arr_data(gg, tid)) : nullptr;
    std::error_code ec;
    uintmax_t fsize = std::filesystem::file_size(path, ec);
    for (int64_t i = 0; i < n; ++i) {
        Entry e;
        e.name = gguf_get_tensor_name(gg, i);
        e.onnx_name = names[size_t(i)];
        e.transposed = tr[i] != 0;
        e.type = gguf_get_tensor_type(gg, i);
        const int64_t* ne = gguf_get_tensor_ne(gg, i);
        for (int d = 0; d < 4; ++d) e.ne[d] = ne[d];
        e.offset = gguf_get_data_offset(gg) + gguf_get_tensor_offset(gg, i);
        e.size = gguf_get_tensor_size(gg, i);
        if (ec || e.offset + e.size > fsize) {
            gguf_free(gg);
            bad_input(path + ": tensor '" + e.name + "' (" + e.onnx_name +
                      ") lies past the end of the file (truncated?)");
        }
        entries_.push_back(e);
    }
    gguf_free(gg);
}

void GgufWeights::check_model(const Graph& loaded) const {
    std::vector<std::string> mine = initializer_signatures(loaded);
    if (model_key(mine) == key_ && mine == sigs_) return;
    std::map<std::string, std::string> theirs;  // name -> signature
    for (const std::string& s : sigs_) theirs[s.substr(0, s.find(' '))] = s;
    std::string why;
    std::set<std::string> seen;
    for (const Value& v : loaded.values) {
        if (!v.is_initializer) continue;
        seen.insert(v.name);
        auto it = theirs.find(v.name);
        std::string sig = v.name + " " + dtype_name(v.dtype) + " " + shape_str(v.shape);
        if (it == theirs.end()) {
            why = "the model's initializer '" + v.name + "' is not in it";
            break;
        }
        if (it->second != sig) {
            why = "initializer '" + v.name + "' is " + it->second.substr(v.name.size() + 1) + " there, " +
                  sig.substr(v.name.size() + 1) + " in the model";
            break;
        }
    }
    if (why.empty())
        for (auto& kv : theirs)
            if (!seen.count(kv.first)) {
                why = "its initializer '" + kv.first + "' is not in the model";
                break;
            }
    if (why.empty()) why = "the initializers are in another order";
    bad_input(path_ + ": written for another model (key " + key_ + ", this model's " + model_key(mine) + "): " + why);
}

WeightRules GgufWeights::recorded_rules() const {
    WeightRules r(weight_type_by_name(base_));
    if (r.base == GGML_TYPE_COUNT) bad_input(path_ + ": unknown weight type '" + base_ + "' in " + gguf_keys::weights);
    for (const std::string& s : rules_) r.rules.push_back(parse_weight_rule(s));
    return r;
}

int64_t GgufWeights::find(const std::string& name, bool transpose, ggml_type type, const int64_t ne[4]) const {
    const Entry* first = nullptr;
    for (size_t i = 0; i < entries_.size(); ++i) {
        const Entry& e = entries_[i];
        if (e.onnx_name != name || e.transposed != transpose) continue;
        if (e.type == type && std::equal(ne, ne + 4, e.ne)) return int64_t(i);
        if (!first) first = &e;
    }
    std::string want = std::string(ggml_type_name(type)) + " " + ne_str(ne);
    if (!first)
        bad_input(path_ + ": no tensor for initializer '" + name + "' stored as " + want +
                  (transpose ? " transposed" : "") + " (written with other options?)");
    bad_input(path_ + ": tensor '" + first->name + "' (initializer '" + name + "') is " + ggml_type_name(first->type) +
              " " + ne_str(first->ne) + " there, but this run stores it as " + want +
              " (--weights/--weights-rule differ from the GGUF's)");
}

Tensor GgufWeights::read(int64_t index) const {
    const Entry& e = entries_.at(size_t(index));
    Tensor t = Tensor::zeros(DType::U8, {int64_t(e.size)});
    FILE* f = std::fopen(path_.c_str(), "rb");
    bool ok = f && fseeko(f, off_t(e.offset), SEEK_SET) == 0 && std::fread(t.data(), 1, e.size, f) == e.size;
    if (f) std::fclose(f);
    if (!ok) bad_input(path_ + ": cannot read tensor '" + e.name + "'");
    return t;
}

}  // namespace onnx2ggml::core
