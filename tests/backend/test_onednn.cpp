// The oneDNN backend (src/backends/onednn/) against ggml's CPU backend, op by op, in the
// style of ggml's test-backend-ops: each case builds a small ggml graph of one pattern the lowering
// emits (the in-place chains the backend fuses into one primitive, the private blocked layouts kept
// between convolutions, strided matrix products, pooling with ceil padding), runs it once with the
// scheduler over {oneDNN, CPU} and once over {CPU} alone, on the same random inputs, and compares.
// Each case also checks that the oneDNN backend took the nodes it is meant to take, so a case
// cannot pass by silently falling back to the CPU backend.
//
// Tolerance: max |oneDNN - CPU| <= 1e-5 * max |CPU| (float32 both sides; the two sum the products of
// a convolution or matrix product in different orders, and GroupNorm's statistics are computed from
// float partial sums by one and per element by the other: ~1e-7 relative is typical).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "o2g_kernels.h"
#include "o2g_onednn.h"

#ifdef O2G_USE_ONEDNN
namespace {

// A case's graph: its inputs (filled with random values) are appended to `ins`, the nodes the
// oneDNN backend must compute to `dnn`; returns the output.
using Build =
    std::function<ggml_tensor*(ggml_context*, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn)>;

struct Result {
    std::vector<std::vector<float>> ys;  // the output of each compute
    int on_dnn = 0, expected_dnn = 0;
};

// true while check() builds its reference graph (ggml's CPU backend alone)
bool g_reference = false;

ggml_tensor* input(ggml_context* ctx, std::vector<ggml_tensor*>& ins, int64_t n0, int64_t n1 = 1, int64_t n2 = 1,
                   int64_t n3 = 1, ggml_type type = GGML_TYPE_F32) {
    ggml_tensor* t = ggml_new_tensor_4d(ctx, type, n0, n1, n2, n3);
    ggml_set_input(t);
    ins.push_back(t);
    return t;
}

// An F16 weight: F16 in the graph under test; in the reference graph an F32 tensor holding the same values (named
// "f16": its random values are rounded to F16), so that the reference computes in F32 what the backend computes
// from the F16 weight converted to F32 (ggml's CPU kernels would round the activations to F16 as well)
ggml_tensor* f16_weight(ggml_context* ctx, std::vector<ggml_tensor*>& ins, int64_t n0, int64_t n1, int64_t n2,
                        int64_t n3) {
    ggml_tensor* t = input(ctx, ins, n0, n1, n2, n3, g_reference ? GGML_TYPE_F32 : GGML_TYPE_F16);
    if (g_reference) ggml_set_name(t, "f16");
    return t;
}

// Builds the graph and computes it once per entry of `threads` (the thread count of both backends then)
Result run(const Build& build, bool onednn, const std::vector<int>& threads = {2}) {
    ggml_init_params ip = {ggml_tensor_overhead() * 512 + ggml_graph_overhead(), nullptr, true};
    ggml_context* ctx = ggml_init(ip);
    std::vector<ggml_tensor*> ins, dnn;
    ggml_tensor* out = build(ctx, ins, dnn);
    ggml_set_output(out);
    ggml_cgraph* gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    ggml_backend_t be = onednn ? o2g_onednn::init(o2g_onednn::reg_device(o2g_onednn::reg(), 0), nullptr) : nullptr;
    if (be) o2g_onednn::set_n_threads(be, 2);
    ggml_backend_t backends[2] = {be ? be : cpu, cpu};
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, be ? 2 : 1, 512, false, true);
    EXPECT_TRUE(ggml_backend_sched_reserve(sched, gf));
    o2g_onednn::set_compute_bytes(be, sched);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
    // the same values on both runs, set before every compute (the allocator may reuse an input's memory once read)
    auto fill = [&] {
        for (size_t i = 0; i < ins.size(); ++i) {
            std::mt19937 rng(uint32_t(1234 + i));
            std::uniform_real_distribution<float> u(-1.f, 1.f);
            std::vector<float> v(size_t(ggml_nelements(ins[i])));
            for (float& x : v) x = u(rng);
            if (ins[i]->type == GGML_TYPE_F16) {
                std::vector<ggml_fp16_t> h(v.size());
                ggml_fp32_to_fp16_row(v.data(), h.data(), int64_t(v.size()));
                ggml_backend_tensor_set(ins[i], h.data(), 0, ggml_nbytes(ins[i]));
                continue;
            }
            if (std::string(ins[i]->name) == "f16")
                for (float& x : v) x = ggml_fp16_to_fp32(ggml_fp32_to_fp16(x));
            ggml_backend_tensor_set(ins[i], v.data(), 0, ggml_nbytes(ins[i]));
        }
    };
    Result r;
    for (int n : threads) {
        fill();
        if (be) o2g_onednn::set_n_threads(be, n);
        ggml_backend_cpu_set_n_threads(cpu, n);
        EXPECT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        r.ys.emplace_back(size_t(ggml_nelements(out)));
        ggml_backend_tensor_get(out, r.ys.back().data(), 0, ggml_nbytes(out));
    }
    r.expected_dnn = int(dnn.size());
    for (ggml_tensor* t : dnn) r.on_dnn += be && ggml_backend_sched_get_tensor_backend(sched, t) == be;
    ggml_backend_sched_free(sched);
    if (be) ggml_backend_free(be);
    ggml_backend_free(cpu);
    ggml_free(ctx);
    return r;
}

