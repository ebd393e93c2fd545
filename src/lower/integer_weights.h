// Weights that a quantized ONNX model dequantizes from integers (com.microsoft MatMulNBits, DequantizeLinear of
// constant int8/uint8: ops/quant.cpp) are made float32 once at load, and remember how: value[i] =
// (code[i] - zero[i]) * scale[i], one scale and zero point per group of values. When such a weight is stored in a
// ggml quantized type whose blocks can hold its groups, its blocks are written from the integers rather than by
// ggml's quantizer from the floats (which would round every value a second time, onto another scale):
//   q8_0: d = scale, qs = code - zero (int8);   q4_0: d = scale, q = code - zero + 8 (0..15);
//   q4_1: d = scale, m = -scale * zero, q = code (0..15);
// each block of 32 values along a stored row must share one scale and zero point. ggml's block scales are float16:
// exact when the scales (and q4_1's m) are float16 values; otherwise each block's d is the scale rounded to
// float16: every value of a q8_0/q4_0 block scaled by one factor within 2^-11 of 1, a q4_1 value off by at most
// 2^-11 of (|code * scale| + |scale * zero|) (d and m each rounded once): the documented bound
// (docs/quantization.md). The blocks are checked against the float32 weight with that bound before they are used.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ggml.h"
#include "ir/tensor.h"

namespace onnx2ggml::core {

struct IntegerSource {
    // the code, zero point and scale of element i (row-major flat index) of the float32 weight
    std::function<void(int64_t i, int32_t* code, int32_t* zero, float* scale)> at;
    // the type to store the weight in when no --weights / --weights-rule decides (GGML_TYPE_COUNT: float32 as
    // usual): MatMulNBits with accuracy_level 4, where the model allows its activations to be quantized to int8
    // as ggml's quantized products do
    ggml_type preferred = GGML_TYPE_COUNT;
};

// Attaches `src` to the float32 tensor t (kept with its bytes: Storage::derived), and finds it again.
void attach_integer_source(const Tensor& t, std::shared_ptr<const IntegerSource> src);
std::shared_ptr<const IntegerSource> integer_source(const Tensor& t);

// The bytes of `host` (a float32 weight of rank <= 4 whose leading dims are 1, [R, C]; stored as ggml rows of C
// values, or of R values with `transpose`) in `type` (q8_0, q4_0, q4_1) made from its integer source; empty when it
// has none, or the rows do not divide into blocks, or a block's values do not share a scale and zero point or do
// not fit the type's codes.
std::vector<uint8_t> integer_blocks(const Tensor& host, bool transpose, ggml_type type);

}  // namespace onnx2ggml::core
