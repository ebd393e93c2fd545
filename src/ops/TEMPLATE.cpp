// TEMPLATE: how to add an operator in one file (docs/adding-an-op.md walks through it).
//
// Copy the parts you need into the family file your op belongs to (src/ops/<family>.cpp) or, for a
// new family, copy this file to src/ops/<family>.cpp and rename O2G_OP_FAMILY(TEMPLATE) below: the
// build finds every src/ops/*.cpp and calls its O2G_OP_FAMILY block (CMakeLists.txt writes the list,
// op_families.inc), so nothing else has to be edited to register it.
//
// This file itself is NOT part of the library and never registers: CMakeLists.txt leaves it out of
// onnx2ggml_core and of op_families.inc, and builds it alone as the object library o2g_op_template
// (so it keeps compiling); tests/unit/test_shapes.cpp (Template.*) registers it into a private
// Registry and checks its shape rule and host evaluator, so the example keeps working too.
//
// The example op is made up and internal: o2g.TemplateAffine(X, B?) = alpha * X + B, with
//   X      a float tensor (float32, float16, bfloat16, float64), any shape;
//   B      optional, a scalar that must be a compile-time constant (a host input), default 0;
//   alpha  a float attribute, default 1;
//   Y      X's dtype and shape.
// Internal ops are named o2g.*: they cannot collide with an ONNX operator, and Registry::op_types
// (the README's operator list) leaves them out.
#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

using Lc = LowerCtx;

// The shape rule: reads the inputs' dtypes and shapes (and attributes, and the host values of
// constant inputs where the output shape depends on them), checks them, and sets the dtype and
// shape of every output with set_out. Errors name the node by themselves (OpCtx::where):
//   c.fail(...)             a bad model: the spec forbids it (exit 2)
//   c.fail_unsupported(...) valid ONNX that onnx2ggml does not do (exit 3; specialize collects
//                           every such node and reports them all at once)
// Axes go through c.axis(a, rank), which normalizes a negative axis and fails on one out of range.
void infer_template(OpCtx& c) {
    DType t = c.dtype(0);
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::F64)
        c.fail_unsupported(std::string("input X has dtype ") + dtype_name(t) +
                           ", o2g.TemplateAffine takes float tensors");
    if (c.has(1) && !c.shape(1).empty()) c.fail("input B must be a scalar, it has shape " + shape_str(c.shape(1)));
    c.set_out(0, t, c.shape(0));
}

// The host evaluator: computes the outputs when every input is a compile-time constant (constant
// folding in specialize; `compare --reference host` also runs every node through it). Write it in
// double (or int64) through Tensor::getf/setf, which convert from and to the tensor's own dtype,
// so one evaluator serves every dtype the shape rule accepts. Input i's value is c.cval(i); the
// result goes to c.set_const(i, tensor).
void eval_template(OpCtx& c) {
    const Tensor& x = c.cval(0);
    double alpha = c.af("alpha", 1.0f);
    double beta = c.has(1) ? c.cval(1).getf(0) : 0.0;
    Tensor y = Tensor::zeros(x.dtype, x.shape);
    for (int64_t i = 0; i < x.numel(); ++i) y.setf(i, alpha * x.getf(i) + beta);
    c.set_const(0, y);
}

// The lowering to ggml: c.x(i) is input i as a ggml tensor (float32 on the device), c.cval(i) the
// host value of a host input, c.set(i, t) the result of output i (checked against the shape rule's
// shape). Every ggml call goes through G(c.b, ggml_fn, args...) (src/lower/builder.h): it builds the
// node for `run` and records the same call as a line of C++ for `compile`, so both stay identical;
// never call a ggml_* builder directly. Host constants reach the graph as c.constant(tensor) or
// c.scalar(v); LowerCtx has the shape helpers (reshape, permute, slice, cont, binary with numpy
// broadcasting, src/lower/lower.h).
void lower_template(Lc& c) {
    require_float(c, 0);  // the device computes in float32; other dtypes fail with a clear message
    float alpha = c.af("alpha", 1.0f);
    float beta = c.has(1) ? float(c.cval(1).getf(0)) : 0.0f;
    c.set(0, G(c.b, ggml_scale_bias, c.cont(c.x(0)), alpha, beta));
}

}  // namespace

// The family's registration: one OpDef per operator (and per opset range, where the semantics
// changed between opsets: register two entries with disjoint [since, until]).
O2G_OP_FAMILY(TEMPLATE) {
    OpDef d;
    d.op_type = "o2g.TemplateAffine";  // an ONNX op: its ONNX name ("Softmax"); domain "" = ai.onnx
    // d.since = 13; d.until = 17;     // the opsets of the node's domain this entry implements (default: all);
    // outside them specialize reports the node unsupported (exit 3). Keep
    // the default for internal o2g.* ops: the fusions emit them in the
    // onnx2ggml domain, which has no opset import (it reads 0)
    d.min_inputs = 1;     // X must be present (checked before infer, exit 2 otherwise)
    d.host_inputs = {1};  // B must be a host constant for the node to be lowered
    d.infer = infer_template;
    d.eval = eval_template;    // leave empty only for ops that cannot run on the host
    d.lower = lower_template;  // leave empty for host-only ops (they must fold)
    r.add(std::move(d));       // a second entry for the same op: internal error (exit 4)
}

}  // namespace onnx2ggml::core
