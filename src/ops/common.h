// Helpers shared by the op families: shape rules and host evaluators of broadcasting
// elementwise ops.
#pragma once
#include <functional>

#include "lower/layout.h"
#include "lower/lower.h"
#include "ops/op.h"

namespace onnx2ggml {

// Effective shape of input i of a broadcasting op (opset < 7 'broadcast'/'axis' attrs applied).
Shape operand_shape(OpCtx& c, int i);
// Output shape of a numpy-broadcasting op over all present inputs.
Shape broadcast_all(OpCtx& c);

using FloatFn = std::function<double(const double*)>;
using IntFn = std::function<int64_t(const int64_t*)>;
// Evaluates an elementwise op over broadcast inputs; integer inputs use `fi` when given.
Tensor eval_elementwise(OpCtx& c, DType out_type, const FloatFn& ff, const IntFn& fi);

inline void infer_same(OpCtx& c) { c.set_out(0, c.dtype(0), c.shape(0)); }

// Device helpers (src/ops/shape.cpp): gather of constant indices along an ONNX axis, and
// a transpose of any rank (a view up to rank 4).
ggml_tensor* gather_axis(LowerCtx& c, ggml_tensor* x, const Shape& s, int axis, const std::vector<int64_t>& indices);
ggml_tensor* transpose_any(LowerCtx& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& perm);
ggml_tensor* gather_flat(LowerCtx& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& idx, const Shape& out);

// Input i broadcast to the shape of output 0, contiguous: the operand of the custom
// elementwise kernels (o2g_kernels.h), which take same-shape inputs.
ggml_tensor* expand_to_out(LowerCtx& c, int i);
// Shape-rule check: input i (when present) is an integer tensor of indices.
void require_index(OpCtx& c, int i);
// Device operand check: float32 (or bool held as float) device tensors only.
void require_float(LowerCtx& c, int i);

// Conv on the host (src/ops/nn.cpp): input 0 (x) and a weight of shape ws, with c's attributes, as
// doubles (zero points already subtracted for the integer convolutions); the NC... output.
std::vector<double> conv_host(OpCtx& c, const Shape& ws, const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>* bias);
// Conv's output shape for input 0 and a weight of shape ws (checks the attributes).
Shape conv_output_shape(OpCtx& c, const Shape& ws);

// Building nodes for ops that rewrite themselves (sequences, control flow): attributes, and an
// Unsqueeze/Squeeze of `x` at `axis` in the form of the graph's opset (axes an input from 13).
Attr int_attr(int64_t v);
Attr ints_attr(std::vector<int64_t> v);
Node axes_node(OpCtx& c, const std::string& op, int x, int64_t axis, int out);

// MatMul's shapes (numpy's matmul rule; MatMul and the integer MatMuls): A as [.., M, K], B as
// [.., K, N] (a 1-D operand promoted), their batch dims broadcast to bo, and the output's shape.
struct MatDims {
    Shape sa, sb, bo, out;
    int64_t M, K, N;
};
MatDims matmul_dims(OpCtx& c, int ia, int ib);
// f(b, ba, bb) for every batch b of the output: the batches of A and B it multiplies (broadcast).
void for_each_matmul_batch(const MatDims& m, const std::function<void(int64_t, int64_t, int64_t)>& f);

// A host tensor's values as doubles.
std::vector<double> to_f64(const Tensor& t);

// Strides of a row-major shape (elements).
std::vector<int64_t> strides_of(const Shape& s);
// A host tensor broadcast (numpy rules) to shape `to` (a copy; `to` must be a broadcast of t's shape).
Tensor broadcast_host(const Tensor& t, const Shape& to);

}  // namespace onnx2ggml
