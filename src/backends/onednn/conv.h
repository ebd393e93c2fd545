// onnx2ggml's oneDNN backend (o2g_onednn.h): convolutions (plain, depthwise, grouped; NCHW or blocked; Winograd
// bands) and their fused ops.
#pragma once
#include "plan.h"

namespace o2g_onednn {

// The plan of dst = act(conv(src[1], kernel src[0]) (+ bias, when given) (+ residual, when given)), written to `out`
inline Context::Plan conv_plan(Context& c, const ggml_tensor* dst, const ggml_tensor* bias, const ggml_tensor* residual,
                               const Activation& act, void* out) {
    // a CONV_2D(_DW), or the CONT of o2g::grouped_conv (kernel src[3], geometry its IM2COL's)
    bool grouped = dst->op == GGML_OP_CONT;
    const ggml_tensor* k = grouped ? dst->src[3] : dst->src[0];                    // [KW, KH, IC / groups, OC]
    const ggml_tensor* x = dst->src[1];                                            // [W, H, C, N]
    const int32_t* p = grouped ? grouped_im2col(dst)->op_params : dst->op_params;  // s0, s1, p0, p1, d0, d1 (dim 0 = W)
    const int32_t* flags = dst->op_params;                                         // o2g::conv_chain's
    using dims = dnnl::memory::dims;
    bool dw = dst->op == GGML_OP_CONV_2D_DW;
    int64_t G = grouped ? dst->op_params[o2g::kGroupedConv] : dw ? k->ne[3] : 1;
    dims src_d = {x->ne[3], x->ne[2], x->ne[1], x->ne[0]};
    dims w_d = G > 1 ? dims{G, k->ne[3] / G, k->ne[2], k->ne[1], k->ne[0]}  // goihw (dw: k [KW, KH, 1, C])
                     : dims{k->ne[3], k->ne[2], k->ne[1], k->ne[0]};
    dims dst_d = {dst->ne[3], dst->ne[2], dst->ne[1], dst->ne[0]};
    dims strides = {p[1], p[0]}, pads = {p[3], p[2]}, dil = {p[5] - 1, p[4] - 1};  // oneDNN dilation counts from 0
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::desc src_md(src_d, dt::f32, tag::nchw), w_md(w_d, dt::f32, G > 1 ? tag::goihw : tag::oihw),
        dst_md(dst_d, dt::f32, tag::nchw);
    // An F16 kernel (--weights f16) stays where ggml holds it, and the primitives take F32: it is converted into
    // the arena before each run of the convolution (Plan::h; then reordered when the primitive's layout is not
    // the plain one), so no F32 copy of it is kept: that would cost the memory F16 weights are there to save.
    const bool k16 = k->type == GGML_TYPE_F16;
    dnnl::memory::desc b_md({dst_d[1]}, dt::f32, tag::x);
    Context::Key key = {G,    src_d[0], src_d[1], src_d[2], src_d[3], dst_d[1], k->ne[1],        k->ne[0],
                        p[0], p[1],     p[2],     p[3],     p[4],     p[5],     bias != nullptr, residual != nullptr};
    key.push_back(run_threads());
    // A convolution's output that only convolutions (or the residual sums of convolutions) read
    // stays in private_layout (o2g::conv_chain marks both ends): written and read with no reorder.
    bool in_priv = flags[o2g::kInPrivate] == 1, out_priv = flags[o2g::kOutPrivate] == 1,
         res_priv = residual && flags[o2g::kResidualPrivate] == 1;
    // Blocked layouts (reorders in and out, a reordered copy of the kernel) pay off on large
    // activation maps (measured: about 2x faster from 56x56 up, 1.3x at 32x32, none at 16x16); on
    // small ones the kernel copy would cost memory for little gain (the UNet's 32x32 latent: 0.5 GB).
    // Depthwise and grouped convolutions take them always (oneDNN's NCHW kernels for them: a
    // reference one, and a gemm-based one 2-4x slower than its blocked JIT kernels on regnet's shapes).
    if (in_priv || out_priv || res_priv || G > 1 || x->ne[0] * x->ne[1] >= 56 * 56) {
        // the activation is the primitive's post-op (free in oneDNN's blocked kernels)
        int32_t lo_bits, hi_bits;
        std::memcpy(&lo_bits, &act.lo, 4);
        std::memcpy(&hi_bits, &act.hi, 4);
        key.insert(key.end(), {act.kind, lo_bits, hi_bits, in_priv, out_priv, res_priv});
        // where the input and the output are (NCHW or private_layout); oneDNN's fast kernels take one
        // layout family on both sides: when the private layouts differ (blocked and NHWC, as the
        // channel counts decide), the output's is taken and the input reordered to it
        dnnl::memory::desc x_md = in_priv ? private_layout(src_d) : src_md,
                           y_md = out_priv ? private_layout(dst_d) : dst_md;
        bool mixed = in_priv && out_priv && private_blocked(src_d[1]) != private_blocked(dst_d[1]);
        auto bt = c.blocked.find(key);
        if (bt == c.blocked.end()) {
            // a residual in the output's own (private) layout is read in place by a binary post-op where
            // the kernel supports one (no copy); otherwise it is copied into the output and summed
            bool add = res_priv && out_priv;
            // the primitive for output rows [r0, r1) (all rows: the whole map)
            auto make = [&](dnnl::algorithm alg, int64_t r0, int64_t r1, bool band_add) {
                bool whole = r0 == 0 && r1 == dst_d[2];
                // a band's first and last input rows (their padding: what lies outside the map)
                int64_t first = r0 * p[1] - p[3], last = (r1 - 1) * p[1] - p[3] + (k->ne[1] - 1) * p[5];
                int64_t i0 = whole ? 0 : std::max<int64_t>(0, first),
                        i1 = whole ? src_d[2] : std::min<int64_t>(src_d[2], last + 1);
                dims bs = {src_d[0], src_d[1], i1 - i0, src_d[3]}, bd = {dst_d[0], dst_d[1], r1 - r0, dst_d[3]};
                dims pl = whole ? pads : dims{i0 - first, p[2]}, pr = whole ? pads : dims{last + 1 - i1, p[2]};
                // (a depthwise convolution is given its input's layout: with `any` oneDNN 2.6 takes its
                // reference kernel for a plain input and a blocked output, 10x slower than its JIT one)
                dnnl::memory::desc any_src = whole && in_priv && !mixed ? x_md
                                             : dw && out_priv ? dnnl::memory::desc(bs, dt::f32, private_tag(dst_d[1]))
                                                              : dnnl::memory::desc(bs, dt::f32, tag::any),
                                   any_w(w_d, dt::f32, tag::any),
                                   // (an input in private_layout and a plain output: the output computed in the
                                   // input's layout, then reordered; oneDNN would pick a reference kernel for
                                   // blocked in, any out)
                    any_dst = whole && out_priv  ? private_layout(dst_d)
                              : whole && in_priv ? dnnl::memory::desc(bd, dt::f32, private_tag(src_d[1]))
                                                 : dnnl::memory::desc(bd, dt::f32, tag::any);
                // the post-ops an optimized kernel takes, in order of preference: the activation and the
                // residual's binary add fused, then without the add, then (SiLU, HardSwish, Sigmoid, where
                // no optimized kernel takes them as a post-op) without the activation, an eltwise pass after it
                dnnl::convolution_forward::primitive_desc pd;
                bool fused_act = true, fused_add = band_add;
                auto pick = [&](const dnnl::memory::desc& s_md, const dnnl::memory::desc& d_md) {
                    auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s_md,
                                                                    any_w, b_md, d_md, strides, dil, pl, pr)
                                  : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, s_md,
                                                                    any_w, d_md, strides, dil, pl, pr);
                    for (int t = 0; t < 4; ++t) {
                        fused_act = t < 2, fused_add = t % 2 == 0;
                        if ((fused_add && !band_add) || (!fused_act && act.kind < 3)) continue;
                        try {  // (no kernel at all for these post-ops: the next choice; Winograd takes no binary
                               // post-op, so a residual in the output's layout is summed by a sum post-op)
                            pd = dnnl::convolution_forward::primitive_desc(
                                d,
                                post_ops(fused_act ? act : Activation{}, residual != nullptr,
                                         fused_add ? &y_md : nullptr),
                                c.eng);
                        } catch (const dnnl::error&) { continue; }
                        if (std::strncmp(pd.impl_info_str(), "ref", 3) != 0) return true;
                    }
                    return false;
                };
                // no kernel in the private layouts: the layouts oneDNN picks, read and written through reorders
                // (dilated convolutions: its blocked kernels have none, its NHWC brgconv does: deeplabv3's ASPP at
                // rates 12 and 24 on a 33x33 map, 19.5 -> 9.6 and 5.1 ms against the gemm kernel below)
                bool found = pick(any_src, any_dst);
                if (!found && !dw && (in_priv || out_priv) && G == 1)
                    found = pick(dnnl::memory::desc(bs, dt::f32, tag::any), dnnl::memory::desc(bd, dt::f32, tag::any));
                // no optimized kernel at all: a grouped convolution with 8 or 4 channels per group (regnet_y's,
                // resnext's; onnx2ggml keeps those out of private-layout chains), or a dilation whose kernel extent
                // exceeds the map (deeplabv3's ASPP: rate 36 on 65x65; the reference kernel took minutes): the
                // gemm-based kernel on NCHW (for a grouped one where its neighbours are: no reorders)
                if (!dw && (!found || (G > 1 && std::strncmp(pd.impl_info_str(), "x64:gemm", 8) == 0)))
                    pick(dnnl::memory::desc(bs, dt::f32, tag::nchw), dnnl::memory::desc(bd, dt::f32, tag::nchw));
                if (!pd.get(true)) throw dnnl::error(dnnl_unimplemented, "no convolution kernel");
                if (band_add && !fused_add) add = false;
                return Context::Band{r0,
                                     r1,
                                     i0,
                                     i1,
                                     dnnl::convolution_forward(pd),
                                     pd.src_desc(),
                                     pd.weights_desc(),
                                     pd.dst_desc(),
                                     pd.scratchpad_desc(),
                                     fused_act};
            };
            // 3x3 stride-1 convolutions: Winograd (oneDNN's F(4x4,3x3)/F(2x2,3x3), 3-5x faster than
            // direct on the VAE's shapes, within 1e-5 of the direct result) on maps of 14x14 pixels or
            // more (on fewer, its transformed kernel, 16/9 or 4x the kernel's size, costs more memory
            // than the few tiles gain). Its transform buffers grow with the map (600 MB for 128
            // channels at 512x512): beyond the budget, the map is cut into bands of rows that fit it,
            // each its own primitive (same kernel), read and written through reorders.
            std::vector<Context::Band> bands;
            bool wino = G == 1 && k->ne[0] == 3 && k->ne[1] == 3 && p[0] == 1 && p[1] == 1 && p[4] == 1 && p[5] == 1 &&
                        c.wino_budget > 0 && dst_d[2] * dst_d[3] >= 196;
            try {
                if (wino) {
                    bands.push_back(make(dnnl::algorithm::convolution_winograd, 0, dst_d[2], add));
                    size_t need = bands[0].scratch.get_size();
                    // else bands of a multiple of 4 rows (F(4x4,3x3)'s tiles) whose scratchpad and
                    // copies fit the budget, from an estimate (the scratchpad grows with the rows)
                    int64_t rows = int64_t(double(dst_d[2]) * double(c.wino_budget) / (double(need) * 1.5)) / 4 * 4;
                    bool fits = need <= c.wino_budget;
                    for (; !fits && rows >= 16; rows = rows * 3 / 4 / 4 * 4) {
                        bands.clear();
                        fits = true;
                        for (int64_t r0 = 0; fits && r0 < dst_d[2]; r0 += rows) {
                            bands.push_back(
                                make(dnnl::algorithm::convolution_winograd, r0, std::min(dst_d[2], r0 + rows), false));
                            const Context::Band& bn = bands.back();
                            fits = bn.scratch.get_size() + bn.src.get_size() + bn.dst.get_size() <= c.wino_budget &&
                                   bn.w == bands.front().w;
                        }
                        if (fits) add = false;  // a band's residual is a copy (sum post-op)
                    }
                    wino = fits;
                }
            } catch (const dnnl::error&) {  // no Winograd kernel for this shape or machine
                wino = false;
            }
            if (!wino) {
                add = res_priv && out_priv;
                bands = {make(dnnl::algorithm::convolution_direct, 0, dst_d[2], add)};
            }
            bt = c.blocked.emplace(key, Context::Blocked{bands, bands[0].w, add}).first;
        }
        Context::Blocked& b = bt->second;
        Context::Plan plan;
        dnnl::memory xm = in_priv ? private_memory(c, x_md, x->data) : dnnl::memory(x_md, c.eng, x->data);
        dnnl::memory ym = out_priv ? private_memory(c, y_md, out) : dnnl::memory(y_md, c.eng, out);
        // a weight's reordered copy is made once and kept (Context::kernels, or the model's SharedKernels, which
        // another session of the model may have reordered it into already); a kernel computed at run time is
        // reordered every run
        bool is_weight = k->buffer && ggml_backend_buffer_get_usage(k->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS;
        SharedKernels* sk = is_weight && c.shared && c.shared->owns(k->buffer) ? c.shared.get() : nullptr;
        dnnl::memory wb;
        if (k16) {
            // converted into the arena below, every run
        } else if (b.w == w_md) {
            wb = dnnl::memory(w_md, c.eng, k->data);
        } else if (is_weight) {
            std::unique_lock<std::mutex> l;
            if (sk) l = std::unique_lock<std::mutex>(sk->m);
            auto& list = (sk ? sk->copies : c.kernels)[k->data];
            auto hit = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == b.w; });
            if (hit != list.end()) {
                wb = hit->second;
            } else {
                dnnl::memory wsrc(w_md, c.eng, k->data);
                wb = dnnl::memory(b.w, c.eng);
                dnnl::reorder(wsrc, wb).execute(c.strm, wsrc, wb);
                c.strm.wait();
                list.emplace_back(b.w, wb);
            }
        } else {
            dnnl::memory wsrc(w_md, c.eng, k->data);
            wb = dnnl::memory(b.w, c.eng);
            plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(wsrc, wb, user_scratchpad())),
                                  {{DNNL_ARG_FROM, wsrc}, {DNNL_ARG_TO, wb}}});
        }
        dnnl::memory rm;
        if (residual)
            rm = res_priv ? private_memory(c, private_layout(dst_d), residual->data)
                          : dnnl::memory(dst_md, c.eng, residual->data);
        // rows [a, b) of a map, where it is
        auto rows = [&](const dnnl::memory& m, int64_t a, int64_t e) {
            dnnl::memory::desc md = m.get_desc();
            dims d = md.dims();
            d[2] = e - a;
            return dnnl::memory(md.submemory_desc(d, {0, 0, a, 0}), c.eng, m.get_data_handle());
        };
        // the temporaries of each band (one at a time), carved from the context's arena at
        // page-aligned offsets: the arena is grown once, before any memory object points into it
        bool whole = b.bands.size() == 1;
        struct Carved {
            bool copy_x, copy_y;
            size_t s_off, x_off, y_off;
        };
        std::vector<Carved> carved;
        size_t most = 0;
        for (const Context::Band& bn : b.bands) {
            Carved cv{!whole || bn.src != x_md, !whole || bn.dst != y_md, 0, 0, 0};
            size_t used = 0;
            auto carve = [&](const dnnl::memory::desc& d, bool need) {
                size_t off = used;
                if (need) used += (d.get_size() + 4095) / 4096 * 4096;
                return off;
            };
            cv.s_off = carve(bn.scratch, true), cv.x_off = carve(bn.src, cv.copy_x),
            cv.y_off = carve(bn.dst, cv.copy_y);
            carved.push_back(cv);
            most = std::max(most, used);
        }
        char* arena = c.reserve(most);
        if (k16) {  // converted to F32 in its plain layout, then reordered to the primitive's when that differs
            size_t wb_bytes = b.w == w_md ? 0 : (b.w.get_size() + 4095) / 4096 * 4096;
            arena = c.reserve(most + wb_bytes + w_md.get_size());
            dnnl::memory kf(w_md, c.eng, arena + most + wb_bytes);
            plan.h = static_cast<const ggml_fp16_t*>(k->data), plan.hf = static_cast<float*>(kf.get_data_handle()),
            plan.hn = ggml_nelements(k);
            wb = b.w == w_md ? kf : dnnl::memory(b.w, c.eng, arena + most);
            if (b.w != w_md)
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(kf, wb, user_scratchpad())),
                                      {{DNNL_ARG_FROM, kf}, {DNNL_ARG_TO, wb}}});
        }
        for (size_t bi = 0; bi < b.bands.size(); ++bi) {
            const Context::Band& bn = b.bands[bi];
            const Carved& cv = carved[bi];
            dnnl::memory bx = cv.copy_x ? dnnl::memory(bn.src, c.eng, arena + cv.x_off) : xm;
            dnnl::memory by = cv.copy_y ? dnnl::memory(bn.dst, c.eng, arena + cv.y_off) : ym;
            if (cv.copy_x) {
                dnnl::memory xs = whole ? xm : rows(xm, bn.i0, bn.i1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(xs, bx, user_scratchpad())),
                                      {{DNNL_ARG_FROM, xs}, {DNNL_ARG_TO, bx}}});
            }
            if (residual && !b.add_residual) {  // for the sum post-op
                dnnl::memory rs = whole ? rm : rows(rm, bn.r0, bn.r1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(rs, by, user_scratchpad())),
                                      {{DNNL_ARG_FROM, rs}, {DNNL_ARG_TO, by}}});
            }
            std::unordered_map<int, dnnl::memory> args = {
                {DNNL_ARG_SRC, bx}, {DNNL_ARG_WEIGHTS, wb}, {DNNL_ARG_DST, by}};
            if (b.add_residual) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = rm;
            if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(b_md, c.eng, bias->data);
            args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(bn.scratch, c.eng, arena + cv.s_off);
            plan.steps.push_back({bn.conv, std::move(args)});
            if (act.kind && !bn.act_fused) {  // in place on the band's output in its layout (padding included)
                dnnl::memory::desc flat(dims{int64_t(bn.dst.get_size() / sizeof(float))}, dt::f32, tag::a);
                dnnl::memory yf(flat, c.eng, by.get_data_handle());
                auto [alg, alpha, beta] = eltwise_of(act);
                dnnl::eltwise_forward::primitive_desc pd(
                    dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, flat, alpha, beta),
                    user_scratchpad(), c.eng);
                plan.steps.push_back({dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, yf}, {DNNL_ARG_DST, yf}}});
            }
            if (cv.copy_y) {
                dnnl::memory ys = whole ? ym : rows(ym, bn.r0, bn.r1);
                plan.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(by, ys, user_scratchpad())),
                                      {{DNNL_ARG_FROM, by}, {DNNL_ARG_TO, ys}}});
            }
        }
        return plan;
    }
    // NCHW runs oneDNN's gemm convolution, whose eltwise post-ops are several times slower than the
    // convolution itself (measured: mobilenet_v2's 1x1 convolutions): the activation runs after it
    auto it = c.convs.find(key);
    if (it == c.convs.end()) {
        auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src_md, w_md, b_md, dst_md,
                                                        strides, dil, pads, pads)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                        dnnl::algorithm::convolution_direct, src_md, w_md, dst_md,
                                                        strides, dil, pads, pads);
        it = c.convs
                 .emplace(key, dnnl::convolution_forward(
                                   dnnl::convolution_forward::primitive_desc(d, user_scratchpad(), c.eng)))
                 .first;
    }
    Context::Plan plan;
    dnnl::memory xm(src_md, c.eng, x->data), ym(dst_md, c.eng, out), wm;
    if (k16) {
        wm = dnnl::memory(w_md, c.eng, c.reserve(w_md.get_size()));
        plan.h = static_cast<const ggml_fp16_t*>(k->data), plan.hf = static_cast<float*>(wm.get_data_handle()),
        plan.hn = ggml_nelements(k);
    } else {
        wm = dnnl::memory(w_md, c.eng, k->data);
    }
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}};
    if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(b_md, c.eng, bias->data);
    plan.steps.push_back({it->second, std::move(args)});
    const float* r = residual ? static_cast<const float*>(residual->data) : nullptr;
    if (act.kind < 3) {  // ReLU, Clip: a pass over the output with the residual's add
        if (act.kind || r) plan.act = act, plan.y = static_cast<float*>(out), plan.r = r, plan.n = ggml_nelements(dst);
        return plan;
    }
    // SiLU, HardSwish, Sigmoid: oneDNN's vectorized eltwise in place, after a binary add of the residual
    dnnl::memory::desc flat(dims{ggml_nelements(dst)}, dt::f32, tag::a);
    dnnl::memory yf(flat, c.eng, out);
    if (r) {
        dnnl::memory rf(flat, c.eng, residual->data);
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, flat, flat, flat),
                                        user_scratchpad(), c.eng);
        plan.steps.push_back({dnnl::binary(pd), {{DNNL_ARG_SRC_0, yf}, {DNNL_ARG_SRC_1, rf}, {DNNL_ARG_DST, yf}}});
    }
    auto [alg, alpha, beta] = eltwise_of(act);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, flat, alpha, beta), user_scratchpad(),
        c.eng);
    plan.steps.push_back({dnnl::eltwise_forward(pd), {{DNNL_ARG_SRC, yf}, {DNNL_ARG_DST, yf}}});
    return plan;
}