// The oneDNN backend's output of every compute (one per entry of `threads`) against ggml's CPU backend's
void check(const Build& build, const std::vector<int>& threads = {2}) {
    Result d = run(build, true, threads);
    g_reference = true;
    Result c = run(build, false);
    g_reference = false;
    EXPECT_EQ(d.on_dnn, d.expected_dnn) << "nodes the oneDNN backend did not take";
    const std::vector<float>& ref = c.ys[0];
    for (size_t k = 0; k < d.ys.size(); ++k) {
        const std::vector<float>& y = d.ys[k];
        ASSERT_EQ(y.size(), ref.size());
        double err = 0, range = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_TRUE(std::isfinite(y[i]) && std::isfinite(ref[i]))
                << "element " << i << ": " << y[i] << " vs " << ref[i] << " (compute " << k << ")";
            err = std::max(err, std::fabs(double(y[i]) - double(ref[i])));
            range = std::max(range, std::fabs(double(ref[i])));
        }
        EXPECT_GT(range, 0.0);
        EXPECT_LE(err, 1e-5 * range) << "max abs error " << err << ", max |ref| " << range << " (compute " << k
                                     << " on " << threads[k] << " threads)";
    }
}

// conv (+ bias in place) (+ activation in place), as lower_conv and activation_in_place emit them
struct Conv {
    int64_t W, H, C, N, OC, K;
    int s = 1, p = 1, d = 1;
    bool depthwise = false, bias = true;
    int act = 1;       // 0 none, 1 ReLU, 2 CLAMP(0, 6)
    bool f16 = false;  // an F16 kernel (--weights f16)
};

ggml_tensor* conv(ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn, const Conv& q,
                  ggml_tensor* x, ggml_tensor** root = nullptr) {
    ggml_tensor* k = q.f16 ? f16_weight(ctx, ins, q.K, q.K, q.depthwise ? 1 : q.C, q.depthwise ? q.C : q.OC)
                           : input(ctx, ins, q.K, q.K, q.depthwise ? 1 : q.C, q.depthwise ? q.C : q.OC);
    ggml_tensor* y = q.depthwise ? ggml_conv_2d_dw_direct(ctx, k, x, q.s, q.s, q.p, q.p, q.d, q.d)
                                 : ggml_conv_2d_direct(ctx, k, x, q.s, q.s, q.p, q.p, q.d, q.d);
    if (root) *root = y;
    dnn.push_back(y);
    if (q.bias) dnn.push_back(y = ggml_add_inplace(ctx, y, input(ctx, ins, 1, 1, q.depthwise ? q.C : q.OC, 1)));
    if (q.act == 1) dnn.push_back(y = ggml_relu_inplace(ctx, y));
    if (q.act == 2) dnn.push_back(y = ggml_clamp_inplace(ctx, y, 0.f, 6.f));
    return y;
}

