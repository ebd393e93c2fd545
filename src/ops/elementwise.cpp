// Elementwise operators: unary math and activations, broadcasting binary arithmetic,
// variadic Sum/Mean/Max/Min, comparisons and logic, Where, PRelu, Clip, Cast.
#include <cmath>
#include <set>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;
using UnaryLower = std::function<ggml_tensor*(Lc&, ggml_tensor*)>;

// elu with a general alpha: relu(x) + alpha * elu(min(x, 0)), with ggml_elu(y) = exp(y)-1 for y <= 0
ggml_tensor* elu_alpha(Lc& c, ggml_tensor* x, float alpha) {
    if (alpha == 1.0f) return G(c.b, ggml_elu, x);
    ggml_tensor* neg = G(c.b, ggml_neg, G(c.b, ggml_relu, G(c.b, ggml_neg, x)));
    return G(c.b, ggml_add, G(c.b, ggml_relu, x), G(c.b, ggml_scale, G(c.b, ggml_elu, neg), alpha));
}

void unary(Registry& r, const std::string& op, std::function<double(OpCtx&, double)> f, UnaryLower low,
           std::function<int64_t(int64_t)> fi = nullptr) {
    OpDef d;
    d.op_type = op;
    d.infer = infer_same;
    d.eval = [f, fi](OpCtx& c) {
        IntFn ifn = nullptr;
        if (fi) ifn = [fi](const int64_t* v) { return fi(v[0]); };
        c.set_const(0, eval_elementwise(
                           c, c.dtype(0), [&](const double* v) { return f(c, v[0]); }, ifn));
    };
    // ggml's own unary kernels read strided rows (ggml_is_contiguous_rows), e.g. the gate half of
    // GEGLU's chunk; onnx2ggml's custom CPU kernels need dense tensors
    static const std::set<std::string> strided_ok = {"Relu", "Sigmoid", "Tanh", "Gelu", "o2g.Silu"};
    bool rows_ok = strided_ok.count(op) > 0;
    if (low)
        d.lower = [low, rows_ok](Lc& c) {
            require_float(c, 0);
            ggml_tensor* x = c.x(0);
            c.set(0, low(c, rows_ok && x->nb[0] == ggml_type_size(x->type) ? x : c.cont(x)));
        };
    r.add(std::move(d));
}

double erf_d(double x) { return std::erf(x); }

// An activation whose input is a convolution's output (its bias add is in place on it), or a channel
// product's (a BatchNormalization's scale and shift), read by nothing else overwrites that output: the
// oneDNN backend then runs it as the convolution's post-op (in the product's pass), and every other
// backend computes the same values in place.
ggml_tensor* activation_in_place(Lc& c, ggml_tensor* x, const std::function<ggml_tensor*(bool)>& op) {
    ggml_tensor* conv = nullptr;
    if (c.sole_reader(0) && x == c.x(0)) conv = c.conv_behind(0) ? c.conv_behind(0) : c.product_behind(0);
    if (conv) c.overwrote(conv);
    return op(conv != nullptr);
}

// Add(conv, r) where the convolution's output (after its in-place bias) is read by this Add
// alone and r has its shape: the sum is written in place on the convolution's output and
// o2g::conv_residual makes r an input of the convolution (computed before it), so the oneDNN
// backend runs convolution + bias + residual (+ the ReLU/Clip that follows, in place too) as one
// primitive with a sum post-op; every other backend computes the same in place. nullptr otherwise.
ggml_tensor* residual_add(Lc& c) {
    if (c.graph_output(0) || c.shape(0) != c.shape(1) || c.dtype(1) != DType::F32) return nullptr;
    for (int i = 0; i < 2; ++i) {
        ggml_tensor* y = c.x(i);
        ggml_tensor* conv = c.sole_reader(i) ? c.conv_behind(i) : nullptr;
        // the convolution's output or its bias add (the order conv, bias, sum, activation)
        if (!conv || conv->src[2] || !(y == conv || (y->op == GGML_OP_ADD && y->src[0] == conv))) continue;
        ggml_tensor* r = c.cont(c.x(1 - i));
        if (!ggml_are_same_shape(r, y) || r->type != GGML_TYPE_F32) continue;
        ggml_tensor* sum = G(c.b, o2g::conv_residual, G(c.b, ggml_add_inplace, y, r));
        c.overwrote(conv);
        if (r == c.x(1 - i)) c.reads_private(1 - i, sum);
        return sum;
    }
    return nullptr;
}

