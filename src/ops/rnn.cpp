// Recurrent operators: RNN, GRU and LSTM (both layouts, all directions, sequence_lens,
// initial states, peepholes, clip, the spec's activation functions). Computed by their host
// evaluators over the static sequence length: folded when constant, else host kernels
// (lower/host_kernel.h). The products x W^T and h R^T are float32 (the model's precision; PyTorch
// and ONNX Runtime compute them so too), vectorized: the input products of all time steps first, in
// blocks of rows that share each W row in cache, then the recurrence step by step. Gates, activations and states are
// double. At run time (X not constant) the shape rule moves the input products to the backend as one MatMul + Add
// (infer_rnn, attribute __gx), and a bidirectional node runs its two directions on two threads.
#include <algorithm>
#include <cmath>

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

// input i as doubles (its shape checked by rnn_dims), or n zeros when absent
std::vector<double> vals(OpCtx& c, int i, int64_t n) {
    return c.has(i) ? to_f64(c.cval(i)) : std::vector<double>(size_t(n), 0.0);
}

std::vector<float> fvals(OpCtx& c, int i) { return c.cval(i).cast(DType::F32).to_f32(); }

// sum a[i] * b[i], in float32 with 8 partial sums (vectorized)
float dot(const float* a, const float* b, int64_t n) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
    float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < n; ++i) r += a[i] * b[i];
    return r;
}

// y[r * m + j] = bias[j] + x[r] . w[j] for `rows` rows x[r] (stride ld) and m rows w[j] of n values: blocks
// of 32 rows go through every w row while it is in cache
void rows_times_wt(const float* x, int64_t ld, int64_t rows, const float* w, int64_t m, int64_t n, const double* bias,
                   double* y) {
    for (int64_t r0 = 0; r0 < rows; r0 += 32)
        for (int64_t j = 0; j < m; ++j)
            for (int64_t r = r0; r < std::min(rows, r0 + 32); ++r)
                y[r * m + j] = bias[j] + dot(x + r * ld, w + j * n, n);
}

