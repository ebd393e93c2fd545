// Recurrent operators: RNN, GRU and LSTM (both layouts, all directions, sequence_lens,
// initial states, peepholes, clip, the spec's activation functions). Computed by their host
// evaluators over the static sequence length: folded when constant, else host kernels
// (lower/host_kernel.h). At run time (X not constant) the shape rule moves the input products x W^T + Wb
// of every time step to the backend as one MatMul + Add (infer_rnn, attribute __gx); the host kernel runs
// the recurrence, a bidirectional node its two directions on two threads. Each step's h R^T reads R
// packed in blocks whose outputs stay in vector registers (PackedRows), and the gates' Sigmoid/Tanh are
// vectorized polynomials, both compiled for AVX-512, AVX2 and the baseline (target_clones). States and
// gates are float32 as in the model (PyTorch and ONNX Runtime compute them so), float64 for double models.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lower/host_kernel.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

struct Act {
    enum Kind {
        Sigmoid,
        Tanh,
        Relu,
        Affine,
        LeakyRelu,
        ThresholdedRelu,
        ScaledTanh,
        HardSigmoid,
        Elu,
        Softsign,
        Softplus
    };
    Kind kind = Sigmoid;  // resolved once from the name (the recurrence calls it for every gate of every step)
    double alpha = 0, beta = 0;
    // the kind of a spec activation name; false when unknown
    static bool parse(const std::string& name, Kind& k) {
        static const std::vector<std::string> names = {
            "Sigmoid",    "Tanh",        "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
            "ScaledTanh", "HardSigmoid", "Elu",  "Softsign", "Softplus"};
        auto it = std::find(names.begin(), names.end(), name);
        k = Kind(it - names.begin());
        return it != names.end();
    }
    double operator()(double x) const {
        switch (kind) {
            case Sigmoid: return 1 / (1 + std::exp(-x));
            case Tanh: return std::tanh(x);
            case Relu: return std::max(0.0, x);
            case Affine: return alpha * x + beta;
            case LeakyRelu: return x >= 0 ? x : alpha * x;
            case ThresholdedRelu: return x > alpha ? x : 0;
            case ScaledTanh: return alpha * std::tanh(beta * x);
            case HardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
            case Elu: return x >= 0 ? x : alpha * std::expm1(x);
            case Softsign: return x / (1 + std::fabs(x));
            default: return std::log1p(std::exp(x));  // Softplus
        }
    }
};

struct Rnn {
    enum Kind { Simple, Gru, Lstm } kind;
    int gates;  // 1, 3, 4
    int64_t seq, batch, in, hidden, dirs;
    bool layout1;
};

// The node's input 0 holds X W^T + Wb of every time step (both directions side by side: the last dim is
// dirs * gates * hidden) rather than X: infer_rnn's rewrite, attribute __gx
bool gx_input(const OpCtx& c) { return c.ai("__gx", 0) != 0; }

