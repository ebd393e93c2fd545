// UTF-8 <-> code points, for string tensors (StringNormalizer, .npy '<U' arrays).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace onnx2ggml::core {

// Decodes the code point at s[i]: returns its length in bytes, 0 if s[i] does not start a valid
// sequence (a stray continuation byte, a truncated sequence, a value above U+10FFFF).
inline size_t utf8_decode(const std::string& s, size_t i, uint32_t& cp) {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    size_t n = b(0) < 0x80 ? 1 : (b(0) >> 5) == 6 ? 2 : (b(0) >> 4) == 14 ? 3 : (b(0) >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    cp = n == 1 ? b(0) : b(0) & (0x7fu >> n);
    for (size_t k = 1; k < n; ++k) {
        if ((b(k) >> 6) != 2) return 0;
        cp = (cp << 6) | (b(k) & 0x3fu);
    }
    return cp > 0x10ffff ? 0 : n;
}

inline void utf8_encode(uint32_t cp, std::string& r) {
    if (cp < 0x80) {
        r += char(cp);
        return;
    }
    int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    r += char((0xf00 >> n) | (cp >> (6 * (n - 1))));
    for (int k = n - 2; k >= 0; --k) r += char(0x80 | ((cp >> (6 * k)) & 0x3f));
}

}  // namespace onnx2ggml::core
