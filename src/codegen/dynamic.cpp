// compile --dim: one program for a grid of input shapes (codegen/dynamic.h).
#include "codegen/dynamic.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "lower/builder.h"
#include "runtime/build.h"
#include "util/error.h"

namespace onnx2ggml::core {

namespace {

constexpr size_t kMaxGridPoints = 128;  // each point is one specialization and lowering of the whole model
constexpr size_t kMaxVariants = 8;      // different ggml programs over one grid (a dim of 1 often skips a reshape)

using i128 = __int128;

i128 gcd128(i128 a, i128 b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        i128 t = a % b;
        a = b, b = t;
    }
    return a;
}

// An exact fraction (the coefficients of the fitted polynomials); small enough here for __int128
struct Frac {
    i128 n = 0, d = 1;
    Frac(i128 num = 0, i128 den = 1) : n(num), d(den) {
        if (d < 0) n = -n, d = -d;
        i128 g = gcd128(n, d);
        if (g > 1) n /= g, d /= g;
    }
    Frac operator+(const Frac& o) const { return Frac(n * o.d + o.n * d, d * o.d); }
    Frac operator-(const Frac& o) const { return Frac(n * o.d - o.n * d, d * o.d); }
    Frac operator*(const Frac& o) const { return Frac(n * o.n, d * o.d); }
    Frac operator/(const Frac& o) const { return Frac(n * o.d, d * o.n); }
};

std::string i128_str(i128 v) {
    if (v == 0) return "0";
    bool neg = v < 0;
    std::string s;
    for (i128 x = neg ? -v : v; x > 0; x /= 10) s += char('0' + int(x % 10));
    if (neg) s += '-';
    return std::string(s.rbegin(), s.rend());
}

// The inverse of the Vandermonde matrix of `x` (rows: powers 0..n-1): coefficients = inv * values
std::vector<std::vector<Frac>> vandermonde_inverse(const std::vector<int64_t>& x) {
    size_t n = x.size();
    std::vector<std::vector<Frac>> a(n, std::vector<Frac>(2 * n));
    for (size_t i = 0; i < n; ++i) {
        Frac p = 1;
        for (size_t e = 0; e < n; ++e) a[i][e] = p, p = p * Frac(x[i]);
        a[i][n + i] = 1;
    }
    for (size_t c = 0; c < n; ++c) {  // Gauss-Jordan; the nodes are distinct, so every pivot is non-zero
        size_t r = c;
        while (a[r][c].n == 0) ++r;
        std::swap(a[r], a[c]);
        Frac piv = a[c][c];
        for (auto& v : a[c]) v = v / piv;
        for (size_t i = 0; i < n; ++i)
            if (i != c && a[i][c].n != 0) {
                Frac f = a[i][c];
                for (size_t k = 0; k < 2 * n; ++k) a[i][k] = a[i][k] - f * a[c][k];
            }
    }
    // a = [I | V^-1]; coefficient e = sum_i inv[e][i] * y_i where V[i][e] = x_i^e
    std::vector<std::vector<Frac>> inv(n, std::vector<Frac>(n));
    for (size_t e = 0; e < n; ++e)
        for (size_t i = 0; i < n; ++i) inv[e][i] = a[e][n + i];
    return inv;
}

// mixed-radix index of a grid point (dim 0 the slowest) from its per-dim positions
size_t grid_index(const std::vector<size_t>& pos, const std::vector<std::vector<int64_t>>& v) {
    size_t idx = 0;
    for (size_t j = 0; j < v.size(); ++j) idx = idx * v[j].size() + pos[j];
    return idx;
}

// ---- the recorded programs as numbers and the rest ----------------------------------------------

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A line of recorded code cut into its skeleton (the code with every number replaced by '#') and its numbers.
// String and character literals and // comments are not searched for numbers; a '-' directly after '(', ',' or
// '{' belongs to the number.
struct Cut {
    std::string skeleton;
    std::vector<std::string> numbers;
    bool comment_only = false;
};

Cut cut_line(const std::string& line, std::string* rewritten = nullptr,
             const std::function<std::string(size_t, const std::string&)>& replace = nullptr) {
    Cut c;
    size_t i = 0, n = line.size();
    auto out = [&](const std::string& s) {
        if (rewritten) *rewritten += s;
    };
    size_t first = line.find_first_not_of(' ');
    c.comment_only = first == std::string::npos || line.compare(first, 2, "//") == 0;
    while (i < n) {
        char ch = line[i];
        if (ch == '"' || ch == '\'') {  // a literal, escapes included
            size_t j = i + 1;
            while (j < n && line[j] != ch) j += line[j] == '\\' ? 2 : 1;
            j = std::min(n, j + 1);
            c.skeleton += line.substr(i, j - i);
            out(line.substr(i, j - i));
            i = j;
            continue;
        }
        if (ch == '/' && i + 1 < n && line[i + 1] == '/') {  // the rest is a comment: kept, not compared
            out(line.substr(i));
            break;
        }
        size_t last = c.skeleton.find_last_not_of(' ');
        char prev = last == std::string::npos ? '(' : c.skeleton[last];
        bool neg = ch == '-' && i + 1 < n && std::isdigit(static_cast<unsigned char>(line[i + 1])) &&
                   (prev == '(' || prev == ',' || prev == '{' || prev == '=');
        bool starts = std::isdigit(static_cast<unsigned char>(ch)) && (i == 0 || !ident_char(line[i - 1])) &&
                      (i == 0 || line[i - 1] != '.');
        if (neg || starts) {
            size_t j = i + (neg ? 1 : 0);
            if (line.compare(j, 2, "0x") == 0 || line.compare(j, 2, "0X") == 0) {
                j += 2;
                while (j < n && (std::isxdigit(static_cast<unsigned char>(line[j])) || line[j] == '.')) ++j;
                if (j < n && (line[j] == 'p' || line[j] == 'P')) {
                    ++j;
                    if (j < n && (line[j] == '+' || line[j] == '-')) ++j;
                    while (j < n && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
                }
            } else {
                while (j < n && (std::isdigit(static_cast<unsigned char>(line[j])) || line[j] == '.')) ++j;
                if (j < n && (line[j] == 'e' || line[j] == 'E')) {
                    ++j;
                    if (j < n && (line[j] == '+' || line[j] == '-')) ++j;
                    while (j < n && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
                }
            }
            while (j < n && std::strchr("uUlLfF", line[j])) ++j;
            std::string num = line.substr(i, j - i);
            out(replace ? replace(c.numbers.size(), num) : num);
            c.numbers.push_back(num);
            c.skeleton += '#';
            i = j;
            continue;
        }
        c.skeleton += ch;
        out(std::string(1, ch));
        ++i;
    }
    return c;
}

std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> r;
    std::stringstream ss(s);
    for (std::string l; std::getline(ss, l);) r.push_back(l);
    return r;
}

// An integer literal as the recorder writes it (fmt: 5, 5LL, 5u, 5ull), or false (a float)
bool int_literal(const std::string& t, int64_t& v, std::string& suffix) {
    size_t e = t.size();
    while (e > 0 && std::strchr("uUlL", t[e - 1])) --e;
    std::string digits = t.substr(0, e);
    if (digits.empty() || digits.find_first_of(".xXeEpP") != std::string::npos) return false;
    if (digits.find_first_not_of("-0123456789") != std::string::npos || digits.size() > 19) return false;
    v = std::stoll(digits);
    suffix = t.substr(e);
    return true;
}

std::string sanitize(const std::string& name) {
    std::string r = "dim_";
    for (char c : name) r += ident_char(c) ? c : '_';
    return r;
}

}  // namespace

namespace {

// The polynomial of degree m[j] - 1 in dim j through the grid's first m[j] values of each dim, if it gives y at
// every grid point; "" otherwise
std::string fit_with_degrees(const std::vector<std::vector<int64_t>>& vals, const std::vector<std::string>& names,
                             const std::vector<int64_t>& y, const std::vector<size_t>& m) {
    const size_t K = vals.size();
    // the coefficient tensor C[e_0..e_K-1] (e_j: the power of dim j)
    size_t total = 1;
    for (size_t j = 0; j < K; ++j) total *= m[j];
    std::vector<Frac> c(total);
    std::vector<size_t> pos(K);
    for (size_t t = 0; t < total; ++t) {  // the values at the nodes, in the nodes' own mixed radix
        size_t r = t;
        for (size_t j = K; j-- > 0;) pos[j] = r % m[j], r /= m[j];
        c[t] = Frac(y[grid_index(pos, vals)]);
    }
    size_t stride = total;
    for (size_t j = 0; j < K; ++j) {  // apply the inverse Vandermonde of dim j along its axis
        stride /= m[j];
        auto inv = vandermonde_inverse(std::vector<int64_t>(vals[j].begin(), vals[j].begin() + long(m[j])));
        std::vector<Frac> nc(total);
        for (size_t t = 0; t < total; ++t) {
            size_t e = (t / stride) % m[j], base = t - e * stride;
            Frac s = 0;
            for (size_t i = 0; i < m[j]; ++i) s = s + inv[e][i] * c[base + i * stride];
            nc[t] = s;
        }
        c = nc;
    }
    i128 den = 1;
    for (auto& f : c) den = den / gcd128(den, f.d) * f.d;
    if (den > 1024) return "";  // exact on the grid, but no size arithmetic of a lowering: a table says it plainly
    std::vector<i128> num(total);
    for (size_t t = 0; t < total; ++t) num[t] = c[t].n * (den / c[t].d);
    // every grid point, exactly, and every partial sum within int64 (the program computes in int64_t)
    const i128 lim = i128(1) << 62;
    size_t points = y.size();
    for (size_t p = 0; p < points; ++p) {
        size_t r = p;
        for (size_t j = K; j-- > 0;) pos[j] = r % vals[j].size(), r /= vals[j].size();
        i128 sum = 0;
        for (size_t t = 0; t < total; ++t) {
            if (num[t] == 0) continue;
            i128 term = num[t];
            size_t q = t;
            for (size_t j = K; j-- > 0;) {
                size_t e = q % m[j];
                q /= m[j];
                for (size_t k = 0; k < e; ++k) {
                    term *= vals[j][pos[j]];
                    if (term > lim || term < -lim) return "";
                }
            }
            sum += term;
            if (sum > lim || sum < -lim) return "";
        }
        if (sum % den != 0 || sum / den != i128(y[p])) return "";
    }
    // the expression: terms of higher degree first, the constant last
    std::vector<std::pair<int, std::string>> terms;
    for (size_t t = 0; t < total; ++t) {
        if (num[t] == 0) continue;
        std::string mono;
        int degree = 0;
        size_t q = t;
        std::vector<std::string> factors;
        for (size_t j = K; j-- > 0;) {
            size_t e = q % m[j];
            q /= m[j];
            for (size_t k = 0; k < e; ++k) factors.insert(factors.begin(), names[j]), ++degree;
        }
        for (auto& f : factors) mono += (mono.empty() ? "" : " * ") + f;
        i128 a = num[t] < 0 ? -num[t] : num[t];
        std::string term = mono.empty() ? i128_str(a) + "LL" : (a == 1 ? mono : i128_str(a) + "LL * " + mono);
        terms.push_back({degree, (num[t] < 0 ? "-" : "+") + term});
    }
    std::stable_sort(terms.begin(), terms.end(), [](auto& a, auto& b) { return a.first > b.first; });
    std::string e;
    for (auto& t : terms) {
        bool neg = t.second[0] == '-';
        std::string body = t.second.substr(1);
        e += e.empty() ? (neg ? "-" + body : body) : (neg ? " - " : " + ") + body;
    }
    if (e.empty()) e = "0LL";
    if (den != 1) e = (terms.size() > 1 ? "(" + e + ")" : e) + " / " + i128_str(den) + "LL";
    return e;
}

}  // namespace

std::string fit_expression(const std::vector<std::vector<int64_t>>& vals, const std::vector<std::string>& names,
                           const std::vector<int64_t>& y) {
    // the lowest degrees first (0, 1 or 2 per dim): the first polynomial that also predicts at least one grid point
    // it was not fitted through, gives every point exactly and divides by at most 1024 (the sizes of strided
    // convolutions and poolings: h / 32). Through every point of a small grid some polynomial always passes
    // (a ceil-rounded size through three heights: (-h * h + 240 * h - 8192) / 1536); it is exact there, but a
    // table says the same more plainly.
    const size_t K = vals.size();
    std::vector<std::vector<size_t>> tries;
    std::vector<size_t> deg(K, 0);
    for (;;) {
        tries.push_back(deg);
        size_t j = 0;
        while (j < K && ++deg[j] > 2) deg[j++] = 0;
        if (j == K) break;
    }
    std::stable_sort(tries.begin(), tries.end(), [](const std::vector<size_t>& a, const std::vector<size_t>& b) {
        return std::accumulate(a.begin(), a.end(), size_t(0)) < std::accumulate(b.begin(), b.end(), size_t(0));
    });
    std::set<std::vector<size_t>> seen;
    for (const auto& t : tries) {
        std::vector<size_t> m(K);
        size_t nodes = 1;
        for (size_t j = 0; j < K; ++j) m[j] = std::min(t[j] + 1, vals[j].size()), nodes *= m[j];
        if (nodes >= y.size() || !seen.insert(m).second) continue;
        std::string e = fit_with_degrees(vals, names, y, m);
        if (!e.empty()) return e;
    }
    return "";
}

EmitReport emit_dynamic_project(const Graph& loaded, const CompileOptions& copts, const std::vector<DynamicDim>& dims,
                                const std::string& outdir, const std::string& model_path,
                                const WeightRules& weight_rules, const GgufMeta& model_meta) {
    const std::string& path = loaded.path;
    // which input axes each dim names
    std::vector<std::vector<std::pair<int, size_t>>> axes(dims.size());  // (input value id, axis)
    for (size_t j = 0; j < dims.size(); ++j) {
        for (size_t i = 0; i < j; ++i)
            if (dims[i].name == dims[j].name) bad_input(path + ": --dim " + dims[j].name + " given twice");
        for (int id : loaded.inputs) {
            const Value& v = loaded.values[size_t(id)];
            for (size_t a = 0; a < v.dim_params.size(); ++a)
                if (v.dim_params[a] == dims[j].name) axes[j].push_back({id, a});
        }
        if (axes[j].empty()) {
            std::set<std::string> known;
            for (int id : loaded.inputs)
                for (auto& n : loaded.values[size_t(id)].dim_params)
                    if (!n.empty() && n != "?") known.insert(n);
            std::string k;
            for (auto& n : known) k += (k.empty() ? "" : ", ") + n;
            bad_input(path + ": --dim " + dims[j].name +
                      ": no graph input has a dim of that name (its symbolic dims: " + (k.empty() ? "none" : k) + ")");
        }
    }
    size_t points = 1;
    for (auto& d : dims) {
        points *= d.values.size();
        if (points > kMaxGridPoints)
            bad_input(path + ": --dim gives more than " + std::to_string(kMaxGridPoints) +
                      " combinations of values; each is one lowering of the model: give fewer values (a larger STEP)");
    }
    std::vector<std::vector<int64_t>> vals;
    std::vector<std::string> names, idents;
    for (auto& d : dims) {
        vals.push_back(d.values);
        names.push_back(d.name);
        std::string id = sanitize(d.name);
        while (std::find(idents.begin(), idents.end(), id) != idents.end()) id += "_";
        idents.push_back(id);
    }
    auto point_text = [&](size_t p) {
        std::string s;
        size_t r = p;
        std::vector<int64_t> v(dims.size());
        for (size_t j = dims.size(); j-- > 0;) v[j] = vals[j][r % vals[j].size()], r /= vals[j].size();
        for (size_t j = 0; j < dims.size(); ++j) s += (j ? ", " : "") + names[j] + "=" + std::to_string(v[j]);
        return s;
    };

    // one recording per grid point; points whose programs differ only in their numbers form a variant
    struct Point {
        std::vector<std::string> lines;              // the recorded code
        std::vector<size_t> code_lines;              // the lines that hold code (not comments only)
        std::string skeleton;                        // the code less its numbers and comments
        std::vector<std::vector<std::string>> nums;  // per code line: its numbers
    };
    std::vector<Point> pts(points);
    Recorded base;
    Graph base_graph;
    std::vector<size_t> variant_of(points);
    std::vector<std::string> blobs;             // the host kernels' records
    std::vector<std::vector<size_t>> variants;  // the points of each, in grid order
    for (size_t p = 0; p < points; ++p) {
        Graph g = loaded;
        CompileOptions c = copts;
        size_t r = p;
        std::vector<int64_t> here(dims.size());
        for (size_t j = dims.size(); j-- > 0;) here[j] = vals[j][r % vals[j].size()], r /= vals[j].size();
        for (int id : loaded.inputs) {
            const Value& v = loaded.values[size_t(id)];
            bool named = false;
            for (size_t j = 0; j < dims.size(); ++j)
                for (auto& ax : axes[j]) named |= ax.first == id;
            if (!named) continue;
            auto it = copts.input_shapes.find(v.name);
            Shape s = it != copts.input_shapes.end() ? it->second : v.shape;
            if (s.size() != v.shape.size())
                bad_input(path + ": --input-shape " + v.name + " has rank " + std::to_string(s.size()) + ", not " +
                          std::to_string(v.shape.size()));
            for (size_t j = 0; j < dims.size(); ++j)
                for (auto& ax : axes[j])
                    if (ax.first == id) s[ax.second] = here[j];
            c.input_shapes[v.name] = s;
        }
        specialize(g, c);
        optimize(g, c);
        validate(g);
        Recorded rec = record_program(g, weight_rules);
        Point& pt = pts[p];
        pt.lines = split_lines(rec.code);
        // host kernels: each distinct record of every combination once in model.gguf, the kernel numbers in the
        // code renumbered to them (a number that varies like any other: an LSTM's record holds its batch)
        std::vector<size_t> renumber;
        for (const std::string& blob : rec.blobs) {
            size_t at = size_t(std::find(blobs.begin(), blobs.end(), blob) - blobs.begin());
            if (at == blobs.size()) blobs.push_back(blob);
            renumber.push_back(at);
        }
        // (the builder's line "[[maybe_unused]] ggml_tensor * tN = o2g_host::kernel(ctx, K, ...": a value's name,
        // which may hold any text, is only ever in a ggml_set_name line's string)
        const std::string decl = "[[maybe_unused]] ggml_tensor * t", call = " = o2g_host::kernel(ctx, ";
        for (std::string& l : pt.lines) {
            size_t f = l.find_first_not_of(' '), q = l.find(call);
            if (f == std::string::npos || l.compare(f, decl.size(), decl) != 0 || q == std::string::npos) continue;
            size_t b = q + call.size(), e = l.find(',', b);
            std::string num = l.substr(b, e == std::string::npos ? 0 : e - b);
            if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string::npos ||
                std::stoul(num) >= renumber.size())
                internal_error("compile --dim: a host kernel call the recording does not hold: " + l);
            l.replace(b, e - b, std::to_string(renumber[std::stoul(num)]));
        }
        for (size_t k = 0; k < pt.lines.size(); ++k) {
            Cut cut = cut_line(pt.lines[k]);
            if (cut.comment_only) continue;
            pt.skeleton += cut.skeleton + "\n";
            pt.nums.push_back(cut.numbers);
            pt.code_lines.push_back(k);
        }
        size_t v = 0;
        while (v < variants.size() && pts[variants[v][0]].skeleton != pt.skeleton) ++v;
        if (v == variants.size()) {
            if (variants.size() == kMaxVariants)
                unsupported(path + ": compile --dim: the lowering makes more than " + std::to_string(kMaxVariants) +
                            " different ggml programs over these values (the latest at " + point_text(p) +
                            "): give fewer --dim values, or compile each shape; `run` takes any shape");
            variants.emplace_back();
        }
        variants[v].push_back(p);
        variant_of[p] = v;
        if (p == 0) {
            base = std::move(rec);
            base_graph = std::move(g);
            continue;
        }
        // what every variant shares: the weights (model.gguf), the index bounds
        auto differs = [&](const std::string& what) {
            unsupported(path + ": compile --dim: " + what + " differs between " + point_text(0) + " and " +
                        point_text(p) +
                        ": one program cannot hold both (compile each shape, or fewer --dim values; `run` takes any "
                        "shape)");
        };
        const auto& bw = base.bg->b->weights;
        const auto& w = rec.bg->b->weights;
        for (size_t i = 0; i < std::max(w.size(), bw.size()); ++i) {
            bool same = i < w.size() && i < bw.size() && w[i].onnx_name == bw[i].onnx_name &&
                        w[i].t->type == bw[i].t->type && w[i].transpose == bw[i].transpose &&
                        w[i].initializer == bw[i].initializer;
            for (int d = 0; same && d < 4; ++d) same = w[i].t->ne[d] == bw[i].t->ne[d];
            if (same && !w[i].initializer)  // a constant the passes made: its bytes must not depend on the dims
                same = w[i].host.dtype == bw[i].host.dtype && w[i].host.shape == bw[i].host.shape &&
                       w[i].host.nbytes() == bw[i].host.nbytes() &&
                       (w[i].host.nbytes() == 0 ||
                        std::memcmp(w[i].host.data(), bw[i].host.data(), w[i].host.nbytes()) == 0);
            if (!same)
                differs("weight w" + std::to_string(i) +
                        (i < bw.size() && !bw[i].onnx_name.empty() ? " ('" + bw[i].onnx_name + "')"
                                                                   : " (a constant folded from the shapes)"));
        }
        if (rec.bg->b->index_bound != base.bg->b->index_bound) differs("the index bound of an integer input");
        base.max_tensors = std::max(base.max_tensors, rec.max_tensors);
        base.graph_size = std::max(base.graph_size, rec.graph_size);
    }