Rnn rnn_dims(OpCtx& c, Rnn::Kind kind) {
    Rnn r;
    r.kind = kind;
    r.gates = kind == Rnn::Simple ? 1 : kind == Rnn::Gru ? 3 : 4;
    r.layout1 = c.ai("layout", 0) != 0;
    const Shape& x = c.shape(0);
    if (x.size() != 3) c.fail("X must have rank 3, got " + shape_str(x));
    r.seq = r.layout1 ? x[1] : x[0];
    r.batch = r.layout1 ? x[0] : x[1];
    const Shape& w = c.shape(1);
    r.in = gx_input(c) && w.size() == 3 ? w[2] : x[2];
    std::string dir = c.as("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.fail("unknown direction '" + dir + "'");
    r.dirs = dir == "bidirectional" ? 2 : 1;
    r.hidden = c.ai("hidden_size", w.size() == 3 ? w[1] / r.gates : 0);
    if (gx_input(c) && x[2] != r.dirs * r.gates * r.hidden) internal_error("RNN input products of the wrong width");
    if (w != Shape{r.dirs, r.gates * r.hidden, r.in})
        c.fail("W has shape " + shape_str(w) + ", expected " + shape_str({r.dirs, r.gates * r.hidden, r.in}));
    if (c.shape(2) != Shape{r.dirs, r.gates * r.hidden, r.hidden}) c.fail("R has shape " + shape_str(c.shape(2)));
    if (c.has(3) && c.shape(3) != Shape{r.dirs, 2 * r.gates * r.hidden}) c.fail("B has shape " + shape_str(c.shape(3)));
    if (c.has(4) && c.shape(4) != Shape{r.batch})
        c.fail("sequence_lens has shape " + shape_str(c.shape(4)) + ", expected " + shape_str({r.batch}));
    Shape hs = r.layout1 ? Shape{r.batch, r.dirs, r.hidden} : Shape{r.dirs, r.batch, r.hidden};
    for (int i : kind == Rnn::Lstm ? std::vector<int>{5, 6} : std::vector<int>{5})  // initial_h, initial_c
        if (c.has(i) && c.shape(i) != hs)
            c.fail(std::string(i == 5 ? "initial_h" : "initial_c") + " has shape " + shape_str(c.shape(i)) +
                   ", expected " + shape_str(hs));
    if (kind == Rnn::Lstm && c.has(7) && c.shape(7) != Shape{r.dirs, 3 * r.hidden})
        c.fail("P has shape " + shape_str(c.shape(7)));
    if (c.ai("input_forget", 0) != 0) c.fail_unsupported("LSTM input_forget=1");
    return r;
}

void infer_rnn(OpCtx& c, Rnn::Kind kind) {
    Rnn r = rnn_dims(c, kind);
    if (!gx_input(c) && !c.is_const(0) && c.is_const(1) && c.dtype(0) == DType::F32) {
        // Computed at run time: the input products of every time step, for both directions, are one matrix
        // product on the backend (oneDNN / ggml, threaded: most of the work), X W^T + Wb; only the recurrence
        // stays on the host (this node again, reading them: __gx)
        int64_t N = r.dirs * r.gates * r.hidden;
        Tensor wt = c.cval(1).cast(DType::F32).reshaped({N, r.in}).transposed_last2();
        Tensor wb = Tensor::zeros(DType::F32, {N});
        if (c.has(3)) {
            std::vector<double> b = to_f64(c.cval(3));  // [dirs, 2 * G * H]: Wb then Rb per direction
            for (int64_t d = 0; d < r.dirs; ++d)
                for (int64_t j = 0; j < r.gates * r.hidden; ++j)
                    wb.setf(d * r.gates * r.hidden + j, b[size_t(d * 2 * r.gates * r.hidden + j)]);
        }
        Graph& g = c.graph();
        int xw = g.new_value(c.node().name + "_xw"), gx = g.new_value(c.node().name + "_gx");
        Node rec = c.node();
        rec.inputs[0] = gx;
        rec.attrs["__gx"] = int_attr(1);
        c.replace_with({c.make_node("MatMul", {c.node().inputs[0], c.new_const(wt, c.in(1).name + ".t")}, {xw}),
                        c.make_node("Add", {xw, c.new_const(wb, c.node().name + "_wb")}, {gx}), rec});
        return;
    }
    DType t = c.dtype(0);
    c.set_out(0, t, r.layout1 ? Shape{r.batch, r.seq, r.dirs, r.hidden} : Shape{r.seq, r.dirs, r.batch, r.hidden});
    Shape hs = r.layout1 ? Shape{r.batch, r.dirs, r.hidden} : Shape{r.dirs, r.batch, r.hidden};
    c.set_out(1, t, hs);
    if (kind == Rnn::Lstm) c.set_out(2, t, hs);
}

std::vector<float> fvals(OpCtx& c, int i) { return c.cval(i).cast(DType::F32).to_f32(); }

// ---- the recurrence's kernels ------------------------------------------------------------------
// Compiled for AVX-512, AVX2+FMA and the baseline, picked at load time (target_clones): the binary
// stays portable and the host kernel runs at the machine's vector width. GCC's vector extensions
// give the partial sums (a float reduction is not reassociated otherwise). Not under ThreadSanitizer: the
// loader runs the clones' resolver before TSan's runtime is up, and the instrumented resolver crashes.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define O2G_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define O2G_VECTOR_CLONES
#endif
using v16 = float __attribute__((vector_size(64)));

// Rows [j0, j1) of R (or W) packed for h R^T (x W^T): blocks of up to 128 rows, each block stored transposed
// ([H][width], contiguous), so a block's outputs stay in vector registers while the block streams by in order
struct PackedRows {
    int64_t rows = 0, n = 0;
    std::vector<float> data;
    PackedRows(const float* r, int64_t j0, int64_t j1, int64_t n_) : rows(j1 - j0), n(n_), data(size_t(rows * n_)) {
        for (int64_t b0 = 0; b0 < rows; b0 += 128) {
            int64_t w = std::min<int64_t>(128, rows - b0);
            float* blk = data.data() + b0 * n;
            for (int64_t jj = 0; jj < w; ++jj) {
                const float* src = r + (j0 + b0 + jj) * n;
                for (int64_t i = 0; i < n; ++i) blk[i * w + jj] = src[i];
            }
        }
    }
};

// y[j] = bias[j] + sum_i x[i] * R[j][i] for the packed rows: 128 outputs at a time in 8 vector
// accumulators (no horizontal sums), the block read in order (prefetched: the addresses past its end that
// this fetches are never loaded, and a prefetch does not fault)
O2G_VECTOR_CLONES void packed_matvec(const float* p, int64_t rows, int64_t n, const float* x, const float* bias,
                                     float* y) {
    int64_t b0 = 0;
    for (; b0 + 128 <= rows; b0 += 128) {
        const float* blk = p + b0 * n;
        v16 acc[8];
        for (int k = 0; k < 8; ++k) std::memcpy(&acc[k], bias + b0 + 16 * k, 64);
        for (int64_t i = 0; i < n; ++i) {
            // the block streams from L2 (R: 1 MB for 256 wide); fetching 8 rows (4 KB) ahead of the loads took a
            // 1024 x 256 product from 18.4 to 15.6 us here (farther or nearer was slower)
            for (int k = 0; k < 8; ++k) __builtin_prefetch(blk + (i + 8) * 128 + 16 * k);
            v16 xi = {};
            xi += x[i];
            for (int k = 0; k < 8; ++k) {
                v16 w;
                std::memcpy(&w, blk + i * 128 + 16 * k, 64);
                acc[k] += xi * w;
            }
        }
        for (int k = 0; k < 8; ++k) std::memcpy(y + b0 + 16 * k, &acc[k], 64);
    }
    if (b0 == rows) return;
    int64_t w = rows - b0;
    const float* blk = p + b0 * n;
    for (int64_t j = 0; j < w; ++j) y[b0 + j] = bias[b0 + j];
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < w; ++j) y[b0 + j] += x[i] * blk[i * w + j];
}

