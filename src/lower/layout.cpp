#include "lower/layout.h"

#include "util/error.h"

namespace onnx2ggml {

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

}  // namespace onnx2ggml