    // per variant, each number that varies over its points: an expression of the dims where its points form a
    // grid of their own, else (or when none fits) a table over the whole grid
    size_t exprs = 0, tables = 0;
    std::string decl;
    for (size_t j = 0; j < dims.size(); ++j)
        decl += "    [[maybe_unused]] const int64_t " + idents[j] + " = d[" + std::to_string(j) + "];\n";
    std::string code;
    for (size_t v = 0; v < variants.size(); ++v) {
        const std::vector<size_t>& vp = variants[v];
        const Point& b0 = pts[vp[0]];
        // the variant's own grid: the values of each dim among its points, when its points are all their combinations
        std::vector<std::vector<int64_t>> sub(dims.size());
        for (size_t p : vp) {
            size_t r = p;
            for (size_t j = dims.size(); j-- > 0;) {
                int64_t x = vals[j][r % vals[j].size()];
                r /= vals[j].size();
                if (std::find(sub[j].begin(), sub[j].end(), x) == sub[j].end()) sub[j].push_back(x);
            }
        }
        size_t combos = 1;
        for (auto& sj : sub) std::sort(sj.begin(), sj.end()), combos *= sj.size();
        bool own_grid = combos == vp.size();  // (vp is in grid order, so also in the sub-grid's order)
        std::vector<std::string> out_lines = b0.lines;
        for (size_t ci = 0; ci < b0.code_lines.size(); ++ci) {
            size_t k = b0.code_lines[ci];
            std::string rewritten;
            cut_line(b0.lines[k], &rewritten, [&](size_t n, const std::string& text) -> std::string {
                bool varies = false;
                for (size_t p : vp) varies |= pts[p].nums[ci][n] != text;
                if (!varies) return text;
                int64_t x;
                std::string suffix;
                std::vector<int64_t> ys;
                bool ints = true;
                for (size_t i = 0; i < vp.size() && ints; ++i) {
                    std::string sfx;
                    ints = int_literal(pts[vp[i]].nums[ci][n], x, sfx) && sfx == (i ? suffix : (suffix = sfx));
                    ys.push_back(x);
                }
                const char* cast = suffix == "LL"    ? "int64_t"
                                   : suffix == "ull" ? "size_t"
                                   : suffix == "u"   ? "uint32_t"
                                                     : "int";
                if (ints && own_grid) {
                    std::string e = fit_expression(sub, idents, ys);
                    if (!e.empty()) {
                        ++exprs;
                        return suffix == "LL" && e.find(' ') == std::string::npos ? e
                                                                                  : std::string(cast) + "(" + e + ")";
                    }
                }
                ++tables;
                std::string t = ints ? std::string(cast) + "(o2g_pick(d, {" : "o2g_pickf(d, {";
                for (size_t p = 0; p < points; ++p) {  // (0 at the points of other variants: never read)
                    std::string item = variant_of[p] == v ? pts[p].nums[ci][n] : (ints ? "0" : "0.0f");
                    t += (p ? ", " : "") + item + (ints && (suffix.empty() || variant_of[p] != v) ? "LL" : "");
                }
                return t + (ints ? "}))" : "})");
            });
            out_lines[k] = rewritten;
        }
        if (variants.size() > 1)
            code += "// variant " + std::to_string(v) + " of " + std::to_string(variants.size()) + ": " +
                    std::to_string(vp.size()) + " of the combinations, the first " + point_text(vp[0]) + "\n";
        for (auto& l : out_lines) {
            std::string line = l;
            if (line == "@DIMS@") line = decl.empty() ? "    (void)d;" : decl.substr(0, decl.size() - 1);
            if (variants.size() > 1)  // the variants' own functions, called by model::build / output_shape below
                for (const char* fn : {"build", "output_shape"}) {
                    std::string from = std::string("void model::") + fn + "(";
                    if (line.rfind(from, 0) == 0)
                        line = std::string("static void ") + fn + "_v" + std::to_string(v) + "(" +
                               line.substr(from.size());
                }
            code += line + "\n";
        }
        code += "\n";
    }
    if (variants.size() > 1) {
        code +=
            "// the variant of each combination of the dims (o2g_point's order)\nstatic const unsigned char "
            "o2g_variant[] = {";
        for (size_t p = 0; p < points; ++p) code += (p ? ", " : "") + std::to_string(variant_of[p]);
        code +=
            "};\n\nvoid model::build(ggml_context * ctx, ggml_tensor ** w, ggml_tensor ** in, ggml_tensor ** out, "
            "const int64_t * d) {\n    switch (o2g_variant[o2g_point(d)]) {\n";
        for (size_t v = 0; v < variants.size(); ++v)
            code += "        case " + std::to_string(v) + ": return build_v" + std::to_string(v) +
                    "(ctx, w, in, out, d);\n";
        code +=
            "    }\n}\n\nvoid model::output_shape(int k, const int64_t * d, int64_t * s) {\n"
            "    switch (o2g_variant[o2g_point(d)]) {\n";
        for (size_t v = 0; v < variants.size(); ++v)
            code +=
                "        case " + std::to_string(v) + ": return output_shape_v" + std::to_string(v) + "(k, d, s);\n";
        code += "    }\n}\n";
    }