Build conv_case(Conv q) {
    return [q](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        return conv(ctx, ins, dnn, q, input(ctx, ins, q.W, q.H, q.C, q.N));
    };
}

}  // namespace

TEST(OneDNN, ConvBiasRelu) { check(conv_case({13, 11, 5, 2, 7, 3})); }
TEST(OneDNN, ConvStride2BiasClamp) { check(conv_case({17, 15, 8, 1, 16, 3, 2, 1, 1, false, true, 2})); }
TEST(OneDNN, ConvDilatedNoBias) { check(conv_case({19, 14, 6, 1, 9, 3, 1, 2, 2, false, false, 0})); }
TEST(OneDNN, Conv1x1OddChannels) { check(conv_case({9, 7, 17, 1, 23, 1, 1, 0})); }
TEST(OneDNN, DepthwiseBiasRelu) { check(conv_case({12, 10, 17, 1, 17, 3, 1, 1, 1, true})); }
TEST(OneDNN, DepthwiseStride2Clamp) { check(conv_case({15, 15, 24, 1, 24, 3, 2, 1, 1, true, true, 2})); }
// F16 kernels, converted to F32 every run: oneDNN's gemm on NCHW (a small map), blocked layouts (a large map:
// Winograd for the 3x3 one, direct for the strided one) and a depthwise one
TEST(OneDNN, ConvF16Kernel) { check(conv_case({13, 11, 5, 2, 7, 3, 1, 1, 1, false, true, 1, true})); }
TEST(OneDNN, ConvF16KernelBlocked) {
    check(conv_case({60, 58, 16, 1, 32, 3, 1, 1, 1, false, true, 1, true}));
    check(conv_case({61, 57, 16, 1, 24, 3, 2, 1, 1, false, false, 0, true}));
}
TEST(OneDNN, DepthwiseF16Kernel) { check(conv_case({15, 15, 24, 1, 24, 3, 2, 1, 1, true, true, 2, true})); }

// conv + bias + residual (o2g::conv_residual: the sum post-op) + ReLU, as residual_add emits it
TEST(OneDNN, ConvBiasResidualRelu) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 10, 9, 12, 1);
        ggml_tensor* r = input(ctx, ins, 10, 9, 20, 1);
        ggml_tensor* y = conv(ctx, ins, dnn, {10, 9, 12, 1, 20, 3, 1, 1, 1, false, true, 0}, x);
        dnn.push_back(y = o2g::conv_residual(ctx, ggml_add_inplace(ctx, y, r)));
        dnn.push_back(y = ggml_relu_inplace(ctx, y));
        return y;
    });
}

// convolutions (and a max pooling) keeping oneDNN's private layout between them (o2g::conv_chain),
// with channel counts that are, and are not, multiples of the channel block (padded, or NHWC)
TEST(OneDNN, ChainPrivateLayouts) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor *c1, *c2, *c3;
        ggml_tensor* x = input(ctx, ins, 13, 11, 3, 1);
        ggml_tensor* y = conv(ctx, ins, dnn, {13, 11, 3, 1, 24, 3}, x, &c1);
        y = conv(ctx, ins, dnn, {13, 11, 24, 1, 17, 3}, y, &c2);
        o2g::conv_chain(ctx, c1, c2);
        // 13x11 -> 6x5, every window inside the input (the lowering chains only such poolings: pool.cpp)
        ggml_tensor* pool = ggml_pool_2d(ctx, y, GGML_OP_POOL_MAX, 3, 3, 2, 2, 0, 0);
        dnn.push_back(pool);
        o2g::conv_chain(ctx, c2, pool);
        y = conv(ctx, ins, dnn, {6, 5, 17, 1, 32, 3}, pool, &c3);
        o2g::conv_chain(ctx, pool, c3);
        ggml_tensor* c4;
        y = conv(ctx, ins, dnn, {6, 5, 32, 1, 8, 1, 1, 0}, y, &c4);  // c3's output read in its layout too
        o2g::conv_chain(ctx, c3, c4);
        return y;
    });
}

