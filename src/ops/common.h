// Helpers shared by the op families: shape rules and host evaluators of broadcasting
// elementwise ops.
#pragma once
#include <functional>

#include "lower/layout.h"
#include "lower/lower.h"
#include "ops/op.h"

namespace onnx2ggml::core {

// Effective shape of input i of a broadcasting op (opset < 7 'broadcast'/'axis' attrs applied).
Shape operand_shape(OpCtx& c, int i);
// Output shape of a numpy-broadcasting op over all present inputs.
Shape broadcast_all(OpCtx& c);

using FloatFn = std::function<double(const double*)>;
using IntFn = std::function<int64_t(const int64_t*)>;
// Evaluates an elementwise op over broadcast inputs; integer inputs use `fi` when given.
Tensor eval_elementwise(OpCtx& c, DType out_type, const FloatFn& ff, const IntFn& fi);

inline void infer_same(OpCtx& c) { c.set_out(0, c.dtype(0), c.shape(0)); }

// Device helpers: gather of constant indices along an ONNX axis, and a transpose of any rank
// (a view up to rank 4).
ggml_tensor* gather_axis(LowerCtx& c, ggml_tensor* x, const Shape& s, int axis, const std::vector<int64_t>& indices);
ggml_tensor* transpose_any(LowerCtx& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& perm);
ggml_tensor* gather_flat(LowerCtx& c, ggml_tensor* x, const Shape& s, const std::vector<int64_t>& idx,
                         const Shape& out);

// Input i broadcast to the shape of output 0, contiguous: the operand of the custom
// elementwise kernels (o2g_kernels.h), which take same-shape inputs.
ggml_tensor* expand_to_out(LowerCtx& c, int i);
// Shape-rule check: input i (when present) is an integer tensor of indices.
void require_index(OpCtx& c, int i);
// Device operand check: float32 (or bool held as float) device tensors only.
void require_float(LowerCtx& c, int i);

// Conv on the host: input 0 (x) and a weight of shape ws, with c's attributes, as
// doubles (zero points already subtracted for the integer convolutions); the NC... output.
std::vector<double> conv_host(OpCtx& c, const Shape& ws, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>* bias);
// Conv's output shape for input 0 and a weight of shape ws (checks the attributes).
Shape conv_output_shape(OpCtx& c, const Shape& ws);

// Host data movement: out[e] = in[f(index of e)] (zero where f returns -1), and the flat offset
// of a multi-index with strides st.
Tensor remap(const Tensor& in, const Shape& out, const std::function<int64_t(const std::vector<int64_t>&)>& f);
int64_t flat(const std::vector<int64_t>& idx, const std::vector<int64_t>& st);

// Spatial geometry of Conv and the pools (per spatial dim: input, kernel, strides, dilations,
// pads at begin/end, output), from c's attributes; check_dims checks a per-dim attribute
// (`n` values in [lo, 2^30]).
void check_dims(OpCtx& c, const char* name, const std::vector<int64_t>& v, size_t n, int64_t lo);
struct Geometry {
    int nsp = 0;  // spatial dims
    std::vector<int64_t> in, k, s, d, pb, pe, out;
};
Geometry conv_geometry(OpCtx& c, const std::vector<int64_t>& kernel, bool ceil_mode);
int64_t prod(const std::vector<int64_t>& v);
// Calls f(flat output position, per-dim output index) for every position of an N-d grid.
template <class F>
void for_grid(const std::vector<int64_t>& dims, F f) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t p = 0; p < n; ++p) {
        f(p, idx);
        for (int k = int(dims.size()) - 1; k >= 0; --k) {
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
}

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

}  // namespace onnx2ggml::core