void register_unary(Registry& r) {
    unary(
        r, "Relu", [](OpCtx&, double x) { return x > 0 ? x : 0.0; },
        [](Lc& c, ggml_tensor* x) {
            return activation_in_place(
                c, x, [&](bool in_place) { return in_place ? G(c.b, ggml_relu_inplace, x) : G(c.b, ggml_relu, x); });
        },
        [](int64_t x) { return x > 0 ? x : 0; });
    unary(
        r, "LeakyRelu", [](OpCtx& c, double x) { return x >= 0 ? x : x * c.af("alpha", 0.01f); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_leaky_relu, x, c.af("alpha", 0.01f), false); });
    unary(
        r, "Elu", [](OpCtx& c, double x) { return x >= 0 ? x : c.af("alpha", 1.0f) * std::expm1(x); },
        [](Lc& c, ggml_tensor* x) { return elu_alpha(c, x, c.af("alpha", 1.0f)); });
    unary(
        r, "Selu",
        [](OpCtx& c, double x) {
            double a = c.af("alpha", 1.67326319217681884765625f), g = c.af("gamma", 1.05070102214813232421875f);
            return x > 0 ? g * x : g * a * std::expm1(x);
        },
        [](Lc& c, ggml_tensor* x) {
            return G(c.b, ggml_scale, elu_alpha(c, x, c.af("alpha", 1.67326319217681884765625f)),
                     c.af("gamma", 1.05070102214813232421875f));
        });
    unary(
        r, "Sigmoid", [](OpCtx&, double x) { return 1.0 / (1.0 + std::exp(-x)); },
        [](Lc& c, ggml_tensor* x) {
            return activation_in_place(c, x, [&](bool in_place) {
                return in_place ? G(c.b, ggml_sigmoid_inplace, x) : G(c.b, ggml_sigmoid, x);
            });
        });
    unary(
        r, "HardSigmoid",
        [](OpCtx& c, double x) {
            return std::max(0.0, std::min(1.0, double(c.af("alpha", 0.2f)) * x + c.af("beta", 0.5f)));
        },
        [](Lc& c, ggml_tensor* x) {
            return G(c.b, ggml_clamp, G(c.b, ggml_scale_bias, x, c.af("alpha", 0.2f), c.af("beta", 0.5f)), 0.0f, 1.0f);
        });
    unary(
        r, "HardSwish", [](OpCtx&, double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); },
        [](Lc& c, ggml_tensor* x) {
            return activation_in_place(c, x, [&](bool in_place) {
                return in_place ? G(c.b, ggml_unary_inplace, x, GGML_UNARY_OP_HARDSWISH) : G(c.b, ggml_hardswish, x);
            });
        });
    unary(
        r, "Tanh", [](OpCtx&, double x) { return std::tanh(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_tanh, x); });
    unary(
        r, "Softplus", [](OpCtx&, double x) { return std::log1p(std::exp(x)); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_softplus, x); });
    auto custom1 = [](ggml_custom1_op_t k) {
        return [k](Lc& c, ggml_tensor* x) { return G(c.b, ggml_map_custom1, x, k, GGML_N_TASKS_MAX, nullptr); };
    };
    unary(
        r, "Erf", [](OpCtx&, double x) { return erf_d(x); }, custom1(o2g::erf));
    unary(
        r, "Sqrt", [](OpCtx&, double x) { return std::sqrt(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_sqrt, x); });
    unary(
        r, "Exp", [](OpCtx&, double x) { return std::exp(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_exp, x); });
    unary(
        r, "Log", [](OpCtx&, double x) { return std::log(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_log, x); });
    unary(
        r, "Neg", [](OpCtx&, double x) { return -x; }, [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_neg, x); },
        [](int64_t x) { return -x; });
    unary(
        r, "Abs", [](OpCtx&, double x) { return std::fabs(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_abs, x); }, [](int64_t x) { return x < 0 ? -x : x; });
    unary(
        r, "Reciprocal", [](OpCtx&, double x) { return 1.0 / x; },
        [](Lc& c, ggml_tensor* x) {
            ggml_tensor* one = c.repeat_to(c.scalar(1.0f), {x->ne[0], x->ne[1], x->ne[2], x->ne[3]});
            return G(c.b, ggml_div, one, x);
        });
    unary(
        r, "Floor", [](OpCtx&, double x) { return std::floor(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_floor, x); });
    unary(
        r, "Ceil", [](OpCtx&, double x) { return std::ceil(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_ceil, x); });
    unary(
        r, "Sin", [](OpCtx&, double x) { return std::sin(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_sin, x); });
    unary(
        r, "Cos", [](OpCtx&, double x) { return std::cos(x); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_cos, x); });
    unary(
        r, "Sign", [](OpCtx&, double x) { return double((x > 0) - (x < 0)); }, custom1(o2g::sign),
        [](int64_t x) { return int64_t((x > 0) - (x < 0)); });
    unary(
        r, "Round", [](OpCtx&, double x) { return std::nearbyint(x); }, custom1(o2g::round_even));  // half to even
    unary(
        r, "Softsign", [](OpCtx&, double x) { return x / (1 + std::fabs(x)); }, custom1(o2g::softsign));
    struct Trig {
        const char* op;
        double (*f)(double);
        ggml_custom1_op_t k;
    };
    for (const Trig& t :
         {Trig{"Tan", std::tan, o2g::tan}, Trig{"Asin", std::asin, o2g::asin}, Trig{"Acos", std::acos, o2g::acos},
          Trig{"Atan", std::atan, o2g::atan}, Trig{"Sinh", std::sinh, o2g::sinh}, Trig{"Cosh", std::cosh, o2g::cosh},
          Trig{"Asinh", std::asinh, o2g::asinh}, Trig{"Acosh", std::acosh, o2g::acosh},
          Trig{"Atanh", std::atanh, o2g::atanh}}) {
        auto f = t.f;
        unary(
            r, t.op, [f](OpCtx&, double x) { return f(x); }, custom1(t.k));
    }
    unary(
        r, "ThresholdedRelu", [](OpCtx& c, double x) { return x > c.af("alpha", 1.0f) ? x : 0.0; },
        [](Lc& c, ggml_tensor* x) {  // x * (x > alpha)
            ggml_tensor* a = c.repeat_to(c.scalar(c.af("alpha", 1.0f)), {x->ne[0], x->ne[1], x->ne[2], x->ne[3]});
            return G(c.b, ggml_mul, x, G(c.b, ggml_map_custom2, x, c.cont(a), o2g::greater, GGML_N_TASKS_MAX, nullptr));
        });
    unary(
        r, "Shrink",
        [](OpCtx& c, double x) {
            double l = c.af("lambd", 0.5f), b = c.af("bias", 0.0f);
            return x < -l ? x + b : (x > l ? x - b : 0.0);
        },
        [](Lc& c, ggml_tensor* x) {  // d = x - clamp(x, -l, l);  y = d + (l - b) * sign(d)
            float l = c.af("lambd", 0.5f), b = c.af("bias", 0.0f);
            ggml_tensor* d = G(c.b, ggml_sub, x, G(c.b, ggml_clamp, x, -l, l));
            ggml_tensor* s = G(c.b, ggml_map_custom1, d, o2g::sign, GGML_N_TASKS_MAX, nullptr);
            return G(c.b, ggml_add, d, G(c.b, ggml_scale, s, l - b));
        });
    unary(
        r, "Celu",
        [](OpCtx& c, double x) {
            double a = c.af("alpha", 1.0f);
            return std::max(0.0, x) + std::min(0.0, a * std::expm1(x / a));
        },
        [](Lc& c, ggml_tensor* x) {  // relu(x) + alpha * elu(min(x, 0) / alpha)
            float a = c.af("alpha", 1.0f);
            ggml_tensor* neg = G(c.b, ggml_scale, G(c.b, ggml_neg, G(c.b, ggml_relu, G(c.b, ggml_neg, x))), 1.0f / a);
            return G(c.b, ggml_add, G(c.b, ggml_relu, x), G(c.b, ggml_scale, G(c.b, ggml_elu, neg), a));
        });
    unary(
        r, "Mish", [](OpCtx&, double x) { return x * std::tanh(std::log1p(std::exp(x))); },
        [](Lc& c, ggml_tensor* x) { return G(c.b, ggml_mul, x, G(c.b, ggml_tanh, G(c.b, ggml_softplus, x))); });
    unary(
        r, "Gelu",
        [](OpCtx& c, double x) {
            if (c.as("approximate", "none") == "tanh")
                return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
            return 0.5 * x * (1 + erf_d(x / std::sqrt(2.0)));
        },
        [](Lc& c, ggml_tensor* x) {
            if (c.as("approximate", "none") == "tanh") c.fail_unsupported("Gelu approximate='tanh' is not lowered yet");
            return G(c.b, ggml_gelu_erf, x);
        });
    // Internal ops produced by the fusion passes.
    unary(
        r, "o2g.Silu", [](OpCtx&, double x) { return x / (1.0 + std::exp(-x)); },
        [](Lc& c, ggml_tensor* x) {
            // in place on a GroupNorm's output that nothing else reads: fused with it (lower_group_norm)
            if (c.sole_reader(0) && x == c.x(0) && !c.graph_output(0) && c.norm_behind(0)) {
                c.overwrote(c.norm_behind(0));
                return G(c.b, ggml_silu_inplace, x);
            }
            return activation_in_place(
                c, x, [&](bool in_place) { return in_place ? G(c.b, ggml_silu_inplace, x) : G(c.b, ggml_silu, x); });
        });
    unary(
        r, "Not", [](OpCtx&, double x) { return double(x == 0); }, custom1(o2g::logical_not),
        [](int64_t x) { return int64_t(x == 0); });
    {  // IsNaN / IsInf: bool outputs
        for (bool nan : {true, false}) {
            OpDef d;
            d.op_type = nan ? "IsNaN" : "IsInf";
            d.infer = [](OpCtx& c) { c.set_out(0, DType::Bool, c.shape(0)); };
            d.eval = [nan](OpCtx& c) {
                bool pos = c.ai("detect_positive", 1) != 0, neg = c.ai("detect_negative", 1) != 0;
                c.set_const(0,
                            eval_elementwise(
                                c, DType::Bool,
                                [=](const double* v) {
                                    return double(nan ? std::isnan(v[0])
                                                      : (std::isinf(v[0]) && ((v[0] > 0 && pos) || (v[0] < 0 && neg))));
                                },
                                nullptr));
            };
            d.lower = [nan](Lc& c) {
                require_float(c, 0);
                bool pos = c.ai("detect_positive", 1) != 0, neg = c.ai("detect_negative", 1) != 0;
                ggml_custom1_op_t k =
                    nan ? o2g::isnan : (pos && neg ? o2g::isinf : (pos ? o2g::isinf_pos : o2g::isinf_neg));
                ggml_tensor* y = G(c.b, ggml_map_custom1, c.xc(0), k, GGML_N_TASKS_MAX, nullptr);
                if (!nan && !pos && !neg) y = G(c.b, ggml_scale, y, 0.0f);  // detects nothing: all false
                c.set(0, y);
            };
            r.add(std::move(d));
        }
    }
}

