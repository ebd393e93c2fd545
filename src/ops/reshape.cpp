// Reshape-like and data-movement ops that are views on the device: Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Expand, Tile, DepthToSpace, SpaceToDepth, Identity, Dropout (inference).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "o2g_kernels.h"
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

// ---- shape rules shared by host and device ----------------------------------------------

Shape reshape_target(OpCtx& c) {
    std::vector<int64_t> spec = c.opset() < 5 ? c.ais("shape") : c.cints(1);
    bool allowzero = c.ai("allowzero", 0) != 0;
    const Shape& in = c.shape(0);
    Shape out(spec.size());
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < spec.size(); ++i) {
        int64_t d = spec[i];
        if (d == 0 && !allowzero) {
            if (i >= in.size()) c.fail("shape entry 0 at position " + std::to_string(i) + " has no input dim to copy");
            d = in[i];
        }
        if (d == -1) {
            if (infer >= 0) c.fail("more than one -1 in the target shape");
            infer = int(i);
            out[i] = 1;
            continue;
        }
        if (d < 0) c.fail("invalid target shape entry " + std::to_string(d));
        out[i] = d;
        if (__builtin_mul_overflow(known, d, &known))
            c.fail("target shape " + shape_str(Shape(spec)) + " has more elements than int64 holds");
    }
    int64_t n = shape_numel(in);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) c.fail("cannot reshape " + shape_str(in) + " to " + shape_str(Shape(spec)));
        out[infer] = n / known;
    }
    if (shape_numel(out) != n)
        c.fail("cannot reshape " + shape_str(in) + " (" + std::to_string(n) + " elements) to " + shape_str(out));
    return out;
}

std::vector<int64_t> axes_arg(OpCtx& c, int input, const char* attr) {
    if (c.opset() >= 13 && c.op_is_input_axes()) return c.has(input) ? c.cints(input) : std::vector<int64_t>{};
    return c.ais(attr);
}

}  // namespace