inline void conv2d(Context& c, const ggml_tensor* dst, const ggml_tensor* bias, const ggml_tensor* residual,
                   const Activation& act, void* out) {
    int32_t lo, hi;
    std::memcpy(&lo, &act.lo, 4);
    std::memcpy(&hi, &act.hi, 4);
    run_plan(c, dst, {bias, residual}, {act.kind, lo, hi, int64_t(reinterpret_cast<intptr_t>(out))},
             [&] { return conv_plan(c, dst, bias, residual, act, out); });
}

// dst = f(src) on n floats with oneDNN's vectorized eltwise primitive `alg` (in place when src is dst)
inline void run_eltwise(Context& c, dnnl::algorithm alg, float alpha, float beta, const void* src, void* dst,
                        int64_t n) {
    dnnl::memory::desc md(dnnl::memory::dims{n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
    int32_t a_bits, b_bits;
    std::memcpy(&a_bits, &alpha, 4);
    std::memcpy(&b_bits, &beta, 4);
    Context::Key key = {-4, int64_t(alg), n, a_bits, b_bits, run_threads()};
    auto it = c.eltwises.find(key);
    if (it == c.eltwises.end()) {
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, alpha, beta);
        it =
            c.eltwises
                .emplace(key, dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, user_scratchpad(), c.eng)))
                .first;
    }
    dnnl::memory s(md, c.eng, const_cast<void*>(src)), d(md, c.eng, dst);
    execute(c, it->second, {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, d}});
    c.strm.wait();
}

