// onnx2ggml's oneDNN backend for ggml: the fast CPU path for convolutions, matrix products,
// pooling, GroupNorm, and the light ops between them (broadcast arithmetic, elementwise functions,
// softmax, LayerNorm's normalization, strided copies, Concat's slots, row means, nearest/bilinear upscaling) so that a model's graph stays one
// scheduler split (see dev_supports_op; docs/architecture.md tells which and why).
//
// Modelled on ggml's own BLAS backend: a ggml backend over host memory (it shares the CPU
// buffer type, so no tensor is ever copied between it and the CPU backend) that declares in
// supports_op the nodes it takes; ggml_backend_sched sends every other node to ggml's CPU
// backend. It takes GGML_OP_CONV_2D and GGML_OP_CONV_2D_DW (ggml_conv_2d_direct and
// ggml_conv_2d_dw_direct: F32 input and kernel), with the
// in-place per-channel bias ADD that follows it in onnx2ggml's lowering, and runs the pair as one
// oneDNN direct convolution with bias on the tensors in place (NCHW activations and OIHW kernels
// are exactly ggml's [W,H,C,N] and [KW,KH,IC,OC] layouts: no reorder, no second copy of the
// weights; a ReLU/CLAMP written in place on the output becomes the primitive's post-op), and GGML_OP_MUL_MAT as a
// oneDNN matmul reading both operands through their strides. Primitives are created once per convolution shape and
// cached across runs. oneDNN and ggml's CPU backend both run on the OpenMP runtime; set_n_threads sets the OpenMP
// thread count, so the two never fight over the cores.
//
// Header-only: onnx2ggml's runtime includes it, and `compile` writes this folder into every generated
// program (OUTDIR/onednn/, built with -DO2G_ONEDNN=ON). Needs ggml's internal ggml-backend-impl.h (ggml/src).
//
// The implementation, by primitive family, in this folder: context.h, patterns.h, plan.h, conv.h, binary.h,
// matmul.h, copy.h, norm.h, pool.h, resize.h, unary.h, backend.h (each includes the one before it).
#pragma once
#ifdef O2G_USE_ONEDNN
#include "backend.h"
#endif  // O2G_USE_ONEDNN