// dilated convolutions between convolutions in the private layout (deeplabv3's ASPP: rates 12 and 24 on a 33x33
// map): oneDNN has no kernel for them in its blocked layout; they run in the layout it picks (NHWC brgconv),
// read and written through reorders
TEST(OneDNN, DilatedConvInPrivateLayouts) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor *c1, *c2, *c3;
        ggml_tensor* x = input(ctx, ins, 17, 15, 8, 1);
        ggml_tensor* y = conv(ctx, ins, dnn, {17, 15, 8, 1, 32, 1, 1, 0}, x, &c1);
        y = conv(ctx, ins, dnn, {17, 15, 32, 1, 48, 3, 1, 6, 6}, y, &c2);
        o2g::conv_chain(ctx, c1, c2);
        y = conv(ctx, ins, dnn, {17, 15, 48, 1, 16, 3, 1, 12, 12, false, true, 0}, y, &c3);
        o2g::conv_chain(ctx, c2, c3);
        return y;
    });
}

// A squeeze-excitation product (ops/elementwise.cpp channel_product): MUL of a convolution's output by one value
// per channel (and per batch, or one for all), reading and writing the private layout or NCHW as o2g::conv_chain
// marks either side, for channel counts that are a multiple of the block, padded to one, or NHWC; and a
// BatchNormalization's (ops/norm.cpp): the same with a per-channel ADD and a ReLU or Clip in place on it
TEST(OneDNN, ChannelProduct) {
    for (int affine = 0; affine < 3; ++affine)  // 0: the product alone, 1: + bias + ReLU, 2: + bias + Clip(0, 6)
        for (int64_t C : {48, 24, 8})
            for (int mode = 0; mode < 3; ++mode)  // 0: private in and out, 1: NCHW in, 2: NCHW out (a graph output)
                check([C, mode, affine](ggml_context* ctx, std::vector<ggml_tensor*>& ins,
                                        std::vector<ggml_tensor*>& dnn) {
                    ggml_tensor *c1, *c2;
                    ggml_tensor* y = conv(ctx, ins, dnn, {9, 7, 5, 2, C, 3}, input(ctx, ins, 9, 7, 5, 2), &c1);
                    ggml_tensor* p = ggml_mul(ctx, y, input(ctx, ins, 1, 1, C, mode == 1 ? 1 : 2));
                    dnn.push_back(p);
                    if (mode != 1) o2g::conv_chain(ctx, c1, p);
                    ggml_tensor* q = p;
                    if (affine) dnn.push_back(q = ggml_add_inplace(ctx, q, input(ctx, ins, 1, 1, C, 1)));
                    if (affine == 1) dnn.push_back(q = ggml_relu_inplace(ctx, q));
                    if (affine == 2) dnn.push_back(q = ggml_clamp_inplace(ctx, q, 0.f, 6.f));
                    if (mode == 2) return q;
                    y = conv(ctx, ins, dnn, {9, 7, C, 2, 16, 1, 1, 0}, q, &c2);
                    o2g::conv_chain(ctx, p, c2);
                    return y;
                });
}

// GROUP_NORM + per-channel affine (MUL, ADD in place) + SiLU in place, as lower_group_norm and the
// SiLU fusion emit them; 30 channels in 8 groups: ggml's groups of ceil(30 / 8) = 4, the last of 2
TEST(OneDNN, GroupNormAffineSilu) {
    for (int64_t C : {32, 30})
        check([C](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
            ggml_tensor* x = input(ctx, ins, 7, 6, C, 2);
            ggml_tensor* y = ggml_group_norm(ctx, x, 8, 1e-5f);
            dnn.push_back(y);
            dnn.push_back(y = ggml_mul_inplace(ctx, y, input(ctx, ins, 1, 1, C, 1)));
            dnn.push_back(y = ggml_add_inplace(ctx, y, input(ctx, ins, 1, 1, C, 1)));
            dnn.push_back(y = ggml_silu_inplace(ctx, y));
            return y;
        });
}

// MUL_MAT reading both operands through their strides: a permuted (attention's K^T-like) view of
// src0 with batch dims, src0 broadcast over src1's batch, odd sizes
TEST(OneDNN, StridedMatMul) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* a = input(ctx, ins, 19, 3, 13, 2);      // [K, heads, N, batch]
        ggml_tensor* av = ggml_permute(ctx, a, 0, 2, 1, 3);  // [K, N, heads, batch], strided
        ggml_tensor* b = input(ctx, ins, 19, 11, 3, 2);      // [K, M, heads, batch]
        ggml_tensor* y = ggml_mul_mat(ctx, av, b);
        dnn.push_back(y);
        ggml_tensor* w = input(ctx, ins, 13, 5);  // broadcast over the batch dims
        ggml_tensor* z = ggml_mul_mat(ctx, w, y);
        dnn.push_back(z);
        return z;
    });
}

