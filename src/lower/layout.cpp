#include "lower/layout.h"

#include <algorithm>

#include "util/error.h"

namespace onnx2ggml::core {

Shape canonical4(const Shape& s) {
    if (s.size() <= 4) return s;
    Shape r(4);
    int64_t lead = 1;
    size_t k = s.size() - 3;
    for (size_t i = 0; i < k; ++i) lead *= s[i];
    r[0] = lead;
    for (size_t i = 0; i < 3; ++i) r[1 + i] = s[k + i];
    return r;
}

std::array<int64_t, 4> to_ne(const Shape& s) {
    Shape c = canonical4(s);
    std::array<int64_t, 4> ne = {1, 1, 1, 1};
    int r = int(c.size());
    for (int i = 0; i < r; ++i) ne[i] = c[r - 1 - i];
    return ne;
}

int ggml_dim(int axis, int rank) {
    if (rank <= 4) return rank - 1 - axis;
    int merged = rank - 3;  // axes [0, merged) live in ne[3]
    return axis < merged ? -1 : rank - 1 - axis;
}

int ggml_dim_range(const Shape& s, int axis, int64_t& unit) {
    int rank = int(s.size());
    unit = 1;
    int d = ggml_dim(axis, rank);
    if (d >= 0) return d;
    int merged = rank - 3;
    for (int i = 0; i < axis; ++i)
        if (s[size_t(i)] != 1) return -1;
    for (int i = axis + 1; i < merged; ++i) unit *= s[size_t(i)];
    return 3;
}

std::array<int, 4> ggml_permute_axes(const std::vector<int64_t>& perm) {
    int r = int(perm.size());
    if (r > 4) internal_error("ggml_permute_axes: rank > 4");
    std::array<int, 4> ax = {0, 1, 2, 3};
    // output ONNX dim j reads input ONNX dim perm[j]; ggml_permute puts input dim k at position ax[k]
    for (int j = 0; j < r; ++j) ax[r - 1 - int(perm[j])] = r - 1 - j;
    return ax;
}

std::vector<int64_t> inverse_perm(const std::vector<int64_t>& perm) {
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    return inv;
}

Shape align_rank(const Shape& s, size_t r) {
    Shape o(r > s.size() ? r - s.size() : 0, 1);
    o.insert(o.end(), s.begin(), s.end());
    return o;
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out) {
    size_t r = std::max(a.size(), b.size());
    Shape x = align_rank(a, r), y = align_rank(b, r);
    out.assign(r, 1);
    for (size_t i = 0; i < r; ++i) {
        if (x[i] == y[i] || y[i] == 1) out[i] = x[i];
        else if (x[i] == 1) out[i] = y[i];
        else return false;
    }
    return true;
}

bool view_strides(const std::array<int64_t, 4>& ne, const std::array<size_t, 4>& nb,
                  const std::array<int64_t, 4>& new_ne, std::array<size_t, 4>& new_nb) {
    // Walk both shapes from the innermost dim out, in chunks of old dims that are contiguous
    // among themselves; each chunk must be covered exactly by a run of new dims.
    int64_t numel = 1, new_numel = 1;
    for (int i = 0; i < 4; ++i) numel *= ne[i], new_numel *= new_ne[i];
    if (numel != new_numel) return false;
    if (numel == 0) {  // nothing to read: any strides do
        new_nb[0] = nb[0];
        for (int i = 1; i < 4; ++i) new_nb[i] = new_nb[i - 1] * size_t(std::max<int64_t>(1, new_ne[i - 1]));
        return true;
    }
    int v = 0;            // next new dim to place
    size_t base = nb[0];  // stride of the current chunk's innermost element
    int64_t chunk = 1, placed = 1;
    for (int d = 0; d < 4; ++d) {
        chunk *= ne[d];
        bool chunk_ends = d == 3 || (ne[d + 1] != 1 && nb[d + 1] != size_t(chunk) * base);
        if (!chunk_ends) continue;
        while (v < 4 && (placed < chunk || new_ne[v] == 1)) {
            new_nb[v] = size_t(placed) * base;
            placed *= new_ne[v];
            ++v;
        }
        if (placed != chunk) return false;
        if (d < 3) {
            base = nb[d + 1];
            chunk = placed = 1;
        }
    }
    for (; v < 4; ++v) {  // trailing size-1 dims
        if (new_ne[v] != 1) return false;
        new_nb[v] = v > 0 ? new_nb[v - 1] * size_t(new_ne[v - 1]) : nb[0];
    }
    return true;
}

}  // namespace onnx2ggml::core