O2G_OP_FAMILY(reshape) {
    // Reshape-like ops: output shape rule + host reshape + device reshape
    auto reshape_like = [&](const std::string& op, std::function<Shape(OpCtx&)> rule, std::vector<int> host_inputs) {
        OpDef d;
        d.op_type = op;
        d.host_inputs = host_inputs;
        d.infer = [rule](OpCtx& c) { c.set_out(0, c.dtype(0), rule(c)); };
        d.eval = [rule](OpCtx& c) { c.set_const(0, c.cval(0).reshaped(rule(c))); };
        d.lower = [](Lc& c) { c.set(0, c.reshape_view(c.x(0), c.out(0).shape)); };
        r.add(d);
    };
    reshape_like("Reshape", reshape_target, {1});
    reshape_like("Flatten",
                 [](OpCtx& c) {
                     int rk = c.rank(0);
                     int64_t a = c.ai("axis", 1);
                     if (a < -rk || a > rk) c.fail("axis out of range");
                     if (a < 0) a += rk;
                     int64_t p = 1, q = 1;
                     for (int i = 0; i < rk; ++i) (i < a ? p : q) *= c.shape(0)[i];
                     return Shape{p, q};
                 },
                 {});
    reshape_like("Squeeze",
                 [](OpCtx& c) {
                     std::vector<int64_t> axes = axes_arg(c, 1, "axes");
                     const Shape& s = c.shape(0);
                     int rk = int(s.size());
                     std::vector<bool> drop(rk, false);
                     if (axes.empty())
                         for (int i = 0; i < rk; ++i) drop[i] = s[i] == 1;
                     for (int64_t a : axes) {
                         int k = c.axis(a, rk);
                         if (s[k] != 1)
                             c.fail("cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(s[k]));
                         drop[k] = true;
                     }
                     Shape o;
                     for (int i = 0; i < rk; ++i)
                         if (!drop[i]) o.push_back(s[i]);
                     return o;
                 },
                 {1});
    reshape_like("Unsqueeze",
                 [](OpCtx& c) {
                     std::vector<int64_t> axes = axes_arg(c, 1, "axes");
                     const Shape& s = c.shape(0);
                     int orank = int(s.size() + axes.size());
                     std::vector<bool> ins(orank, false);
                     for (int64_t a : axes) {
                         int k = c.axis(a, orank);
                         if (ins[k]) c.fail("axis " + std::to_string(k) + " given twice");
                         ins[k] = true;
                     }
                     Shape o;
                     size_t j = 0;
                     for (int i = 0; i < orank; ++i) o.push_back(ins[i] ? 1 : s[j++]);
                     return o;
                 },
                 {1});

    {
        OpDef d;
        d.op_type = "Transpose";
        auto perm_of = [](OpCtx& c) {
            int rk = c.rank(0);
            std::vector<int64_t> p = c.ais("perm");
            if (p.empty())
                for (int i = rk - 1; i >= 0; --i) p.push_back(i);
            if (int(p.size()) != rk)
                c.fail("perm has " + std::to_string(p.size()) + " entries for rank " + std::to_string(rk));
            std::vector<bool> seen(rk, false);
            for (auto& v : p) {
                v = c.axis(v, rk);
                if (seen[v]) c.fail("perm is not a permutation");
                seen[v] = true;
            }
            return p;
        };
        d.infer = [perm_of](OpCtx& c) {
            auto p = perm_of(c);
            Shape o;
            for (auto v : p) o.push_back(c.shape(0)[v]);
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [perm_of](OpCtx& c) {
            auto p = perm_of(c);
            const Shape& s = c.shape(0);
            Shape o;
            for (auto v : p) o.push_back(s[v]);
            auto st = strides_of(s);
            c.set_const(0, remap(c.cval(0), o, [&](const std::vector<int64_t>& idx) {
                            int64_t f = 0;
                            for (size_t j = 0; j < idx.size(); ++j) f += idx[j] * st[p[j]];
                            return f;
                        }));
        };
        d.lower = [perm_of](Lc& c) { c.set(0, transpose_any(c, c.x(0), c.shape(0), perm_of(c))); };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Expand";
        d.min_inputs = 2;
        d.host_inputs = {1};
        auto out_shape = [](OpCtx& c) {
            Shape o;
            if (!broadcast_shapes(c.shape(0), c.cints(1), o))
                c.fail("cannot expand " + shape_str(c.shape(0)) + " to " + shape_str(c.cints(1)));
            return o;
        };
        d.infer = [out_shape](OpCtx& c) { c.set_out(0, c.dtype(0), out_shape(c)); };
        d.eval = [out_shape](OpCtx& c) { c.set_const(0, broadcast_host(c.cval(0), out_shape(c))); };
        d.lower = [out_shape](Lc& c) {
            Shape o = out_shape(c);
            ggml_tensor* x = c.reshape(c.x(0), align_rank(c.shape(0), o.size()));
            if (o.size() > 4 && canonical4(align_rank(c.shape(0), o.size()))[0] != canonical4(o)[0] &&
                canonical4(align_rank(c.shape(0), o.size()))[0] != 1)
                c.fail_unsupported("Expand along merged leading dims of a rank > 4 tensor");
            c.set(0, c.repeat_to(x, to_ne(o)));
        };
        r.add(d);
    }
    {
        OpDef d;
        d.op_type = "Tile";
        d.min_inputs = 2;
        d.host_inputs = {1};
        auto out_shape = [](OpCtx& c) {
            auto rep = c.cints(1);
            if (int(rep.size()) != c.rank(0))
                c.fail("repeats has " + std::to_string(rep.size()) + " entries for rank " + std::to_string(c.rank(0)));
            Shape o = c.shape(0);
            for (size_t i = 0; i < o.size(); ++i) {
                if (rep[i] < 0) c.fail("negative repeat");
                o[i] *= rep[i];
            }
            return o;
        };
        d.infer = [out_shape](OpCtx& c) { c.set_out(0, c.dtype(0), out_shape(c)); };
        d.eval = [out_shape](OpCtx& c) {
            const Shape& s = c.shape(0);
            auto st = strides_of(s);
            c.set_const(0, remap(c.cval(0), out_shape(c), [&](const std::vector<int64_t>& idx) {
                            int64_t f = 0;
                            for (size_t k = 0; k < idx.size(); ++k) f += (idx[k] % s[k]) * st[k];
                            return f;
                        }));
        };
        d.lower = [out_shape](Lc& c) {
            if (c.rank(0) > 4) c.fail_unsupported("Tile of a rank > 4 tensor");
            c.set(0, c.repeat_to(c.cont(c.x(0)), to_ne(out_shape(c))));
        };
        r.add(d);
    }
    // DepthToSpace / SpaceToDepth as reshape -> transpose -> reshape
    for (bool d2s : {true, false}) {
        OpDef d;
        d.op_type = d2s ? "DepthToSpace" : "SpaceToDepth";
        auto plan = [d2s](OpCtx& c, Shape& mid, std::vector<int64_t>& perm, Shape& out) {
            const Shape& s = c.shape(0);
            if (s.size() != 4) c.fail("input must be 4-D");
            int64_t b = c.ai("blocksize", 0);
            if (b <= 0) c.fail("blocksize must be positive");
            int64_t N = s[0], C = s[1], H = s[2], W = s[3];
            if (d2s) {
                if (C % (b * b)) c.fail("channels not divisible by blocksize^2");
                bool crd = c.as("mode", "DCR") == "CRD";
                mid = crd ? Shape{N, C / (b * b), b, b, H, W} : Shape{N, b, b, C / (b * b), H, W};
                perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
                out = {N, C / (b * b), H * b, W * b};
            } else {
                if (H % b || W % b) c.fail("spatial dims not divisible by blocksize");
                mid = {N, C, H / b, b, W / b, b};
                perm = {0, 3, 5, 1, 2, 4};
                out = {N, C * b * b, H / b, W / b};
            }
        };
        d.infer = [plan](OpCtx& c) {
            Shape m, o;
            std::vector<int64_t> p;
            plan(c, m, p, o);
            c.set_out(0, c.dtype(0), o);
        };
        d.eval = [plan](OpCtx& c) {
            Shape m, o;
            std::vector<int64_t> p;
            plan(c, m, p, o);
            auto st = strides_of(m);
            Shape tout;
            for (auto v : p) tout.push_back(m[v]);
            Tensor t = remap(c.cval(0).reshaped(m), tout, [&](const std::vector<int64_t>& idx) {
                int64_t f = 0;
                for (size_t j = 0; j < idx.size(); ++j) f += idx[j] * st[p[j]];
                return f;
            });
            c.set_const(0, t.reshaped(o));
        };
        d.lower = [plan](Lc& c) {
            Shape m, o;
            std::vector<int64_t> p;
            plan(c, m, p, o);
            Shape tout;
            for (auto v : p) tout.push_back(m[v]);
            ggml_tensor* t = transpose_any(c, c.reshape(c.x(0), m), m, p);
            c.set(0, c.reshape(t, o));
        };
        r.add(d);
    }
    {  // Identity and Dropout (inference): the value passes through
        for (const char* op : {"Identity", "Dropout"}) {
            OpDef d;
            d.op_type = op;
            d.infer = [](OpCtx& c) {
                infer_same(c);
                if (c.has_out(1)) c.set_out(1, DType::Bool, c.shape(0));
                // training mode drops at random, except with ratio 0 (ratio and training_mode are
                // needed at compile time: a runtime one asks for a constant)
                if (c.node().op_type == "Dropout" && c.has(2) && c.cval(2).geti(0) != 0) {
                    double ratio = c.opset() >= 12 ? (c.has(1) ? c.cval(1).getf(0) : 0.5) : c.af("ratio", 0.5f);
                    if (ratio != 0) c.fail_unsupported("Dropout in training mode (random) is not supported");
                }
            };
            d.eval = [](OpCtx& c) {
                c.set_const(0, c.cval(0));
                if (c.has_out(1)) {
                    Tensor m = Tensor::zeros(DType::Bool, c.shape(0));
                    for (int64_t i = 0; i < m.numel(); ++i) m.seti(i, 1);
                    c.set_const(1, m);
                }
            };
            d.lower = [](Lc& c) {
                // (the mask of an inference Dropout is all true: exported models declare it, rarely read it; an
                // output no node reads need not be lowered)
                if (c.has_out(1) && (c.readers(c.node().outputs[1]) > 0 || c.graph_output(1)))
                    c.fail_unsupported("the mask output of Dropout is not supported on the device");
                c.set(0, c.x(0));
            };
            r.add(std::move(d));
        }
    }
}

}  // namespace onnx2ggml::core