// e^x for x in [-87, 88] (clamped: 0 below, a large finite value above), within 2 ulp: e^x = 2^k e^r,
// |r| <= ln2 / 2, e^r by Cephes' expf polynomial; written so the loops below vectorize
inline float exp_poly(float x) {
    x = std::min(88.0f, std::max(-87.0f, x));
    float k = std::nearbyint(x * 1.44269504088896341f);
    float r = x - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = (int32_t(k) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, 4);
    return p * scale;
}
O2G_VECTOR_CLONES void sigmoid_rows(float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / (1.0f + exp_poly(-v[i]));
}
// tanh: 1 - 2 / (e^2|x| + 1) with x's sign; near 0 (|x| < 0.2, where that subtracts nearly equal
// values) its odd Taylor polynomial to x^9 (the next term is below 2e-10)
O2G_VECTOR_CLONES void tanh_rows(float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float x = v[i], a = std::fabs(x), x2 = x * x;
        float t = 1.0f - 2.0f / (exp_poly(2.0f * a) + 1.0f);
        float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835)))));
        v[i] = a < 0.2f ? small : std::copysign(t, x);
    }
}

// f(v[i]) for n values: the vectorized kernels for Sigmoid and Tanh in float32, the spec's formula otherwise
template <class T>
void apply(const Act& f, T* v, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
        if (f.kind == Act::Sigmoid) return sigmoid_rows(v, n);
        if (f.kind == Act::Tanh) return tanh_rows(v, n);
    }
    for (int64_t i = 0; i < n; ++i) v[i] = T(f(double(v[i])));
}

// input i (its shape checked by rnn_dims) in T, or n zeros when absent
template <class T>
std::vector<T> vals(OpCtx& c, int i, int64_t n) {
    std::vector<T> r(size_t(n), T(0));
    if (c.has(i)) {
        const Tensor& t = c.cval(i);
        for (int64_t k = 0; k < n; ++k) r[size_t(k)] = T(t.getf(k));
    }
    return r;
}