// Matrix-vector products (at most 4 rows of src1, o2g_onednn::gemv): a fully connected layer at batch 1, three
// rows against a permuted src0 with batch dims, and src0 broadcast over src1's batch
TEST(OneDNN, MatrixVector) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 301);
        ggml_tensor* y = ggml_mul_mat(ctx, input(ctx, ins, 301, 67), x);  // [67]
        dnn.push_back(y);
        ggml_tensor* a = input(ctx, ins, 67, 3, 13, 2);      // [K, heads, N, batch]
        ggml_tensor* av = ggml_permute(ctx, a, 0, 2, 1, 3);  // [K, N, heads, batch], strided
        ggml_tensor* b = ggml_add(ctx, input(ctx, ins, 67, 3, 3, 2), y);
        dnn.push_back(b);
        ggml_tensor* z = ggml_mul_mat(ctx, av, b);  // [13, 3, 3, 2]
        dnn.push_back(z);
        ggml_tensor* u = ggml_mul_mat(ctx, input(ctx, ins, 13, 9), z);  // broadcast over the batch dims
        dnn.push_back(u);
        return u;
    });
}

// CLAMP that is no convolution's activation (a HardSigmoid's SCALE + CLAMP): oneDNN's clip eltwise
TEST(OneDNN, Clamp) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = ggml_scale_bias(ctx, input(ctx, ins, 37, 5, 3), 1.0f / 6.0f, 0.5f);
        dnn.push_back(x);
        ggml_tensor* y = ggml_clamp(ctx, x, 0.0f, 1.0f);
        dnn.push_back(y);
        return y;
    });
}

// POOL_2D with ggml's symmetric padding standing for ONNX's ceil_mode (a right padding that gives
// ggml's output size), max and average
TEST(OneDNN, PoolCeilPadding) {
    for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG})
        check([op](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
            ggml_tensor* x = input(ctx, ins, 13, 13, 5, 2);
            ggml_tensor* y = ggml_pool_2d(ctx, x, op, 3, 3, 2, 2, 1, 1);  // 13 -> 7 (the last window over the edge)
            dnn.push_back(y);
            return y;
        });
}

// UPSCALE (ggml_interpolate, what ONNX Resize lowers to): nearest, bilinear and bilinear with align_corners,
// up and down, on odd sizes and several channels and batches (nearest on dims 2 and 3)
TEST(OneDNN, Upscale) {
    const uint32_t modes[] = {GGML_SCALE_MODE_NEAREST, GGML_SCALE_MODE_BILINEAR,
                              GGML_SCALE_MODE_BILINEAR | GGML_SCALE_FLAG_ALIGN_CORNERS};
    const int64_t sizes[][4] = {{65, 33, 520, 264}, {13, 9, 7, 20}, {1, 5, 6, 1}};
    for (uint32_t mode : modes)
        for (auto& sz : sizes)
            check([&](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
                ggml_tensor* x = input(ctx, ins, sz[0], sz[1], 3, 2);
                ggml_tensor* y = ggml_interpolate(ctx, x, sz[2], sz[3], 3, 2, mode);
                dnn.push_back(y);
                return y;
            });
}

