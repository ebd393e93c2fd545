#include "util/io.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "npy.h"
#include "util/error.h"
#include "util/utf8.h"

namespace onnx2ggml::core {

Tensor read_npy(const std::string& path) {
    npy::Array a;
    std::string err = npy::read(path, a);
    if (!err.empty()) bad_input(path + ": " + err);
    if (size_t w = npy::unicode_width(a.descr)) {  // numpy strings: UTF-32, padded with NULs
        std::vector<std::string> items(a.data.size() / (4 * w));
        for (size_t i = 0; i < items.size(); ++i)
            for (size_t k = 0; k < w; ++k) {
                uint32_t cp;
                std::memcpy(&cp, a.data.data() + 4 * (i * w + k), 4);
                if (cp == 0) break;
                if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
                    bad_input(path + ": element " + std::to_string(i) + " holds an invalid code point");
                utf8_encode(cp, items[i]);
            }
        return Tensor::from_strings(std::move(items), a.shape);
    }
    Tensor t = Tensor::zeros(DType(npy::onnx_type(a.descr)), a.shape);
    if (t.nbytes() != a.data.size()) bad_input(path + ": data size does not match the header");
    if (!a.data.empty()) std::memcpy(t.data(), a.data.data(), a.data.size());
    return t;
}

void write_npy(const std::string& path, const Tensor& t) {
    npy::Array a;
    if (t.dtype == DType::String) {  // as numpy's '<U<n>': UTF-32, n = the longest element
        std::vector<std::vector<uint32_t>> cps;
        size_t w = 1;
        for (const std::string& s : t.strings()) {
            cps.emplace_back();
            for (size_t i = 0; i < s.size();) {
                uint32_t cp;
                size_t n = utf8_decode(s, i, cp);
                if (n == 0) bad_input(path + ": cannot write a string that is not UTF-8 as .npy");
                cps.back().push_back(cp);
                i += n;
            }
            w = std::max(w, cps.back().size());
        }
        a.descr = "<U" + std::to_string(w);
        a.shape = t.shape;
        a.data.assign(cps.size() * w * 4, 0);
        for (size_t i = 0; i < cps.size(); ++i)
            if (!cps[i].empty()) std::memcpy(a.data.data() + i * w * 4, cps[i].data(), cps[i].size() * 4);
        if (!npy::write(path, a)) bad_input(path + ": cannot write file");
        return;
    }
    const char* d = npy::descr_of(int(t.dtype));
    if (!d) bad_input(path + ": cannot write dtype " + dtype_name(t.dtype) + " as .npy");
    a.descr = d;
    a.shape = t.shape;
    if (t.nbytes()) a.data.assign(t.data(), t.data() + t.nbytes());
    if (!npy::write(path, a)) bad_input(path + ": cannot write file");
}

Tensor random_tensor(DType t, const Shape& s, uint64_t seed) {
    Tensor r = Tensor::zeros(t, s);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&x]() {  // splitmix64
        uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    };
    for (int64_t i = 0; i < r.numel(); ++i) {
        if (dtype_is_float(t)) r.setf(i, double(next() >> 11) / double(1ull << 53) * 2.0 - 1.0);
        else if (t == DType::Bool) r.seti(i, int64_t(next() & 1));
        else r.seti(i, int64_t(next() % 10));
    }
    return r;
}

Comparison compare(const Tensor& a, const Tensor& e, double rtol, double atol) {
    Comparison c;
    if (a.shape != e.shape) {
        c.pass = false;
        c.why = "shape " + shape_str(a.shape) + " != expected " + shape_str(e.shape);
        return c;
    }
    if (a.dtype == DType::String || e.dtype == DType::String) {  // strings: equal element by element
        if (a.dtype != e.dtype) {
            c.pass = false;
            c.why = std::string("dtype ") + dtype_name(a.dtype) + " != expected " + dtype_name(e.dtype);
            return c;
        }
        for (size_t i = 0; i < e.strings().size() && c.pass; ++i)
            if (a.strings()[i] != e.strings()[i]) {
                c.pass = false;
                c.why = "element " + std::to_string(i) + ": got '" + a.strings()[i].substr(0, 80) + "', expected '" +
                        e.strings()[i].substr(0, 80) + "'";
            }
        return c;
    }
    bool exact = !dtype_is_float(e.dtype);
    for (int64_t i = 0; i < e.numel(); ++i) {
        double x = a.getf(i), y = e.getf(i);
        if (std::isfinite(y)) c.ref_max = std::max(c.ref_max, std::fabs(y));
        bool ok;
        if (exact) ok = a.geti(i) == e.geti(i);
        else if (std::isnan(y) || std::isnan(x)) ok = std::isnan(x) && std::isnan(y);
        else if (std::isinf(y) || std::isinf(x)) ok = x == y;
        else {
            double d = std::fabs(x - y);
            c.max_abs = std::max(c.max_abs, d);
            if (y != 0) c.max_rel = std::max(c.max_rel, d / std::fabs(y));
            ok = d <= atol + rtol * std::fabs(y);
        }
        if (exact && a.geti(i) != e.geti(i)) c.max_abs = std::max(c.max_abs, std::fabs(x - y));
        if (!ok && c.pass) {
            c.pass = false;
            c.why = "element " + std::to_string(i) + ": got " + std::to_string(x) + ", expected " + std::to_string(y);
        }
    }
    return c;
}

}  // namespace onnx2ggml::core