void eval_rnn(OpCtx& c, Rnn::Kind kind) {
    Rnn r = rnn_dims(c, kind);
    int64_t H = r.hidden, G = r.gates, B = r.batch, I = r.in, S = r.seq;
    bool pre = gx_input(c);  // X holds the input products already
    std::vector<float> X = pre ? std::vector<float>() : fvals(c, 0), W = pre ? std::vector<float>() : fvals(c, 1),
                       R = fvals(c, 2);
    std::vector<double> Bias = vals(c, 3, r.dirs * 2 * G * H);
    std::vector<double> H0 = vals(c, 5, r.dirs * B * H), C0, P;  // initial_h; LSTM: initial_c, P
    if (kind == Rnn::Lstm) C0 = vals(c, 6, r.dirs * B * H), P = vals(c, 7, r.dirs * 3 * H);
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
    double clip = c.af("clip", 0);
    auto clamp = [&](double v) { return has_clip ? std::min(clip, std::max(-clip, v)) : v; };
    bool lbr = c.ai("linear_before_reset", 0) != 0;
    std::string dir = c.as("direction", "forward");

    std::vector<double> Y(size_t(S * r.dirs * B * H), 0.0), Yh(size_t(r.dirs * B * H)), Yc(size_t(r.dirs * B * H));
    // x W^T + Wb of every time step and batch (rows of X in its layout: t * B + b, or b * S + t)
    // (precomputed, __gx: both directions' in one row of dirs * G * H)
    std::vector<double> GXpre = pre ? to_f64(c.cval(0)) : std::vector<double>();
    int64_t gx_width = pre ? r.dirs * G * H : G * H;
    // one direction: its own buffers (a bidirectional node runs its two directions on two threads)
    auto run_direction = [&](int64_t d) {
        std::vector<double> GXd = pre ? std::vector<double>() : std::vector<double>(size_t(S * B * G * H));
        const double* GX = pre ? GXpre.data() + d * G * H : GXd.data();
        auto gx_row = [&](int64_t t, int64_t b) { return GX + (r.layout1 ? b * S + t : t * B + b) * gx_width; };
        std::vector<double> gh(size_t(G * H));
        std::vector<float> hf(static_cast<size_t>(H));
        bool reverse = dir == "reverse" || d == 1;
        const float* w = pre ? nullptr : W.data() + d * G * H * I;
        const float* rr = R.data() + d * G * H * H;
        const double* wb = Bias.data() + d * 2 * G * H;
        const double* rb = wb + G * H;
        const Act* a = acts.data() + d * nact;
        if (!pre) rows_times_wt(X.data(), I, S * B, w, G * H, I, wb, GXd.data());
        // h R^T + Rb for gate rows [j0, j1), h read as float32
        auto recur = [&](const std::vector<double>& h, int64_t j0, int64_t j1) {
            for (int64_t i = 0; i < H; ++i) hf[size_t(i)] = float(h[size_t(i)]);
            for (int64_t j = j0; j < j1; ++j) gh[size_t(j)] = rb[j] + dot(hf.data(), rr + j * H, H);
        };
        for (int64_t b = 0; b < B; ++b) {
            std::vector<double> h(H0.begin() + state(d, b), H0.begin() + state(d, b) + H), cs;
            if (kind == Rnn::Lstm) cs.assign(C0.begin() + state(d, b), C0.begin() + state(d, b) + H);
            int64_t len = lens[size_t(b)];
            for (int64_t step = 0; step < len; ++step) {
                int64_t t = reverse ? len - 1 - step : step;
                const double* gx = gx_row(t, b);
                // GRU without linear_before_reset: the h gate's product takes (r . h), after r
                bool gru_reset = kind == Rnn::Gru && !lbr;
                recur(h, 0, gru_reset ? 2 * H : G * H);
                if (gru_reset) {
                    std::vector<double> rh(static_cast<size_t>(H));
                    for (int64_t i = 0; i < H; ++i)
                        rh[size_t(i)] = a[0](clamp(gx[H + i] + gh[size_t(H + i)])) * h[size_t(i)];
                    recur(rh, 2 * H, 3 * H);
                }
                std::vector<double> hn(static_cast<size_t>(H), 0.0);
                for (int64_t k = 0; k < H; ++k) {
                    size_t k0 = size_t(k), k1 = size_t(H + k), k2 = size_t(2 * H + k), k3 = size_t(3 * H + k);
                    if (kind == Rnn::Simple) {
                        hn[k0] = a[0](clamp(gx[k0] + gh[k0]));
                    } else if (kind == Rnn::Gru) {  // gates z, r, h
                        double z = a[0](clamp(gx[k0] + gh[k0])), rg = a[0](clamp(gx[k1] + gh[k1]));
                        // linear_before_reset: r . (h R_h^T + Rb_h); else gh holds (r . h) R_h^T + Rb_h
                        double pre = lbr ? gx[k2] + rg * gh[k2] : gx[k2] + gh[k2];
                        double hh = a[1](clamp(pre));
                        hn[k0] = (1 - z) * hh + z * h[k0];
                    } else {  // LSTM gates i, o, f, c; peepholes P = [Pi, Po, Pf]
                        const double* p = P.data() + d * 3 * H;
                        double ig = a[0](clamp(gx[k0] + gh[k0] + p[k] * cs[k0]));
                        double fg = a[0](clamp(gx[k2] + gh[k2] + p[2 * H + k] * cs[k0]));
                        double cg = a[1](clamp(gx[k3] + gh[k3]));
                        double cn = fg * cs[k0] + ig * cg;
                        double og = a[0](clamp(gx[k1] + gh[k1] + p[H + k] * cn));
                        cs[k0] = cn;
                        hn[k0] = og * a[2](cn);
                    }
                }
                h = hn;
                for (int64_t k = 0; k < H; ++k)
                    Y[size_t(r.layout1 ? ((b * S + t) * r.dirs + d) * H + k : ((t * r.dirs + d) * B + b) * H + k)] =
                        h[size_t(k)];
            }
            for (int64_t k = 0; k < H; ++k) {
                size_t o = size_t(state(d, b) + k);
                Yh[o] = h[size_t(k)];
                if (kind == Rnn::Lstm) Yc[o] = cs[size_t(k)];
            }
        }
    };
    if (r.dirs == 2 && S * B * G * H * H > (int64_t(1) << 20))  // big enough to be worth a second thread
        host_parallel_for(2, run_direction);
    else
        for (int64_t d = 0; d < r.dirs; ++d) run_direction(d);
    auto put = [&](int i, const std::vector<double>& v) {
        if (!c.has_out(i)) return;
        Tensor t = Tensor::zeros(c.dtype(0), c.out(i).shape);
        for (size_t k = 0; k < v.size(); ++k) t.setf(int64_t(k), v[k]);
        c.set_const(i, t);
    };
    put(0, Y);
    put(1, Yh);
    if (kind == Rnn::Lstm) put(2, Yc);
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