// A grouped convolution as lower_conv emits it (IM2COL -> batched MUL_MAT -> CONT, marked by o2g::grouped_conv):
// the oneDNN backend computes the CONT as one grouped convolution in the layouts it picks (16 channels per
// group: its blocked JIT kernel; 8 and 3: others) and skips the IM2COL and MUL_MAT
TEST(OneDNN, GroupedConv) {
    struct Case {
        int64_t W, H, C, M, group, K, N;
        int s, p;
    };
    for (Case q :
         {Case{14, 12, 64, 64, 4, 3, 1, 1, 1}, Case{15, 15, 48, 48, 6, 3, 2, 2, 1}, Case{9, 11, 12, 24, 4, 1, 1, 1, 0}})
        check([q](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
            ggml_tensor* x = input(ctx, ins, q.W, q.H, q.C, q.N);
            int64_t cg = q.C / q.group, mg = q.M / q.group;
            ggml_tensor* w = input(ctx, ins, q.K, q.K, cg, q.M);
            ggml_tensor* xg = ggml_reshape_4d(ctx, x, q.W, q.H, cg, q.group * q.N);
            ggml_tensor* col = ggml_im2col(ctx, w, xg, q.s, q.s, q.p, q.p, 1, 1, true, GGML_TYPE_F32);
            int64_t Kg = q.K * q.K * cg, OW = col->ne[1], OH = col->ne[2];
            ggml_tensor* cols = ggml_reshape_4d(ctx, col, Kg, OW * OH, q.group, q.N);
            ggml_tensor* r = ggml_mul_mat(ctx, ggml_reshape_4d(ctx, w, Kg, mg, q.group, 1), cols);
            r = ggml_permute(ctx, r, 1, 0, 2, 3);
            ggml_tensor* y = o2g::grouped_conv(ctx, ggml_cont_4d(ctx, r, OW, OH, q.M, q.N), x, w, int(q.group));
            dnn.push_back(y);
            return y;
        });
}

// SIGMOID, GELU_ERF, SILU, HARDSWISH, RELU, TANH, EXP, ABS, NEG, SQR, SQRT and SCALE as oneDNN's eltwise primitive
TEST(OneDNN, Eltwise) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 1001, 3);
        ggml_tensor* y = ggml_sigmoid(ctx, x);
        dnn.push_back(y);
        ggml_tensor* z = ggml_gelu_erf(ctx, y);
        dnn.push_back(z);
        return z;
    });
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = ggml_scale(ctx, input(ctx, ins, 999, 4), 6.0f);  // across HardSwish's [-3, 3] knees
        ggml_tensor* y = ggml_hardswish(ctx, x);
        dnn.push_back(y);
        ggml_tensor* z = ggml_silu(ctx, x);
        dnn.push_back(z);
        return ggml_add(ctx, y, z);
    });
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* y = ggml_relu(ctx, input(ctx, ins, 1003, 3));  // a ReLU between nodes (densenet's)
        dnn.push_back(y);
        return y;
    });
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        // GPT-2's GELU written out (tanh), then EXP, ABS, NEG, SQR, SQRT and SCALE with a bias
        ggml_tensor* x = input(ctx, ins, 1005, 3);
        ggml_tensor* a = ggml_scale(ctx, x, 2.5f);
        ggml_tensor* b = ggml_tanh(ctx, a);
        ggml_tensor* e = ggml_exp(ctx, b);
        ggml_tensor* f = ggml_neg(ctx, ggml_abs(ctx, a));
        ggml_tensor* g = ggml_sqrt(ctx, ggml_sqr(ctx, f));
        ggml_tensor* h = ggml_scale_bias(ctx, g, -0.5f, 0.25f);
        for (ggml_tensor* t : {a, b, e, f, f->src[0], g, g->src[0], h}) dnn.push_back(t);
        return ggml_add(ctx, ggml_add(ctx, e, f), h);
    });
}

