// The one place where ONNX axes meet ggml dims. ONNX dims [d0, ..., d(r-1)] (outermost
// first) are ggml ne[r-1-i]. Ranks 5 and 6 are stored in ggml's 4 dims by merging the
// leading (outermost) dims into ne[3]; ops that must address a merged dim fail clearly.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ir/tensor.h"

namespace onnx2ggml::core {

Shape canonical4(const Shape& s);              // rank <= 4 copy, leading dims merged above 4
std::array<int64_t, 4> to_ne(const Shape& s);  // ggml ne of the canonical shape
int ggml_dim(int axis, int rank);              // ONNX axis (normalized) -> ggml dim, -1 if merged
// The ggml dim in which ranges of ONNX axis `axis` of shape s are ranges, and the indices of that dim one
// index of the axis spans (`unit`): ggml_dim's with unit 1, or for a merged leading axis ne[3] when the
// merged axes outside it have size 1 (a [3, 1, H, S, D] split along axis 0, a batch-1 concat); else -1.
int ggml_dim_range(const Shape& s, int axis, int64_t& unit);
// ggml_permute's argument for an ONNX Transpose perm of rank <= 4.
std::array<int, 4> ggml_permute_axes(const std::vector<int64_t>& perm);
// The permutation that undoes `perm` (ONNX Transpose semantics).
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm);
// numpy broadcasting of two shapes; false if incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);
// Shape with leading 1s so that it has rank r.
Shape align_rank(const Shape& s, size_t r);
// Byte strides (ggml nb, innermost first) under which a tensor of ggml sizes `ne` and strides
// `nb` can be read with sizes `new_ne` without copying (PyTorch's view rule: merged dims must be
// contiguous among themselves, splits are always possible). False when only a copy can do it.
bool view_strides(const std::array<int64_t, 4>& ne, const std::array<size_t, 4>& nb,
                  const std::array<int64_t, 4>& new_ne, std::array<size_t, 4>& new_nb);

}  // namespace onnx2ggml::core