    ProgramDims pd;
    pd.names = names;
    pd.values = vals;
    for (int id : base_graph.inputs) {
        std::vector<int> sym(base_graph.values[size_t(id)].shape.size(), -1);
        for (size_t j = 0; j < dims.size(); ++j)
            for (auto& ax : axes[j])
                if (loaded.values[size_t(ax.first)].name == base_graph.values[size_t(id)].name) sym[ax.second] = int(j);
        pd.input_dims.push_back(sym);
    }
    pd.note = "// Dynamic dims (compile --dim): ";
    for (size_t j = 0; j < dims.size(); ++j) {
        pd.note += (j ? "; " : "") + names[j] + " (" + idents[j] + ") in {";
        for (size_t i = 0; i < vals[j].size(); ++i) pd.note += (i ? "," : "") + std::to_string(vals[j][i]);
        pd.note += "}";
    }
    pd.note += ".\n// " + std::to_string(exprs) + " numbers are expressions of them, " + std::to_string(tables) +
               " are tables over their combinations (o2g_pick); " + std::to_string(variants.size()) +
               (variants.size() > 1 ? " variants (the lowering differs between them)" : " program") +
               ";\n// the shapes in the comments are those at the first combination of each variant.\n";
    pd.helpers =
        "#include <initializer_list>\n\n"
        "// the index of the dims d among the combinations of their values (dims[0] the slowest)\n"
        "[[maybe_unused]] static size_t o2g_point(const int64_t * d) {\n"
        "    size_t p = 0;\n"
        "    for (int j = 0; j < model::n_dims; ++j) {\n"
        "        int i = 0;\n"
        "        while (i < model::dims[j].n_values && model::dims[j].values[i] != d[j]) ++i;\n"
        "        p = p * size_t(model::dims[j].n_values) + size_t(i);\n"
        "    }\n"
        "    return p;\n"
        "}\n"
        "[[maybe_unused]] static int64_t o2g_pick(const int64_t * d, std::initializer_list<int64_t> v) {\n"
        "    return v.begin()[o2g_point(d)];\n"
        "}\n"
        "[[maybe_unused]] static float o2g_pickf(const int64_t * d, std::initializer_list<float> v) {\n"
        "    return v.begin()[o2g_point(d)];\n"
        "}\n\n";
    base.blobs = blobs;
    return write_program(base_graph, base, code, pd, outdir, model_path, model_meta);
}

}  // namespace onnx2ggml::core