// ---- binary and variadic ---------------------------------------------------------------

// x + v, x - v, v - x, x * v with v a constant scalar and x of the output's shape: ggml_scale /
// ggml_scale_bias (1 * x + v, -1 * x + v: the same values), one vectorized pass (ggml's broadcast
// of a one-element operand runs element by element). Division stays a division (x * (1 / v) can
// differ in the last bit). nullptr otherwise.
ggml_tensor* scalar_binary(Lc& c, LowerCtx::Bin bin) {
    for (int k = 0; k < 2 && bin != LowerCtx::Bin::Div; ++k) {
        if (!c.is_const(k) || c.cval(k).numel() != 1 || c.shape(1 - k) != c.out(0).shape) continue;
        float v = float(c.cval(k).getf(0));
        ggml_tensor* x = c.xc(1 - k);
        switch (bin) {
            case LowerCtx::Bin::Mul: return G(c.b, ggml_scale, x, v);
            case LowerCtx::Bin::Add: return G(c.b, ggml_scale_bias, x, 1.0f, v);
            case LowerCtx::Bin::Sub:
                return k == 1 ? G(c.b, ggml_scale_bias, x, 1.0f, -v) : G(c.b, ggml_scale_bias, x, -1.0f, v);
            case LowerCtx::Bin::Div: break;
        }
    }
    return nullptr;
}