// The activation of is_conv_activation when its convolution ran alone: in place, on the
// convolution's output where it is (NCHW, or private_layout with its padding channels).
inline void activation(Context& c, const ggml_tensor* op) {
    const ggml_tensor* conv = op->view_src;
    dnnl::memory::dims d = {conv->ne[3], conv->ne[2], conv->ne[1], conv->ne[0]};
    float* y = static_cast<float*>(op->data);
    int64_t n = ggml_nelements(op);
    if (conv->op_params[o2g::kOutPrivate] == 1) {
        dnnl::memory m = private_memory(c, private_layout(d), conv->data);
        y = static_cast<float*>(m.get_data_handle()), n = int64_t(m.get_desc().get_size() / sizeof(float));
    }
    Activation a = activation_of(op);
    if (a.kind < 3) return apply_activation(a, y, nullptr, n);
    auto [alg, alpha, beta] = eltwise_of(a);
    run_eltwise(c, alg, alpha, beta, y, y, n);
}

// The residual add of is_conv_residual when its convolution ran alone (in place; either side may
// be in private_layout, see conv2d: a reorder that sums then).
inline void add_residual(Context& c, const ggml_tensor* op) {
    const ggml_tensor* r = op->src[1];
    bool y_priv = op->view_src->op_params[o2g::kOutPrivate] == 1,
         r_priv = op->view_src->op_params[o2g::kResidualPrivate] == 1;
    dnnl::memory::dims d = {op->ne[3], op->ne[2], op->ne[1], op->ne[0]};
    dnnl::memory::desc nchw(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw);
    dnnl::memory rm = r_priv ? private_memory(c, private_layout(d), r->data) : dnnl::memory(nchw, c.eng, r->data);
    dnnl::memory ym = y_priv ? private_memory(c, private_layout(d), op->data) : dnnl::memory(nchw, c.eng, op->data);
    if (y_priv == r_priv)  // one layout: element by element (with the padding channels, if any)
        return apply_activation({}, static_cast<float*>(ym.get_data_handle()),
                                static_cast<const float*>(rm.get_data_handle()),
                                int64_t(ym.get_desc().get_size() / sizeof(float)));
    dnnl::post_ops po;
    po.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    dnnl::reorder(dnnl::reorder::primitive_desc(rm, ym, attr)).execute(c.strm, rm, ym);
    c.strm.wait();
}

}  // namespace o2g_onednn
