// .npy reading and writing (format 1.0/2.0/3.0), header-only. Shared verbatim by
// onnx2ggml and by every program it generates, so both read inputs the same way.
// Supported dtypes: <f4 <f2 <f8 <i8 <i4 <i2 |i1 |u1 |b1 <u2 <u4 <u8, and <U<n> (strings of up to n
// UTF-32 code points; onnx2ggml's string tensors), little-endian only.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace npy {

struct Array {
    std::string descr;  // numpy dtype string, e.g. "<f4"
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
};

// The n of a '<U<n>' descr (1..2^20), 0 for any other descr.
inline size_t unicode_width(const std::string& d) {
    if (d.size() < 3 || d.size() > 9 || d[0] != '<' || d[1] != 'U') return 0;
    size_t n = 0;
    for (size_t i = 2; i < d.size(); ++i) {
        if (d[i] < '0' || d[i] > '9') return 0;
        n = n * 10 + size_t(d[i] - '0');
    }
    return n <= (size_t(1) << 20) ? n : 0;
}

// ONNX TensorProto data type of a descr (0 if unsupported), and back.
inline int onnx_type(const std::string& d) {
    if (unicode_width(d)) return 8;
    static const char* t[][2] = {{"<f4", "1"},  {"|u1", "2"},  {"|i1", "3"},  {"<u2", "4"},
                                 {"<i2", "5"},  {"<i4", "6"},  {"<i8", "7"},  {"|b1", "9"},
                                 {"<f2", "10"}, {"<f8", "11"}, {"<u4", "12"}, {"<u8", "13"}};
    for (auto& e : t)
        if (d == e[0]) return std::atoi(e[1]);
    return 0;
}
inline const char* descr_of(int onnx) {
    switch (onnx) {
        case 1: return "<f4";
        case 2: return "|u1";
        case 3: return "|i1";
        case 4: return "<u2";
        case 5: return "<i2";
        case 6: return "<i4";
        case 7: return "<i8";
        case 9: return "|b1";
        case 10: return "<f2";
        case 11: return "<f8";
        case 12: return "<u4";
        case 13: return "<u8";
        default: return nullptr;
    }
}
inline size_t item_size(const std::string& d) {
    return unicode_width(d) ? 4 * unicode_width(d) : d.size() == 3 ? size_t(d[2] - '0') : 0;
}

// Returns "" on success, else a message (without the file name).
inline std::string read(const std::string& path, Array& a) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return "cannot open file";
    char magic[8];
    if (!f.read(magic, 8)) return "file too short for a .npy header";
    if (std::memcmp(magic, "\x93NUMPY", 6) != 0) return "not a .npy file (bad magic)";
    int major = (unsigned char)magic[6];
    if (major < 1 || major > 3) return "unsupported .npy version " + std::to_string(major);
    uint32_t hlen = 0;
    unsigned char lb[4] = {0, 0, 0, 0};
    if (!f.read(reinterpret_cast<char*>(lb), major == 1 ? 2 : 4)) return "truncated header length";
    hlen = lb[0] | (lb[1] << 8) | (major == 1 ? 0u : (uint32_t(lb[2]) << 16 | uint32_t(lb[3]) << 24));
    if (hlen > (1u << 20)) return "header too long";
    std::string h(hlen, '\0');
    if (!f.read(&h[0], hlen)) return "truncated header";
    auto field = [&](const std::string& key) -> std::string {
        auto p = h.find("'" + key + "'");
        if (p == std::string::npos) return "";
        p = h.find(':', p);
        if (p == std::string::npos) return "";
        ++p;
        while (p < h.size() && h[p] == ' ') ++p;
        if (p >= h.size()) return "";
        if (h[p] == '\'') {
            auto e = h.find('\'', p + 1);
            return e == std::string::npos ? "" : h.substr(p + 1, e - p - 1);
        }
        if (h[p] == '(') {
            auto e = h.find(')', p);
            return e == std::string::npos ? "" : h.substr(p, e - p + 1);
        }
        auto e = h.find_first_of(",}", p);
        return e == std::string::npos ? "" : h.substr(p, e - p);
    };
    a.descr = field("descr");
    if (a.descr.empty()) return "header has no descr";
    if (a.descr == "<b1" || a.descr == "=b1") a.descr = "|b1";
    if (a.descr == "<u1" || a.descr == "=u1") a.descr = "|u1";
    if (a.descr == "<i1" || a.descr == "=i1") a.descr = "|i1";
    if (a.descr[0] == '>') return "big-endian data (" + a.descr + ") is not supported";
    if (onnx_type(a.descr) == 0) return "unsupported dtype '" + a.descr + "'";
    std::string fo = field("fortran_order");
    if (fo != "False") return fo == "True" ? "fortran_order=True is not supported" : "header has no fortran_order";
    std::string sh = field("shape");
    if (sh.size() < 2 || sh.front() != '(' || sh.back() != ')') return "header has no shape";
    a.shape.clear();
    std::stringstream ss(sh.substr(1, sh.size() - 2));
    std::string tok;
    int64_t n = 1;
    while (std::getline(ss, tok, ',')) {
        size_t b = tok.find_first_not_of(" "), e = tok.find_last_not_of(" L");
        if (b == std::string::npos) continue;
        tok = e == std::string::npos || e < b ? std::string() : tok.substr(b, e - b + 1);
        if (tok.empty()) return "bad shape entry in '" + sh + "'";
        for (char c : tok)
            if (c < '0' || c > '9') return "bad shape entry '" + tok + "'";
        if (tok.size() > 12) return "shape entry too large";
        int64_t d = std::stoll(tok);
        if (d != 0 && n > (int64_t(1) << 40) / d) return "shape too large";
        n *= d;
        a.shape.push_back(d);
    }
    size_t want = size_t(n) * item_size(a.descr);
    std::streampos here = f.tellg();
    f.seekg(0, std::ios::end);
    std::streamoff left = f.tellg() - here;
    f.seekg(here);
    if (std::streamoff(want) > left)
        return "truncated data: the header declares " + std::to_string(want) + " bytes, the file holds " +
               std::to_string(left);
    a.data.resize(want);
    if (want && !f.read(reinterpret_cast<char*>(a.data.data()), std::streamsize(want)))
        return "truncated data: expected " + std::to_string(want) + " bytes";
    f.peek();
    if (!f.eof()) return "trailing bytes after the data";
    return "";
}

inline bool write(const std::string& path, const Array& a) {
    std::string shape = "(";
    for (size_t i = 0; i < a.shape.size(); ++i)
        shape += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : (i + 1 < a.shape.size() ? ", " : ""));
    shape += ")";
    std::string h = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    size_t total = 10 + h.size() + 1;
    h += std::string((64 - total % 64) % 64, ' ') + "\n";
    std::ofstream f(path, std::ios::binary);
    if (!f) return false;
    f.write("\x93NUMPY\x01\x00", 8);
    uint16_t hl = uint16_t(h.size());
    char lb[2] = {char(hl & 0xff), char(hl >> 8)};
    f.write(lb, 2);
    f.write(h.data(), std::streamsize(h.size()));
    f.write(reinterpret_cast<const char*>(a.data.data()), std::streamsize(a.data.size()));
    return bool(f);
}

}  // namespace npy
