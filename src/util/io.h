// Host tensors <-> .npy files, comparison with a reference, deterministic random inputs.
#pragma once
#include <string>

#include "ir/graph.h"

namespace onnx2ggml::core {

Tensor read_npy(const std::string& path);  // errors name the file
void write_npy(const std::string& path, const Tensor& t);
Tensor random_tensor(DType t, const Shape& s, uint64_t seed);

struct Comparison {
    bool pass = true;
    double max_abs = 0, max_rel = 0, ref_max = 0;
    std::string why;  // first reason for failure
};
// numpy.testing.assert_allclose semantics: |a - e| <= atol + rtol * |e|; NaNs must match;
// integer and bool tensors must match exactly. Shapes must match.
Comparison compare(const Tensor& actual, const Tensor& expected, double rtol, double atol);

}  // namespace onnx2ggml::core
