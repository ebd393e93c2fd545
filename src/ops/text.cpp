// Text operators. TfIdfVectorizer on integer token ids: ggml has no kernel for n-gram counting, the
// host evaluator computes it, folded when the tokens are constant, else a host kernel
// (lower/host_kernel.h); its string form (pool_strings) is not supported. StringNormalizer takes
// string tensors, which are host values (ir/tensor.h): it is always folded.
#include <clocale>
#include <cwctype>
#include <locale.h>
#include <map>
#include <set>

#include "ops/common.h"
#include "util/utf8.h"

namespace onnx2ggml::core {
namespace {

// The n-gram pool of a TfIdfVectorizer: each n-gram of the pool with its output coordinate
// (ngram_indexes) and its weight.
struct NgramPool {
    std::map<std::vector<int64_t>, int64_t> index;  // n-gram -> position in the pool
    std::vector<int64_t> out_index;                 // pool position -> output coordinate
    std::vector<double> weight;                     // pool position -> weight (1 without weights)
    int64_t width = 0;                              // output coordinates: max(ngram_indexes) + 1
    int64_t min_n = 1, max_n = 1, max_skip = 0;
    int mode = 0;  // 0 TF, 1 IDF, 2 TFIDF
};

NgramPool read_pool(OpCtx& c) {
    NgramPool p;
    if (c.has_attr("pool_strings"))
        c.fail_unsupported("pool_strings: string tensors are not supported (pool_int64s is)");
    std::vector<int64_t> pool = c.ais("pool_int64s"), counts = c.ais("ngram_counts"), idx = c.ais("ngram_indexes");
    std::vector<float> w = c.afs("weights");
    p.min_n = c.ai("min_gram_length", 0);
    p.max_n = c.ai("max_gram_length", 0);
    p.max_skip = c.ai("max_skip_count", 0);
    std::string mode = c.as("mode", "");
    p.mode = mode == "TF" ? 0 : mode == "IDF" ? 1 : mode == "TFIDF" ? 2 : -1;
    if (p.mode < 0) c.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
    if (p.min_n < 1 || p.max_n < p.min_n) c.fail("need 1 <= min_gram_length <= max_gram_length");
    if (p.max_skip < 0) c.fail("max_skip_count must be >= 0");
    if (int64_t(counts.size()) != p.max_n) c.fail("ngram_counts must have max_gram_length entries");
    // ngram_counts[n-1] is where the n-grams start in the pool; they end where the (n+1)-grams start.
    for (int64_t n = 1; n <= p.max_n; ++n) {
        int64_t begin = counts[size_t(n - 1)], end = n < p.max_n ? counts[size_t(n)] : int64_t(pool.size());
        if (begin < 0 || end < begin || end > int64_t(pool.size()) || (end - begin) % n)
            c.fail("ngram_counts does not split pool_int64s into n-grams of length " + std::to_string(n));
        for (int64_t s = begin; s < end; s += n) {
            int64_t k = int64_t(p.out_index.size());
            if (k >= int64_t(idx.size())) c.fail("ngram_indexes has fewer entries than the pool has n-grams");
            if (idx[size_t(k)] < 0) c.fail("ngram_indexes must be >= 0");
            p.index.emplace(std::vector<int64_t>(pool.begin() + s, pool.begin() + s + n), k);
            p.out_index.push_back(idx[size_t(k)]);
            p.weight.push_back(w.empty() ? 1.0 : k < int64_t(w.size()) ? double(w[size_t(k)]) : 0.0);
            p.width = std::max(p.width, idx[size_t(k)] + 1);
        }
    }
    if (!w.empty() && w.size() != p.out_index.size()) c.fail("weights must have one entry per n-gram of the pool");
    return p;
}

// Counts for one row of tokens. A unigram is counted once per position (skips do not change it);
// an n-gram with n >= 2 once per (start, skip) whose tokens start, start+d, ... (d = skip + 1) match.
std::vector<double> count_row(const NgramPool& p, const int64_t* tok, int64_t len) {
    std::vector<double> cnt(p.out_index.size(), 0.0);
    std::vector<int64_t> gram;
    for (int64_t skip = 0; skip <= p.max_skip; ++skip) {
        int64_t d = skip + 1;
        for (int64_t start = 0; start < len; ++start) {
            gram.clear();
            for (int64_t n = 1; n <= p.max_n && start + (n - 1) * d < len; ++n) {
                gram.push_back(tok[start + (n - 1) * d]);
                if (n < p.min_n || (n == 1 && skip > 0)) continue;
                auto hit = p.index.find(gram);
                if (hit != p.index.end()) cnt[size_t(hit->second)] += 1;
            }
        }
    }
    return cnt;
}

void register_tfidf(Registry& r) {
    OpDef d;
    d.op_type = "TfIdfVectorizer";
    d.min_inputs = 1;
    d.infer = [](OpCtx& c) {
        DType t = c.dtype(0);
        if (t != DType::I32 && t != DType::I64)
            c.fail_unsupported(std::string("input of type ") + dtype_name(t) +
                               " (int32 and int64 token ids are supported)");
        if (c.rank(0) != 1 && c.rank(0) != 2) c.fail("input must be 1-D [C] or 2-D [N, C]");
        NgramPool p = read_pool(c);
        Shape o = c.shape(0);
        o.back() = p.width;
        c.set_out(0, DType::F32, o);
    };
    d.work = [](OpCtx& c) {
        double grams = double(c.ai("max_gram_length", 1)) * double(c.ai("max_skip_count", 0) + 1);
        return double(shape_numel(c.shape(0))) * grams * 16;
    };
    d.eval = [](OpCtx& c) {
        NgramPool p = read_pool(c);
        std::vector<int64_t> tok = c.cval(0).to_i64();
        const Shape& s = c.shape(0);
        int64_t rows = s.size() == 2 ? s[0] : 1, len = s.back();
        Shape o = s;
        o.back() = p.width;
        Tensor t = Tensor::zeros(DType::F32, o);
        for (int64_t row = 0; row < rows; ++row) {
            std::vector<double> cnt = count_row(p, tok.data() + row * len, len);
            for (size_t k = 0; k < cnt.size(); ++k) {
                double v = p.mode == 1 ? (cnt[k] > 0 ? 1.0 : 0.0) : cnt[k];
                if (p.mode != 0) v *= p.weight[k];
                int64_t e = row * p.width + p.out_index[k];
                t.setf(e, t.getf(e) + v);
            }
        }
        c.set_const(0, t);
    };
    r.add(std::move(d));
}

// Upper/lower-casing of UTF-8 text by code point, in the given locale's character classes
// (towupper_l); ASCII only when no UTF-8 locale can be opened. Invalid UTF-8 bytes pass unchanged.
class CaseMap {
public:
    explicit CaseMap(const std::string& locale) {
        for (std::string name : {locale + ".UTF-8", locale + ".utf8", std::string("C.UTF-8"), std::string("C.utf8")})
            if (!locale.empty() || name.rfind("C.", 0) == 0)
                if ((loc_ = newlocale(LC_CTYPE_MASK, name.c_str(), locale_t(nullptr)))) break;
    }
    ~CaseMap() {
        if (loc_) freelocale(loc_);
    }
    CaseMap(const CaseMap&) = delete;
    CaseMap& operator=(const CaseMap&) = delete;