// Mul(x, s) with x a 4-D map [N, C, H, W] and s one value per channel ([N or 1, C, 1, 1] or fewer dims): a
// squeeze-excitation block's scale. One MUL of x by s that reads x, and writes its output, in a backend's
// private layout where x's producer and the product's readers keep one (LowerCtx::reads_private: the oneDNN
// backend then keeps the block's convolutions in the blocked layout). nullptr otherwise.
ggml_tensor* channel_product(Lc& c) {
    const Shape& so = c.out(0).shape;
    if (so.size() != 4 || c.dtype(0) != DType::F32 || c.dtype(1) != DType::F32) return nullptr;
    for (int i = 0; i < 2; ++i) {
        if (c.shape(i) != so || c.shape(1 - i).size() > 4) continue;
        Shape s4 = align_rank(c.shape(1 - i), 4);
        if (s4[1] != so[1] || s4[2] != 1 || s4[3] != 1 || (s4[0] != 1 && s4[0] != so[0])) continue;
        ggml_tensor* x = c.x(i);
        if (!ggml_is_contiguous(x)) return nullptr;
        ggml_tensor* y = G(c.b, ggml_mul, c.reshape(x, so), c.reshape(c.x(1 - i), s4));
        if (c.reshape(x, so) == x) c.reads_private(i, y);
        c.overwrote(y);
        return y;
    }
    return nullptr;
}

