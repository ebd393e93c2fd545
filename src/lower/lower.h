// Lowering of one node to ggml, through the Builder. The helpers here are the only
// code that converts layouts, broadcasts, or makes tensors contiguous.
#pragma once
#include <vector>

#include "lower/builder.h"
#include "lower/layout.h"
#include "ops/op.h"

namespace onnx2ggml::core {

struct LowerState {
    Builder& b;
    std::vector<ggml_tensor*> vmap;                          // value id -> ggml tensor
    std::unordered_map<int, ggml_tensor*> weight_of;         // value id -> weight tensor
    std::unordered_map<ggml_tensor*, ggml_tensor*> cont_of;  // one ggml_cont per non-contiguous tensor
    std::vector<int> uses;                                   // value id -> readers (node inputs, graph outputs)
    // A convolution's or GroupNorm's output and the in-place ops on it (bias, residual sum,
    // ReLU/Clip; affine, SiLU): the value that holds it now, and the readers of a value that can
    // read it in a backend's private layout (see LowerCtx::reads_private).
    std::unordered_map<const ggml_tensor*, int> fused_value;
    std::unordered_map<int, std::vector<ggml_tensor*>> private_readers;
    // A channel Concat of such outputs (LowerCtx::joins_private): its output -> the producers of its parts
    std::unordered_map<const ggml_tensor*, std::vector<ggml_tensor*>> private_concat;
    // Concats whose inputs begin with all of another Concat's (densenet's dense blocks: each layer
    // concatenates every earlier layer's output): the node -> the Concat with the most inputs that
    // extends it (ops/concat.cpp), and that Concat's output as built so far (its first `parts`
    // inputs copied in, up to byte `offset`): the others are views of its prefix
    struct PrefixConcat {
        ggml_tensor* acc = nullptr;
        size_t parts = 0, offset = 0;
    };
    std::unordered_map<int, int> concat_target;
    bool concat_targets_found = false;
    std::unordered_map<int, PrefixConcat> prefix_concat;
};

class LowerCtx : public OpCtx {
public:
    LowerCtx(Graph& g, int node, LowerState& st) : OpCtx(g, node), b(st.b), st_(st) {}
    Builder& b;
    LowerState& state() { return st_; }  // what lowerings share across nodes