    std::string apply(const std::string& s, bool upper) const {
        std::string r;
        for (size_t i = 0; i < s.size();) {
            uint32_t cp;
            size_t n = utf8_decode(s, i, cp);
            if (n == 0) {
                r += s[i++];
                continue;
            }  // not UTF-8: the byte as it is
            uint32_t m = cp;
            if (loc_) m = uint32_t(upper ? towupper_l(wint_t(cp), loc_) : towlower_l(wint_t(cp), loc_));
            else if (cp < 128) m = uint32_t(upper ? std::toupper(int(cp)) : std::tolower(int(cp)));
            utf8_encode(m, r);
            i += n;
        }
        return r;
    }

private:
    locale_t loc_ = locale_t(nullptr);
};

// StringNormalizer: drops the stopwords from a [C] or [1, C] string tensor, then changes case.
// The output length depends on the values: the input must be known at compile time.
Tensor normalize_strings(OpCtx& c) {
    const Tensor& x = c.cval(0);
    const Shape& s = x.shape;
    if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1))) c.fail("input must be [C] or [1, C], got " + shape_str(s));
    std::string action = c.as("case_change_action", "NONE");
    if (action != "NONE" && action != "LOWER" && action != "UPPER")
        c.fail("case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
    bool sensitive = c.ai("is_case_sensitive", 0) != 0;
    CaseMap cm(c.as("locale", ""));
    std::set<std::string> stop;
    for (const std::string& w : c.astrs("stopwords")) stop.insert(sensitive ? w : cm.apply(w, false));
    std::vector<std::string> kept;
    for (const std::string& e : x.strings()) {
        if (stop.count(sensitive ? e : cm.apply(e, false))) continue;
        kept.push_back(action == "NONE" ? e : cm.apply(e, action == "UPPER"));
    }
    if (kept.empty()) kept.push_back("");  // all dropped: one empty string (the spec)
    int64_t n = int64_t(kept.size());
    return Tensor::from_strings(std::move(kept), s.size() == 1 ? Shape{n} : Shape{1, n});
}

void register_string_normalizer(Registry& r) {
    OpDef d;
    d.op_type = "StringNormalizer";
    d.min_inputs = 1;
    d.string_inputs = true;
    d.infer = [](OpCtx& c) {
        if (c.dtype(0) != DType::String)
            c.fail(std::string("input must be a string tensor, got ") + dtype_name(c.dtype(0)));
        Tensor t = normalize_strings(c);
        c.set_out(0, DType::String, t.shape);
    };
    d.eval = [](OpCtx& c) { c.set_const(0, normalize_strings(c)); };
    r.add(std::move(d));
}

}  // namespace

O2G_OP_FAMILY(text) {
    register_tfidf(r);
    register_string_normalizer(r);
}

}  // namespace onnx2ggml::core