// The recurrence in T: float32 as the model (PyTorch and ONNX Runtime compute it so), float64 for double
// models and compare's float64 reference. The products are float32 either way (packed_matvec).
template <class T>
void eval_rnn_as(OpCtx& c, Rnn::Kind kind) {
    Rnn r = rnn_dims(c, kind);
    int64_t H = r.hidden, G = r.gates, B = r.batch, I = r.in, S = r.seq;
    bool pre = gx_input(c);  // X holds the input products already
    std::vector<float> X = pre ? std::vector<float>() : fvals(c, 0), W = pre ? std::vector<float>() : fvals(c, 1),
                       Bias = vals<float>(c, 3, r.dirs * 2 * G * H);
    // float32 inputs read in place (the input products: 2 MB for 200 steps of a 256-wide LSTM)
    auto floats = [&](int i, Tensor& held) {
        const Tensor& t = c.cval(i);
        if (t.dtype == DType::F32) return t.ptr<float>();
        held = t.cast(DType::F32);
        return static_cast<const float*>(held.ptr<float>());
    };
    Tensor r_held, x_held;
    const float* R = floats(2, r_held);
    // R's gate rows [j0, j1) of direction d packed for packed_matvec: kept with R's bytes across runs when R is
    // read in place (a host kernel runs with the same constant R every time: packing 1 MB per direction took
    // a tenth of a 256-wide LSTM's time), else made for this run
    auto packed_r = [&](int64_t d, int64_t j0, int64_t j1) -> std::shared_ptr<const PackedRows> {
        auto make = [&] { return std::make_shared<const PackedRows>(R + d * G * H * H, j0, j1, H); };
        if (r_held.buf) return make();
        std::string key = "rnn.packed_r:" + std::to_string(G) + ":" + std::to_string(H) + ":" + std::to_string(d) +
                          ":" + std::to_string(j0) + ":" + std::to_string(j1);
        return std::static_pointer_cast<const PackedRows>(c.cval(2).buf->derived(key, make));
    };
    std::vector<T> H0 = vals<T>(c, 5, r.dirs * B * H), C0, P;  // initial_h; LSTM: initial_c, P
    if (kind == Rnn::Lstm) C0 = vals<T>(c, 6, r.dirs * B * H), P = vals<T>(c, 7, r.dirs * 3 * H);
    // where a direction's and batch's state starts in initial_h / initial_c, Y_h / Y_c (layout 1: batch first)
    auto state = [&](int64_t d, int64_t b) { return (r.layout1 ? b * r.dirs + d : d * B + b) * H; };
    std::vector<int64_t> lens(size_t(B), S);
    if (c.has(4)) {
        auto l = c.cints(4);
        for (int64_t b = 0; b < B; ++b) {
            if (l[size_t(b)] < 0 || l[size_t(b)] > S)
                c.fail("sequence_lens value " + std::to_string(l[size_t(b)]) + " is out of range");
            lens[size_t(b)] = l[size_t(b)];
        }
    }
    // activations per direction: RNN f; GRU f, g; LSTM f, g, h
    int nact = kind == Rnn::Simple ? 1 : kind == Rnn::Gru ? 2 : 3;
    std::vector<std::string> names =
        c.has_attr("activations") ? c.node().attrs.at("activations").strings : std::vector<std::string>{};
    std::vector<float> alpha = c.afs("activation_alpha"), beta = c.afs("activation_beta");
    std::vector<Act> acts;
    size_t ai = 0, bi = 0;
    for (int64_t k = 0; k < r.dirs * nact; ++k) {
        Act a;
        std::string name = size_t(k) < names.size()               ? names[size_t(k)]
                           : kind == Rnn::Simple || k % nact != 0 ? "Tanh"
                                                                  : "Sigmoid";
        if (!Act::parse(name, a.kind)) c.fail_unsupported("activation '" + name + "'");
        bool uses_a = a.kind == Act::Affine || a.kind == Act::LeakyRelu || a.kind == Act::ThresholdedRelu ||
                      a.kind == Act::ScaledTanh || a.kind == Act::HardSigmoid || a.kind == Act::Elu;
        bool uses_b = a.kind == Act::Affine || a.kind == Act::ScaledTanh || a.kind == Act::HardSigmoid;
        a.alpha = a.kind == Act::LeakyRelu ? 0.01 : a.kind == Act::HardSigmoid ? 0.2 : 1.0;
        a.beta = a.kind == Act::HardSigmoid ? 0.5 : 0.0;
        if (uses_a && ai < alpha.size()) a.alpha = alpha[ai++];
        if (uses_b && bi < beta.size()) a.beta = beta[bi++];
        acts.push_back(a);
    }
    bool has_clip = c.has_attr("clip");
    T clip = T(c.af("clip", 0));
    auto clamp = [&](T v) { return has_clip ? std::min(clip, std::max(-clip, v)) : v; };
    bool lbr = c.ai("linear_before_reset", 0) != 0;
    std::string dir = c.as("direction", "forward");

    Shape hs = r.layout1 ? Shape{B, r.dirs, H} : Shape{r.dirs, B, H};
    Tensor Y = Tensor::zeros(c.dtype(0), r.layout1 ? Shape{B, S, r.dirs, H} : Shape{S, r.dirs, B, H}),
           Yh = Tensor::zeros(c.dtype(0), hs), Yc = Tensor::zeros(c.dtype(0), kind == Rnn::Lstm ? hs : Shape{0});
    auto put = [H](Tensor& t, int64_t at, const std::vector<T>& v) {  // H values from index `at`
        if (t.dtype == DType::F32) std::copy(v.begin(), v.begin() + H, t.ptr<float>() + at);
        else
            for (int64_t k = 0; k < H; ++k) t.setf(at + k, double(v[size_t(k)]));
    };
    // x W^T + Wb of every time step and batch (rows of X in its layout: t * B + b, or b * S + t)
    // (precomputed, __gx: both directions' in one row of dirs * G * H)
    const float* GXpre = pre ? floats(0, x_held) : nullptr;
    int64_t gx_width = pre ? r.dirs * G * H : G * H;
    // one direction: its own buffers (a bidirectional node runs its two directions on two threads)
    auto run_direction = [&](int64_t d) {
        std::vector<float> GXd = pre ? std::vector<float>() : std::vector<float>(size_t(S * B * G * H));
        const float* GX = pre ? GXpre + d * G * H : GXd.data();
        auto gx_row = [&](int64_t t, int64_t b) { return GX + (r.layout1 ? b * S + t : t * B + b) * gx_width; };
        bool reverse = dir == "reverse" || d == 1;
        // R's gate rows packed (GRU without linear_before_reset: the h gate's apart, it is multiplied later)
        bool gru_reset = kind == Rnn::Gru && !lbr;
        auto ra_held = packed_r(d, 0, gru_reset ? 2 * H : G * H),
             rh_held = packed_r(d, gru_reset ? 2 * H : G * H, G * H);
        const PackedRows &ra = *ra_held, &rh = *rh_held;
        const float* wb = Bias.data() + d * 2 * G * H;
        const float* rb = wb + G * H;
        const Act* a = acts.data() + d * nact;
        if (!pre) {  // (a constant X: folded at specialization)
            PackedRows pw(W.data() + d * G * H * I, 0, G * H, I);
            for (int64_t row = 0; row < S * B; ++row)
                packed_matvec(pw.data.data(), G * H, I, X.data() + row * I, wb, GXd.data() + row * G * H);
        }
        std::vector<float> gh(static_cast<size_t>(G * H)), hf(static_cast<size_t>(H));
        // gate values, one row of H each: the pre-activations, then the activations in place
        const size_t hn = static_cast<size_t>(H);
        std::vector<T> g0(hn), g1(hn), g2(hn), g3(hn);
        // h R^T + Rb for gate rows [j0, j1), h read as float32
        auto recur = [&](const std::vector<T>& h, const PackedRows& p, int64_t j0) {
            for (int64_t i = 0; i < H; ++i) hf[size_t(i)] = float(h[size_t(i)]);
            packed_matvec(p.data.data(), p.rows, H, hf.data(), rb + j0, gh.data() + j0);
        };
        for (int64_t b = 0; b < B; ++b) {
            std::vector<T> h(H0.begin() + state(d, b), H0.begin() + state(d, b) + H), cs;
            if (kind == Rnn::Lstm) cs.assign(C0.begin() + state(d, b), C0.begin() + state(d, b) + H);
            int64_t len = lens[size_t(b)];
            for (int64_t step = 0; step < len; ++step) {
                int64_t t = reverse ? len - 1 - step : step;
                const float* gx = gx_row(t, b);
                recur(h, ra, 0);
                auto pre_act = [&](std::vector<T>& g, int64_t gate, const T* peep = nullptr, const T* st = nullptr) {
                    for (int64_t k = 0; k < H; ++k)
                        g[size_t(k)] =
                            clamp(T(gx[gate * H + k]) + T(gh[size_t(gate * H + k)]) + (peep ? peep[k] * st[k] : T(0)));
                };
                if (kind == Rnn::Simple) {
                    pre_act(g0, 0);
                    apply(a[0], g0.data(), H);
                    h = g0;
                } else if (kind == Rnn::Gru) {  // gates z, r, h
                    pre_act(g0, 0), pre_act(g1, 1);
                    apply(a[0], g0.data(), H), apply(a[0], g1.data(), H);
                    if (gru_reset) {
                        for (int64_t k = 0; k < H; ++k) g3[size_t(k)] = g1[size_t(k)] * h[size_t(k)];
                        recur(g3, rh, 2 * H);  // the h gate's product takes (r . h), after r
                    }
                    // linear_before_reset: r . (h R_h^T + Rb_h); else gh holds (r . h) R_h^T + Rb_h
                    for (int64_t k = 0; k < H; ++k) {
                        T ghh = T(gh[size_t(2 * H + k)]);
                        g2[size_t(k)] = clamp(T(gx[2 * H + k]) + (lbr ? g1[size_t(k)] * ghh : ghh));
                    }
                    apply(a[1], g2.data(), H);
                    for (int64_t k = 0; k < H; ++k)
                        h[size_t(k)] = (1 - g0[size_t(k)]) * g2[size_t(k)] + g0[size_t(k)] * h[size_t(k)];
                } else {  // LSTM gates i, o, f, c; peepholes P = [Pi, Po, Pf]
                    const T* p = P.data() + d * 3 * H;
                    pre_act(g0, 0, p, cs.data()), pre_act(g2, 2, p + 2 * H, cs.data()), pre_act(g3, 3);
                    apply(a[0], g0.data(), H), apply(a[0], g2.data(), H), apply(a[1], g3.data(), H);
                    for (int64_t k = 0; k < H; ++k)
                        cs[size_t(k)] = g2[size_t(k)] * cs[size_t(k)] + g0[size_t(k)] * g3[size_t(k)];
                    pre_act(g1, 1, p + H, cs.data());
                    apply(a[0], g1.data(), H);
                    for (int64_t k = 0; k < H; ++k) h[size_t(k)] = cs[size_t(k)];
                    apply(a[2], h.data(), H);
                    for (int64_t k = 0; k < H; ++k) h[size_t(k)] *= g1[size_t(k)];
                }
                int64_t o = r.layout1 ? ((b * S + t) * r.dirs + d) * H : ((t * r.dirs + d) * B + b) * H;
                put(Y, o, h);
            }
            put(Yh, state(d, b), h);
            if (kind == Rnn::Lstm) put(Yc, state(d, b), cs);
        }
    };
    if (r.dirs == 2 && S * B * G * H * H > (int64_t(1) << 20))  // big enough to be worth a second thread
        host_parallel_for(2, run_direction);
    else
        for (int64_t d = 0; d < r.dirs; ++d) run_direction(d);
    for (int i = 0; i < (kind == Rnn::Lstm ? 3 : 2); ++i)
        if (c.has_out(i)) c.set_const(i, std::move(i == 0 ? Y : i == 1 ? Yh : Yc));
}

void eval_rnn(OpCtx& c, Rnn::Kind kind) {
    if (c.dtype(0) == DType::F64) eval_rnn_as<double>(c, kind);
    else eval_rnn_as<float>(c, kind);
}

}  // namespace

O2G_OP_FAMILY(rnn) {
    for (auto [op, kind] :
         {std::pair<const char*, Rnn::Kind>{"RNN", Rnn::Simple}, {"GRU", Rnn::Gru}, {"LSTM", Rnn::Lstm}}) {
        OpDef d;
        d.op_type = op;
        d.min_inputs = 3;
        Rnn::Kind k = kind;
        d.infer = [k](OpCtx& c) { infer_rnn(c, k); };
        d.eval = [k](OpCtx& c) { eval_rnn(c, k); };
        d.work = [k](OpCtx& c) {
            Rnn r = rnn_dims(c, k);
            return double(r.dirs * r.batch * r.seq * r.gates) * double(r.hidden) * double(r.in + r.hidden) *
                   (k == Rnn::Gru ? double(r.hidden) : 1.0);
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