void binary(Registry& r, const std::string& op, FloatFn ff, IntFn fi, LowerCtx::Bin bin, bool lowerable = true) {
    OpDef d;
    d.op_type = op;
    d.min_inputs = 2;
    d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), broadcast_all(c)); };
    d.eval = [ff, fi](OpCtx& c) { c.set_const(0, eval_elementwise(c, c.dtype(0), ff, fi)); };
    if (lowerable)
        d.lower = [bin](Lc& c) {
            if (c.dtype(0) != DType::F32)
                c.fail_unsupported(std::string("device arithmetic on ") + dtype_name(c.dtype(0)) +
                                   " tensors is not supported");
            ggml_tensor* y = bin == LowerCtx::Bin::Add   ? residual_add(c)
                             : bin == LowerCtx::Bin::Mul ? channel_product(c)
                                                         : nullptr;
            if (!y) y = scalar_binary(c, bin);
            c.set(0, y ? y : c.binary(bin, c.x(0), operand_shape(c, 0), c.x(1), operand_shape(c, 1)));
        };
    r.add(std::move(d));
}

int64_t idiv(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }

// elementwise kernel of o2g_kernels.h on inputs 0 and 1 broadcast to the output shape
ggml_tensor* custom_binary(Lc& c, ggml_custom2_op_t k) {
    require_float(c, 0);
    require_float(c, 1);
    return G(c.b, ggml_map_custom2, expand_to_out(c, 0), expand_to_out(c, 1), k, GGML_N_TASKS_MAX, nullptr);
}

// Pow with a constant scalar exponent that ggml can compute exactly.
ggml_tensor* lower_pow(Lc& c) {
    if (!c.is_const(1) || c.cval(1).numel() != 1) return custom_binary(c, o2g::pow);
    double e = c.cval(1).getf(0);
    ggml_tensor* x = c.xc(0);
    ggml_tensor* y = nullptr;
    if (e == 1) y = x;
    else if (e == 2) y = G(c.b, ggml_sqr, x);
    else if (e == 3) y = G(c.b, ggml_mul, G(c.b, ggml_sqr, x), x);
    else if (e == 0.5) y = G(c.b, ggml_sqrt, x);
    else if (e == -1) y = G(c.b, ggml_div, c.repeat_to(c.scalar(1.0f), {x->ne[0], x->ne[1], x->ne[2], x->ne[3]}), x);
    else return custom_binary(c, o2g::pow);
    // the exponent may broadcast the output to a higher rank
    return c.reshape(c.repeat_to(c.reshape(y, align_rank(c.shape(0), c.out(0).shape.size())), to_ne(c.out(0).shape)),
                     c.out(0).shape);
}