    ggml_tensor* x(int i);  // input i as a ggml tensor (F32 unless int input)
    ggml_tensor* xc(int i) { return cont(x(i)); }
    // Whether this node is the only reader of input i (not a graph output either): its lowering
    // may then overwrite it in place.
    // (never under Builder::no_inplace: every value then keeps its own memory)
    bool sole_reader(int i) { return !b.no_inplace && has(i) && readers(node().inputs[i]) == 1; }
    int readers(int value) const { return st_.uses[size_t(value)]; }
    // Whether output i is a graph output (which must own its memory: no in-place view).
    bool graph_output(int i);
    // The convolution (GGML_OP_CONV_2D/_DW, or o2g::grouped_conv's CONT; F32) whose whole output input i
    // is, in place: the convolution's own value or the latest in-place op on it (overwrote); else nullptr.
    ggml_tensor* conv_behind(int i) { return fused_behind(i, Fused::Conv); }
    // The same for a GGML_OP_GROUP_NORM (F32) whose output input i is, in place (any shape of its
    // elements: GroupNorm's lowering reshapes it back to the input's).
    ggml_tensor* norm_behind(int i) { return fused_behind(i, Fused::Norm); }
    // The same for a channel product (a MUL by one value per channel: channel_product in ops/elementwise.cpp,
    // BatchNormalization's scale) that overwrote registered: an activation may follow it in place.
    ggml_tensor* product_behind(int i) { return fused_behind(i, Fused::Product); }
    // Output `out` holds `node`'s output now (a convolution's or GroupNorm's), overwritten in place
    // (a bias, a ReLU, a residual sum, an affine, a SiLU): the backends fuse such chains.
    void overwrote(ggml_tensor* node, int out = 0) { st_.fused_value[node] = this->node().outputs[size_t(out)]; }
    // `reader` (a convolution or pooling reading input i, or a residual add summing it) can
    // read input i in a backend's private layout. Once every reader of a convolution's (or max
    // pooling's, see overwrote) output has said so, the producer and its readers are marked
    // (o2g::conv_chain): the oneDNN backend then keeps that tensor in its blocked layout, with no
    // reorders.
    void reads_private(int i, ggml_tensor* reader);
    // `out` is this node's channel Concat (ggml dim 2 of NCHW, F32) of its inputs, each copied whole
    // into its slot. When every input is a private-layout producer's output (or such a Concat's) read
    // by this Concat only, with a channel count that is a multiple of every block size a backend uses
    // (16), each part is a contiguous chunk at the same offset in the blocked layout as in NCHW: the
    // copies are the same bytes. `out` is then a private-layout producer too, for reads_private, and
    // once its readers say so its parts' producers write the private layout.
    void joins_private(ggml_tensor* out);
    ggml_tensor* constant(const Tensor& t, ggml_type type = GGML_TYPE_F32);  // a derived weight
    // The constant right-hand side of a MatMul/Gemm/Conv, stored as ggml_mul_mat's first operand:
    // transposed in its last two dims when `transpose`, in the type --weights asks for
    // WeightRules::choose (quantized only where ggml's kernels take it: not for a convolution's kernel).
    ggml_tensor* matrix_weight(int i, const Shape& s, bool transpose, bool conv_kernel = false);
    ggml_tensor* scalar(float v) { return constant(Tensor::from_f32({v}, {})); }
    void set(int i, ggml_tensor* t);  // result of output i, checked against its shape

    ggml_tensor* cont(ggml_tensor* t);                     // ggml_cont only if not contiguous
    ggml_tensor* reshape(ggml_tensor* t, const Shape& s);  // to the canonical ne of s (contiguous if ne changes)
    // Reshape as a strided view when the strides allow it (PyTorch's view rule), else cont + reshape.
    // The result may be non-contiguous: for graph-level Reshape/Flatten/Squeeze/Unsqueeze.
    ggml_tensor* reshape_view(ggml_tensor* t, const Shape& s);
    ggml_tensor* permute(ggml_tensor* t, const std::vector<int64_t>& perm);  // ONNX perm, rank <= 4 (view)
    // a view of t restricted to [start, start+len) with step along ggml dim d
    ggml_tensor* slice(ggml_tensor* t, int d, int64_t start, int64_t len, int64_t step = 1);
    ggml_tensor* repeat_to(ggml_tensor* t, const std::array<int64_t, 4>& ne);

    enum class Bin { Add, Sub, Mul, Div };
    // numpy-broadcasting binary op on ONNX shapes sa, sb
    ggml_tensor* binary(Bin op, ggml_tensor* a, const Shape& sa, ggml_tensor* bt, const Shape& sb);
    ggml_tensor* binary(Bin op, int ia, int ib) { return binary(op, x(ia), shape(ia), x(ib), shape(ib)); }

private:
    // a convolution, a GroupNorm, or a private layout's producer: a convolution, a pooling or a channel
    // product (a Mul by one value per channel, ops/elementwise.cpp)
    enum class Fused { Conv, Norm, Product, Private };
    ggml_tensor* fused_behind(int i, Fused kind);
    // the producers input i holds the output of in a private layout (see reads_private, joins_private)
    std::vector<ggml_tensor*> private_producers(int i);
    LowerState& st_;
};

ggml_type ggml_type_for(DType t);  // the ggml type a device value of dtype t is held in
// dtypes the ggml lowerings compute on (float32, bool as 0/1 floats, int32/int64 as int32);
// values of the other dtypes are held bit for bit and computed by host kernels only
bool device_computable(DType t);

}  // namespace onnx2ggml::core