// ADD/SUB/MUL/DIV of one value per row (squeeze-excitation scales), the values broadcast over rows, planes
// and batches from [1, 6, 3, 1] and [1, 6, 1, 2]; then of whole rows: a bias over rows [37], a plane
// [37, 6, 1, 2], the same shape (a residual sum), and in place
TEST(OneDNN, Binary) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 37, 6, 3, 2);
        ggml_tensor* s = input(ctx, ins, 1, 6, 3, 1);
        ggml_tensor* t = ggml_exp(ctx, input(ctx, ins, 1, 6, 1, 2));  // positive: the divisor
        ggml_tensor* a = ggml_mul(ctx, x, s);
        ggml_tensor* b = ggml_add(ctx, a, t);
        ggml_tensor* c = ggml_sub(ctx, b, s);
        ggml_tensor* d = ggml_div(ctx, c, t);
        ggml_tensor* e = ggml_add(ctx, d, input(ctx, ins, 37));
        ggml_tensor* f = ggml_mul(ctx, e, input(ctx, ins, 37, 6, 1, 2));
        ggml_tensor* g = ggml_sub(ctx, f, x);
        ggml_tensor* h = ggml_div_inplace(ctx, g, ggml_exp(ctx, input(ctx, ins, 37, 6, 3, 2)));
        // src0 a view with strided rows (dims 1 and 2 swapped, dims 2 and 3)
        ggml_tensor* i = ggml_div(ctx, ggml_permute(ctx, h, 0, 2, 1, 3), input(ctx, ins, 37, 3, 1, 1));
        ggml_tensor* j = ggml_sub(ctx, ggml_permute(ctx, i, 0, 1, 3, 2), input(ctx, ins, 37, 3, 1, 6));
        for (ggml_tensor* n : {a, b, c, d, e, f, g, h, i, j}) dnn.push_back(n);
        return j;
    });
}
// A channel Concat as onnx2ggml lowers it: a fresh tensor and each part set in place into its slot (the
// second at an offset of three planes)
TEST(OneDNN, SetSlots) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* a = ggml_relu(ctx, input(ctx, ins, 13, 11, 3));
        ggml_tensor* b = ggml_relu(ctx, input(ctx, ins, 13, 11, 5));
        ggml_tensor* acc = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 13, 11, 8);
        ggml_tensor* s1 = ggml_set_inplace(ctx, acc, a, acc->nb[1], acc->nb[2], acc->nb[3], 0);
        ggml_tensor* s2 = ggml_set_inplace(ctx, s1, b, acc->nb[1], acc->nb[2], acc->nb[3], 3 * acc->nb[2]);
        for (ggml_tensor* n : {a, b, s1, s2}) dnn.push_back(n);
        return ggml_scale(ctx, s2, 2.0f);
    });
}
// A channel Concat of two convolution branches whose SETs are marked o2g::conv_into_slot (squeezenet's fire
// module): the convolutions write into their slots; a third part, not marked, is copied
TEST(OneDNN, ConvIntoConcatSlots) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 13, 11, 8, 1);
        ggml_tensor* a = conv(ctx, ins, dnn, {13, 11, 8, 1, 16, 1, 1, 0}, x);
        ggml_tensor* b = conv(ctx, ins, dnn, {13, 11, 8, 1, 16, 3}, x);
        ggml_tensor* r = ggml_relu(ctx, input(ctx, ins, 13, 11, 5));
        ggml_tensor* acc = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 13, 11, 37, 1);
        ggml_tensor* s1 =
            o2g::conv_into_slot(ctx, ggml_set_inplace(ctx, acc, a, acc->nb[1], acc->nb[2], acc->nb[3], 0));
        ggml_tensor* s2 =
            o2g::conv_into_slot(ctx, ggml_set_inplace(ctx, s1, b, acc->nb[1], acc->nb[2], acc->nb[3], 16 * acc->nb[2]));
        ggml_tensor* s3 = ggml_set_inplace(ctx, s2, r, acc->nb[1], acc->nb[2], acc->nb[3], 32 * acc->nb[2]);
        for (ggml_tensor* n : {s1, s2, r, s3}) dnn.push_back(n);
        return ggml_scale(ctx, s3, 2.0f);
    });
}
// Transposes made contiguous (CONT of a permuted view): rows (ne[0] stays innermost), 32x32 tiles against
// the dim contiguous in memory (ne[0] moved to dims 1, 2 and 3; sizes not multiples of 32), an element
// gather (a strided column whose contiguous dim has size 1), and a ggml_cont_4d that reshapes as it copies
TEST(OneDNN, StridedCopies) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 37, 45, 6, 2);
        ggml_tensor* rows = ggml_cont(ctx, ggml_permute(ctx, x, 0, 2, 1, 3));
        ggml_tensor* t1 = ggml_cont(ctx, ggml_permute(ctx, x, 1, 0, 2, 3));
        ggml_tensor* t2 = ggml_cont(ctx, ggml_permute(ctx, x, 2, 0, 1, 3));
        ggml_tensor* t3 = ggml_cont_4d(ctx, ggml_permute(ctx, x, 3, 1, 2, 0), 2 * 45, 6, 37, 1);
        ggml_tensor* col = ggml_view_3d(ctx, x, 1, 45, 6, x->nb[1], x->nb[2], 5 * x->nb[0]);
        ggml_tensor* gather = ggml_cont(ctx, ggml_permute(ctx, col, 2, 0, 1, 3));
        ggml_tensor* sum = nullptr;
        for (ggml_tensor* t : {rows, t1, t2, t3}) {
            dnn.push_back(t);
            ggml_tensor* flat = ggml_reshape_1d(ctx, t, ggml_nelements(t));
            sum = sum ? ggml_add(ctx, ggml_scale(ctx, sum, 3.0f), flat) : flat;
        }
        dnn.push_back(gather);
        return ggml_concat(ctx, sum, ggml_reshape_1d(ctx, gather, ggml_nelements(gather)), 0);
    });
}
// Attention's softmax (plain; scaled with a mask broadcast over heads and batches, the mask rows more than
// the scores', as ggml allows) and LayerNorm's normalization (ggml_norm) over rows
TEST(OneDNN, SoftmaxNorm) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 77, 50, 4, 2);
        ggml_tensor* a = ggml_soft_max(ctx, x);
        ggml_tensor* b = ggml_soft_max_ext(ctx, x, input(ctx, ins, 77, 53, 2, 1), 0.125f, 0.0f);
        ggml_tensor* n = ggml_norm(ctx, ggml_add(ctx, x, ggml_scale(ctx, input(ctx, ins, 77, 50, 4, 2), 5.0f)), 1e-5f);
        for (ggml_tensor* t : {a, b, n}) dnn.push_back(t);
        return ggml_add(ctx, ggml_add(ctx, ggml_scale(ctx, a, 10.0f), ggml_scale(ctx, b, 7.0f)), n);
    });
}
// Row means (ggml_mean: a ReduceMean over the last axis, a CNN's global average pooling), of a contiguous tensor
// and of a view whose rows are strided (part of each row of x)
TEST(OneDNN, Mean) {
    check([](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
        ggml_tensor* x = input(ctx, ins, 49, 37, 3, 2);
        ggml_tensor* a = ggml_mean(ctx, x);
        ggml_tensor* b = ggml_mean(ctx, ggml_view_4d(ctx, x, 30, 37, 3, 2, x->nb[1], x->nb[2], x->nb[3], 4 * x->nb[0]));
        for (ggml_tensor* t : {a, b}) dnn.push_back(t);
        return ggml_concat(ctx, ggml_reshape_1d(ctx, a, ggml_nelements(a)), ggml_reshape_1d(ctx, b, ggml_nelements(b)),
                           0);
    });
}
// One graph computed on 2, 1, 2 and 1 threads (the default thread count follows the cores free at each run,
// o2g_runtime.h): each compute runs primitives made for its own count (blocked convolutions with a private layout
// between them, a pooling, a matrix product, all above the one-thread size), and every result is right
TEST(OneDNN, ThreadCountChangingBetweenComputes) {
    check(
        [](ggml_context* ctx, std::vector<ggml_tensor*>& ins, std::vector<ggml_tensor*>& dnn) {
            ggml_tensor *c1, *c2;
            ggml_tensor* x = input(ctx, ins, 60, 58, 16, 1);
            ggml_tensor* y = conv(ctx, ins, dnn, {60, 58, 16, 1, 32, 3}, x, &c1);
            y = conv(ctx, ins, dnn, {60, 58, 32, 1, 32, 3}, y, &c2);
            o2g::conv_chain(ctx, c1, c2);
            ggml_tensor* pool = ggml_pool_2d(ctx, y, GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);  // 30x29
            dnn.push_back(pool);
            ggml_tensor* w = input(ctx, ins, 30, 48);
            dnn.push_back(y = ggml_mul_mat(ctx, w, ggml_reshape_2d(ctx, pool, 30, 29 * 32)));
            return y;
        },
        {2, 1, 2, 1});
}

#else
TEST(OneDNN, NotBuilt) { GTEST_SKIP() << "built without oneDNN (ONNX2GGML_ONEDNN=OFF)"; }
#endif