void register_binary(Registry& r) {
    using B = LowerCtx::Bin;
    binary(
        r, "Add", [](const double* v) { return v[0] + v[1]; }, [](const int64_t* v) { return v[0] + v[1]; }, B::Add);
    binary(
        r, "Sub", [](const double* v) { return v[0] - v[1]; }, [](const int64_t* v) { return v[0] - v[1]; }, B::Sub);
    binary(
        r, "Mul", [](const double* v) { return v[0] * v[1]; }, [](const int64_t* v) { return v[0] * v[1]; }, B::Mul);
    binary(
        r, "Div", [](const double* v) { return v[0] / v[1]; }, [](const int64_t* v) { return idiv(v[0], v[1]); },
        B::Div);
    {
        OpDef d;
        d.op_type = "Pow";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), broadcast_all(c)); };
        d.eval = [](OpCtx& c) {
            c.set_const(0, eval_elementwise(
                               c, c.dtype(0), [](const double* v) { return std::pow(v[0], v[1]); },
                               [](const int64_t* v) { return int64_t(std::pow(double(v[0]), double(v[1]))); }));
        };
        d.lower = [](Lc& c) { c.set(0, lower_pow(c)); };
        r.add(std::move(d));
    }
    // variadic ops
    struct V {
        const char* op;
        int kind;
    };
    for (V v : {V{"Sum", 0}, V{"Mean", 1}, V{"Max", 2}, V{"Min", 3}}) {
        OpDef d;
        d.op_type = v.op;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), broadcast_all(c)); };
        int kind = v.kind;
        d.eval = [kind](OpCtx& c) {
            int k = 0;
            for (int i = 0; i < c.nin(); ++i) k += c.has(i);
            c.set_const(0, eval_elementwise(
                               c, c.dtype(0),
                               [kind, k](const double* x) {
                                   double a = x[0];
                                   for (int i = 1; i < k; ++i) {
                                       if (kind <= 1) a += x[i];
                                       else if (std::isnan(x[i]) || std::isnan(a)) a = NAN;
                                       else a = kind == 2 ? std::max(a, x[i]) : std::min(a, x[i]);
                                   }
                                   return kind == 1 ? a / k : a;
                               },
                               [kind, k](const int64_t* x) {
                                   int64_t a = x[0];
                                   for (int i = 1; i < k; ++i)
                                       a = kind <= 1 ? a + x[i] : (kind == 2 ? std::max(a, x[i]) : std::min(a, x[i]));
                                   return kind == 1 ? a / k : a;
                               }));
        };
        d.lower = [kind](Lc& c) {
            if (c.dtype(0) != DType::F32) c.fail_unsupported("device arithmetic on non-float tensors is not supported");
            ggml_tensor* acc = c.x(0);
            Shape sacc = c.shape(0);
            int n = 0;
            for (int i = 0; i < c.nin(); ++i) {
                if (!c.has(i)) continue;
                ++n;
                if (n == 1) continue;
                ggml_tensor* y = c.x(i);
                Shape sy = c.shape(i), so;
                broadcast_shapes(sacc, sy, so);
                if (kind <= 1) {
                    acc = c.binary(LowerCtx::Bin::Add, acc, sacc, y, sy);
                } else if (c.is_const(i) && c.cval(i).numel() == 1 && so == sacc) {
                    float v = float(c.cval(i).getf(0));
                    acc = kind == 2 ? G(c.b, ggml_clamp, c.cont(acc), v, INFINITY)
                                    : G(c.b, ggml_clamp, c.cont(acc), -INFINITY, v);
                } else {  // exact elementwise max/min kernel on both operands broadcast
                    auto ne = to_ne(so);
                    ggml_tensor* a2 = c.cont(c.repeat_to(c.reshape(acc, align_rank(sacc, so.size())), ne));
                    ggml_tensor* b2 = c.cont(c.repeat_to(c.reshape(y, align_rank(sy, so.size())), ne));
                    acc = G(c.b, ggml_map_custom2, a2, b2, kind == 2 ? o2g::max : o2g::min, GGML_N_TASKS_MAX, nullptr);
                }
                sacc = so;
            }
            if (kind == 1 && n > 1) acc = G(c.b, ggml_scale, c.cont(acc), 1.0f / float(n));
            if (n == 1) acc = c.x(0);
            c.set(0, acc);
        };
        r.add(std::move(d));
    }
    // comparisons and logic: computed on the host (shape logic); no device kernels in ggml
    struct Cmp {
        const char* op;
        std::function<bool(double, double)> f;
        ggml_custom2_op_t k;
    };
    for (const Cmp& cm : {Cmp{"Equal", [](double a, double b) { return a == b; }, o2g::equal},
                          Cmp{"Less", [](double a, double b) { return a < b; }, o2g::less},
                          Cmp{"Greater", [](double a, double b) { return a > b; }, o2g::greater},
                          Cmp{"LessOrEqual", [](double a, double b) { return a <= b; }, o2g::less_equal},
                          Cmp{"GreaterOrEqual", [](double a, double b) { return a >= b; }, o2g::greater_equal},
                          Cmp{"And", [](double a, double b) { return a != 0 && b != 0; }, o2g::logical_and},
                          Cmp{"Or", [](double a, double b) { return a != 0 || b != 0; }, o2g::logical_or},
                          Cmp{"Xor", [](double a, double b) { return (a != 0) != (b != 0); }, o2g::logical_xor}}) {
        OpDef d;
        d.op_type = cm.op;
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, DType::Bool, broadcast_all(c)); };
        auto f = cm.f;
        d.eval = [f](OpCtx& c) {
            c.set_const(0, eval_elementwise(
                               c, DType::Bool, [f](const double* v) { return double(f(v[0], v[1])); },
                               [f](const int64_t* v) { return int64_t(f(double(v[0]), double(v[1]))); }));
        };
        auto k = cm.k;
        d.lower = [k](Lc& c) { c.set(0, custom_binary(c, k)); };
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.op_type = "Mod";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(0), broadcast_all(c)); };
        d.eval = [](OpCtx& c) {
            bool fm = c.ai("fmod", 0) != 0;
            c.set_const(0, eval_elementwise(
                               c, c.dtype(0),
                               [fm](const double* v) {
                                   double m = std::fmod(v[0], v[1]);
                                   if (!fm && m != 0 && ((m < 0) != (v[1] < 0)))
                                       m += v[1];  // python-style sign of the divisor
                                   return m;
                               },
                               [fm](const int64_t* v) {
                                   if (v[1] == 0) return int64_t(0);
                                   int64_t m = v[0] % v[1];
                                   if (!fm && m != 0 && ((m < 0) != (v[1] < 0))) m += v[1];
                                   return m;
                               }));
        };
        d.lower = [](Lc& c) {
            if (c.ai("fmod", 0) == 0) c.fail_unsupported("integer Mod (fmod=0) on the device");
            c.set(0, custom_binary(c, o2g::fmod));
        };
        r.add(std::move(d));
    }
    {
        OpDef d;  // unsigned integers only (the spec); ggml has no integer kernels: host evaluation
        d.op_type = "BitShift";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {
            if (dtype_is_float(c.dtype(0)) || c.dtype(0) == DType::Bool)
                c.fail("BitShift takes unsigned integers, got " + std::string(dtype_name(c.dtype(0))));
            c.set_out(0, c.dtype(0), broadcast_all(c));
        };
        d.eval = [](OpCtx& c) {
            std::string dir = c.as("direction", "");
            if (dir != "LEFT" && dir != "RIGHT") c.fail("direction must be LEFT or RIGHT, got '" + dir + "'");
            bool left = dir == "LEFT";
            c.set_const(0, eval_elementwise(
                               c, c.dtype(0), [](const double*) { return 0.0; },
                               [left](const int64_t* v) {
                                   uint64_t x = uint64_t(v[0]), n = uint64_t(v[1]);
                                   return int64_t(n >= 64 ? 0 : left ? x << n : x >> n);
                               }));
        };
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.op_type = "Where";
        d.min_inputs = 3;
        d.infer = [](OpCtx& c) { c.set_out(0, c.dtype(1), broadcast_all(c)); };
        d.lower = [](Lc& c) {
            for (int i = 0; i < 3; ++i) require_float(c, i);
            c.set(0, G(c.b, ggml_map_custom3, expand_to_out(c, 0), expand_to_out(c, 1), expand_to_out(c, 2), o2g::where,
                       GGML_N_TASKS_MAX, nullptr));
        };
        d.eval = [](OpCtx& c) {
            bool flt = dtype_is_float(c.dtype(1));
            c.set_const(0, eval_elementwise(
                               c, c.dtype(1), [](const double* v) { return v[0] != 0 ? v[1] : v[2]; },
                               flt ? IntFn(nullptr) : IntFn([](const int64_t* v) { return v[0] != 0 ? v[1] : v[2]; })));
        };
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.op_type = "PRelu";
        d.min_inputs = 2;
        d.infer = [](OpCtx& c) {  // the slope broadcasts to X (one way), or is per channel (opset < 7)
            Shape o;
            bool channel = c.opset() < 7 && c.rank(1) == 1 && c.rank(0) >= 2 && c.shape(1)[0] == c.shape(0)[1];
            if (!channel && (!broadcast_shapes(c.shape(0), c.shape(1), o) || o != c.shape(0)))
                c.fail("slope " + shape_str(c.shape(1)) + " does not broadcast to the input " + shape_str(c.shape(0)));
            infer_same(c);
        };
        d.eval = [](OpCtx& c) {  // x < 0 ? slope * x : x, the slope broadcast to x
            const Tensor& x = c.cval(0);
            Shape ss = c.shape(1);
            if (c.opset() < 7 && ss.size() == 1 && c.rank(0) >= 2 && ss[0] == c.shape(0)[1]) {
                ss = Shape(size_t(c.rank(0) - 1), 1);  // opset 6: one slope per channel
                ss[0] = c.shape(0)[1];
            }
            Tensor slope = broadcast_host(c.cval(1).reshaped(ss), x.shape), y = Tensor::zeros(x.dtype, x.shape);
            bool flt = dtype_is_float(x.dtype);
            for (int64_t e = 0; e < x.numel(); ++e) {
                if (flt) y.setf(e, x.getf(e) < 0 ? slope.getf(e) * x.getf(e) : x.getf(e));
                else y.seti(e, x.geti(e) < 0 ? slope.geti(e) * x.geti(e) : x.geti(e));
            }
            c.set_const(0, y);
        };
        d.lower = [](Lc& c) {
            ggml_tensor* x = c.xc(0);
            if (c.is_const(1) && c.cval(1).numel() == 1) {
                c.set(0, G(c.b, ggml_leaky_relu, x, float(c.cval(1).getf(0)), false));
                return;
            }
            // relu(x) - slope * relu(-x)
            Shape ss = c.shape(1);
            if (c.opset() < 7 && ss.size() == 1 && c.rank(0) >= 2 && ss[0] == c.shape(0)[1]) {
                ss = Shape(c.rank(0) - 1, 1);  // opset 6: one slope per channel
                ss[0] = c.shape(0)[1];
            }
            ggml_tensor* neg = G(c.b, ggml_relu, G(c.b, ggml_neg, x));
            ggml_tensor* t = c.binary(LowerCtx::Bin::Mul, neg, c.shape(0), c.x(1), ss);
            c.set(0, G(c.b, ggml_sub, G(c.b, ggml_relu, x), t));
        };
        r.add(d);
    }
}

void register_clip_cast(Registry& r) {
    {
        OpDef d;
        d.op_type = "Clip";
        d.host_inputs = {1, 2};
        auto bounds = [](OpCtx& c, double& lo, double& hi) {
            lo = -INFINITY;
            hi = INFINITY;
            if (c.opset() < 11) {
                lo = c.af("min", -3.402823e+38f);
                hi = c.af("max", 3.402823e+38f);
            } else {
                if (c.has(1)) lo = c.cval(1).getf(0);
                if (c.has(2)) hi = c.cval(2).getf(0);
            }
        };
        d.infer = infer_same;
        d.eval = [bounds](OpCtx& c) {
            double lo, hi;
            bounds(c, lo, hi);
            Tensor t = Tensor::zeros(c.dtype(0), c.shape(0));
            const Tensor& x = c.cval(0);
            bool flt = dtype_is_float(x.dtype);
            for (int64_t i = 0; i < t.numel(); ++i) {
                if (flt) t.setf(i, std::min(std::max(x.getf(i), lo), hi));
                else
                    t.seti(i, std::min(std::max(x.geti(i), int64_t(std::max(lo, -9.2e18))),
                                       int64_t(std::min(hi, 9.2e18))));
            }
            c.set_const(0, t);
        };
        d.lower = [bounds](Lc& c) {
            double lo, hi;
            bounds(c, lo, hi);
            ggml_tensor* x = c.xc(0);
            c.set(0, activation_in_place(c, x, [&](bool in_place) {
                      return in_place ? G(c.b, ggml_clamp_inplace, x, float(lo), float(hi))
                                      : G(c.b, ggml_clamp, x, float(lo), float(hi));
                  }));
        };
        r.add(std::move(d));
    }
    {
        OpDef d;
        d.op_type = "Cast";
        auto target = [](OpCtx& c) {
            int64_t to = c.node().op_type == "CastLike" ? int64_t(c.dtype(1)) : c.ai("to", 0);
            if (!dtype_known(int(to)) && to != int64_t(DType::String))
                c.fail_unsupported("Cast to data type " + std::to_string(to) + " is not supported");
            return DType(to);
        };
        d.string_inputs = true;  // to and from string: folded (string tensors are host values)
        d.infer = [target](OpCtx& c) {
            if (target(c) == DType::String) c.cval(0);
            c.set_out(0, target(c), c.shape(0));
        };
        d.eval = [target](OpCtx& c) {
            DType to = target(c);
            const Tensor& x = c.cval(0);
            // compare's float64 host reference (Graph::float64): float32 stands for float64, so a cast to
            // float32 does not round, and a cast to string writes float32's shortest digits, as the model's would
            if (c.graph().float64 && x.dtype == DType::F64 && to == DType::String)
                return c.set_const(0, x.cast(DType::F32).cast(to));
            c.set_const(0, x.cast(c.graph().float64 && to == DType::F32 ? DType::F64 : to));
        };
        d.lower = [target](Lc& c) {
            DType from = c.dtype(0), to = target(c);
            bool same_device_type = ggml_type_for(from) != GGML_TYPE_COUNT && ggml_type_for(from) == ggml_type_for(to);
            if (!same_device_type)
                c.fail_unsupported(std::string("Cast from ") + dtype_name(from) + " to " + dtype_name(to) +
                                   " on the device is not supported");
            c.set(0, c.x(0));
        };
        OpDef like = d;
        like.op_type = "CastLike";
        like.min_inputs = 2;
        r.add(std::move(d));
        r.add(std::move(like));
    }
}

}  // namespace

O2G_OP_FAMILY(elementwise) {
    register_unary(r);
    register_binary(r);
    register_clip_cast(r);
}

}  // namespace onnx2ggml::core
