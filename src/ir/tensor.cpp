#include "ir/tensor.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "ggml.h"
#include "util/error.h"
#include "util/limits.h"

namespace onnx2ggml::core {

size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32:
        case DType::I32:
        case DType::U32: return 4;
        case DType::U8:
        case DType::I8:
        case DType::Bool: return 1;
        case DType::U16:
        case DType::I16:
        case DType::F16:
        case DType::BF16: return 2;
        case DType::I64:
        case DType::F64:
        case DType::U64: return 8;
        default: return 0;
    }
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "float32";
        case DType::U8: return "uint8";
        case DType::I8: return "int8";
        case DType::U16: return "uint16";
        case DType::I16: return "int16";
        case DType::I32: return "int32";
        case DType::I64: return "int64";
        case DType::String: return "string";
        case DType::Bool: return "bool";
        case DType::F16: return "float16";
        case DType::F64: return "float64";
        case DType::U32: return "uint32";
        case DType::U64: return "uint64";
        case DType::BF16: return "bfloat16";
        default: return "undefined";
    }
}

bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::F64 || t == DType::BF16; }

bool dtype_known(int t) { return t >= 1 && t <= 16 && t != 8 && t != 14 && t != 15 && dtype_size(DType(t)) > 0; }

int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) {
        if (d < 0) bad_input("negative dimension in shape " + shape_str(s));
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            bad_input("element count of shape " + shape_str(s) + " overflows int64");
        n *= d;
    }
    return n;
}

std::string shape_str(const Shape& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
    return r + "]";
}

Tensor Tensor::zeros(DType t, const Shape& s) {
    if (dtype_size(t) == 0) unsupported(std::string("tensors of dtype ") + dtype_name(t) + " are not supported");
    Tensor r;
    r.dtype = t;
    r.shape = s;
    int64_t n = shape_numel(s);
    if (n > (int64_t(1) << 40) / int64_t(dtype_size(t))) bad_input("tensor of shape " + shape_str(s) + " is too large");
    check_memory(uint64_t(n) * dtype_size(t), "a tensor of shape " + shape_str(s));
    r.buf = heap_storage(size_t(n) * dtype_size(t));
    return r;
}

Tensor Tensor::from_i64(const std::vector<int64_t>& v, const Shape& s) {
    Tensor r = zeros(DType::I64, s);
    if (int64_t(v.size()) != r.numel()) internal_error("from_i64 size mismatch");
    if (!v.empty()) std::memcpy(r.data(), v.data(), v.size() * 8);
    return r;
}

Tensor Tensor::from_f32(const std::vector<float>& v, const Shape& s) {
    Tensor r = zeros(DType::F32, s);
    if (int64_t(v.size()) != r.numel()) internal_error("from_f32 size mismatch");
    if (!v.empty()) std::memcpy(r.data(), v.data(), v.size() * 4);
    return r;
}

Tensor Tensor::from_strings(std::vector<std::string> v, const Shape& s) {
    Tensor r;
    r.dtype = DType::String;
    r.shape = s;
    if (int64_t(v.size()) != shape_numel(s)) internal_error("from_strings size mismatch");
    auto l = std::make_shared<StringList>();
    l->items = std::move(v);
    r.buf = l;
    return r;
}

const std::vector<std::string>& Tensor::strings() const {
    auto* l = dynamic_cast<const StringList*>(buf.get());
    if (dtype != DType::String || !l) internal_error("strings() of a tensor that is not a string tensor");
    return l->items;
}

[[noreturn]] static void string_as_number() {
    unsupported("a string tensor is used as numbers (only StringNormalizer, Cast and CastLike take string tensors)");
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) {  // round to nearest even, as ONNX Runtime does
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return 0x7fc0;
    u += 0x7fff + ((u >> 16) & 1);
    return uint16_t(u >> 16);
}

double Tensor::getf(int64_t i) const {
    const uint8_t* p = buf->data;
    switch (dtype) {
        case DType::F32: return reinterpret_cast<const float*>(p)[i];
        case DType::F64: return reinterpret_cast<const double*>(p)[i];
        case DType::F16: return ggml_fp16_to_fp32(reinterpret_cast<const ggml_fp16_t*>(p)[i]);
        case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
        case DType::U64: return double(reinterpret_cast<const uint64_t*>(p)[i]);
        case DType::String: string_as_number();
        default: return double(geti(i));
    }
}

int64_t Tensor::geti(int64_t i) const {
    const uint8_t* p = buf->data;
    switch (dtype) {
        case DType::I64: return reinterpret_cast<const int64_t*>(p)[i];
        case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
        case DType::I16: return reinterpret_cast<const int16_t*>(p)[i];
        case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
        case DType::U8:
        case DType::Bool: return p[i];
        case DType::U16: return reinterpret_cast<const uint16_t*>(p)[i];
        case DType::U32: return reinterpret_cast<const uint32_t*>(p)[i];
        case DType::U64: return int64_t(reinterpret_cast<const uint64_t*>(p)[i]);
        case DType::String: string_as_number();
        default: {
            double v = getf(i);
            if (std::isnan(v)) return 0;
            if (v >= 9.2e18) return std::numeric_limits<int64_t>::max();
            if (v <= -9.2e18) return std::numeric_limits<int64_t>::min();
            return int64_t(v);  // truncation toward zero, as C casts (and ONNX Cast) do
        }
    }
}

void Tensor::setf(int64_t i, double v) {
    uint8_t* p = buf->data;
    switch (dtype) {
        case DType::F32: reinterpret_cast<float*>(p)[i] = float(v); return;
        case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
        case DType::F16: reinterpret_cast<ggml_fp16_t*>(p)[i] = ggml_fp32_to_fp16(float(v)); return;
        case DType::BF16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(float(v)); return;
        case DType::Bool: p[i] = v != 0; return;
        case DType::String: string_as_number();
        default: {
            int64_t iv;
            if (std::isnan(v)) iv = 0;
            else if (v >= 9.2e18) iv = std::numeric_limits<int64_t>::max();
            else if (v <= -9.2e18) iv = std::numeric_limits<int64_t>::min();
            else iv = int64_t(v);
            seti(i, iv);
        }
    }
}

void Tensor::seti(int64_t i, int64_t v) {
    uint8_t* p = buf->data;
    switch (dtype) {
        case DType::I64: reinterpret_cast<int64_t*>(p)[i] = v; return;
        case DType::I32: reinterpret_cast<int32_t*>(p)[i] = int32_t(v); return;
        case DType::I16: reinterpret_cast<int16_t*>(p)[i] = int16_t(v); return;
        case DType::I8: reinterpret_cast<int8_t*>(p)[i] = int8_t(v); return;
        case DType::U8: p[i] = uint8_t(v); return;
        case DType::Bool: p[i] = v != 0; return;
        case DType::U16: reinterpret_cast<uint16_t*>(p)[i] = uint16_t(v); return;
        case DType::U32: reinterpret_cast<uint32_t*>(p)[i] = uint32_t(v); return;
        case DType::U64: reinterpret_cast<uint64_t*>(p)[i] = uint64_t(v); return;
        case DType::String: string_as_number();
        default: setf(i, double(v));
    }
}

std::vector<int64_t> Tensor::to_i64() const {
    std::vector<int64_t> r(static_cast<size_t>(numel()));
    for (size_t i = 0; i < r.size(); ++i) r[i] = geti(int64_t(i));
    return r;
}

std::vector<float> Tensor::to_f32() const {
    std::vector<float> r(static_cast<size_t>(numel()));
    for (size_t i = 0; i < r.size(); ++i) r[i] = float(getf(int64_t(i)));
    return r;
}

// Numbers as text: integers in decimal; floats with the fewest digits that read back to the same
// value of their type, laid out as numpy's str() does (the ONNX test data's form): positional for
// 1e-4 <= |x| < 1e16 ("0.6048455", "100.0"), else scientific ("1e-07"); "NaN", "INF", "-INF".
static std::string number_text(const Tensor& x, int64_t i) {
    char b[64];
    if (!dtype_is_float(x.dtype)) return std::string(b, std::to_chars(b, b + sizeof b, x.geti(i)).ptr);
    double v = x.getf(i);
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    char* end = x.dtype == DType::F64 ? std::to_chars(b, b + sizeof b, v, std::chars_format::scientific).ptr
                                      : std::to_chars(b, b + sizeof b, float(v), std::chars_format::scientific).ptr;
    std::string sci(b, end);  // [-]d[.ddd]e(+|-)XX
    size_t e = sci.find('e');
    int exp = std::atoi(sci.c_str() + e + 1);
    if (exp < -4 || exp >= 16) return sci;
    bool neg = sci[0] == '-';
    std::string digits;
    for (size_t k = neg ? 1 : 0; k < e; ++k)
        if (sci[k] != '.') digits += sci[k];
    std::string ip, fp;
    if (exp >= 0) {
        digits.resize(std::max(digits.size(), size_t(exp) + 1), '0');
        ip = digits.substr(0, size_t(exp) + 1);
        fp = digits.substr(size_t(exp) + 1);
    } else {
        ip = "0";
        fp = std::string(size_t(-exp - 1), '0') + digits;
    }
    return (neg ? "-" : "") + ip + "." + (fp.empty() ? "0" : fp);
}

// Text as a number: decimal or scientific notation; "INF", "+INF", "-INF", "NaN" in any case.
static double text_number(const std::string& s) {
    std::string u;
    for (char ch : s) u += char(std::toupper(static_cast<unsigned char>(ch)));
    if (u == "INF" || u == "+INF") return INFINITY;
    if (u == "-INF") return -INFINITY;
    if (u == "NAN") return NAN;
    const char* b = s.c_str();
    char* e = nullptr;
    double v = std::strtod(b, &e);
    if (s.empty() || e != b + s.size()) unsupported("cannot cast the string '" + s.substr(0, 64) + "' to a number");
    return v;
}

Tensor Tensor::cast(DType t) const {
    if (t == dtype) return *this;
    if (t == DType::String) {
        std::vector<std::string> v(static_cast<size_t>(numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = number_text(*this, int64_t(i));
        return from_strings(std::move(v), shape);
    }
    Tensor r = zeros(t, shape);
    if (dtype == DType::String) {
        const auto& v = strings();
        for (size_t i = 0; i < v.size(); ++i) {
            int64_t k;  // integers exactly, beyond double's 53 bits
            auto [end, ec] = std::from_chars(v[i].data(), v[i].data() + v[i].size(), k);
            if (!dtype_is_float(t) && ec == std::errc() && end == v[i].data() + v[i].size()) r.seti(int64_t(i), k);
            else r.setf(int64_t(i), text_number(v[i]));
        }
        return r;
    }
    int64_t n = numel();
    // float32 <-> float16 by ggml's row conversions: the same bits as element by element, without the
    // per-element dispatch (--weights f16 converts the SD UNet's 860M weights at load: 5 s of it before)
    if (dtype == DType::F32 && t == DType::F16) {
        ggml_fp32_to_fp16_row(ptr<float>(), r.ptr<ggml_fp16_t>(), n);
        return r;
    }
    if (dtype == DType::F16 && t == DType::F32) {
        ggml_fp16_to_fp32_row(ptr<ggml_fp16_t>(), r.ptr<float>(), n);
        return r;
    }
    bool int_path = !dtype_is_float(dtype) && !dtype_is_float(t);
    for (int64_t i = 0; i < n; ++i) {
        if (int_path) r.seti(i, geti(i));
        else r.setf(i, getf(i));
    }
    return r;
}

// dst (C x R) = the transpose of src (R x C), row-major, in 64 x 64 tiles so that both sides stay in cache
template <class T>
static void transpose_tiled(const T* src, T* dst, int64_t R, int64_t C) {
    constexpr int64_t kTile = 64;
    for (int64_t i0 = 0; i0 < R; i0 += kTile)
        for (int64_t j0 = 0; j0 < C; j0 += kTile) {
            const int64_t i1 = std::min(R, i0 + kTile), j1 = std::min(C, j0 + kTile);
            for (int64_t i = i0; i < i1; ++i)
                for (int64_t j = j0; j < j1; ++j) dst[j * R + i] = src[i * C + j];
        }
}

Tensor Tensor::transposed_last2() const {
    Shape s = shape;
    size_t r = s.size();
    if (r < 2) internal_error("transposed_last2 of a tensor of rank < 2");
    std::swap(s[r - 2], s[r - 1]);
    Tensor o = zeros(dtype, s);
    transposed_last2_into(o.data());
    return o;
}

void Tensor::transposed_last2_into(void* out) const {
    size_t r = shape.size();
    if (r < 2) internal_error("transposed_last2 of a tensor of rank < 2");
    int64_t R = shape[r - 2], C = shape[r - 1], B = numel() / std::max<int64_t>(1, R * C);
    const size_t es = dtype_size(dtype);
    for (int64_t b = 0; b < B; ++b) {
        const uint8_t* src = data() + size_t(b * R * C) * es;
        uint8_t* dst = static_cast<uint8_t*>(out) + size_t(b * R * C) * es;
        switch (es) {  // whole elements, in tiles (a weight matrix of gigabytes is transposed at load)
            case 1:
                transpose_tiled(reinterpret_cast<const uint8_t*>(src), reinterpret_cast<uint8_t*>(dst), R, C);
                break;
            case 2:
                transpose_tiled(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<uint16_t*>(dst), R, C);
                break;
            case 4:
                transpose_tiled(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst), R, C);
                break;
            case 8:
                transpose_tiled(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), R, C);
                break;
            default:
                for (int64_t i = 0; i < R; ++i)
                    for (int64_t j = 0; j < C; ++j)
                        std::memcpy(dst + size_t(j * R + i) * es, src + size_t(i * C + j) * es, es);
        }
    }
}

namespace {
struct HeapStorage : Storage {
    std::vector<uint8_t> v;
    explicit HeapStorage(size_t n) : v(n) {
        data = v.data();
        size = n;
    }
};
struct StringStorage : Storage {
    std::string s;
    explicit StringStorage(std::string&& b) : s(std::move(b)) {
        data = reinterpret_cast<uint8_t*>(&s[0]);
        size = s.size();
    }
};
struct MappedStorage : Storage {
    void* base = nullptr;
    size_t len = 0;
    ~MappedStorage() override {
        if (base) munmap(base, len);
    }
    void prefetch() override {
#ifdef MADV_POPULATE_READ
        if (base) madvise(base, len, MADV_POPULATE_READ);  // advice: an older kernel's EINVAL is ignored
#endif
    }
    void release_pages() override {
#ifdef MADV_PAGEOUT
        // clean pages are dropped (re-read from the file if touched again); pages written since
        // (copy-on-write) stay, so the contents never change. Advice only: errors are ignored.
        if (base) madvise(base, len, MADV_PAGEOUT);
#endif
    }
};
}  // namespace

std::shared_ptr<const void> Storage::derived(const std::string& key,
                                             const std::function<std::shared_ptr<const void>()>& make) {
    std::lock_guard<std::mutex> lock(derived_m_);
    std::shared_ptr<const void>& d = derived_[key];
    if (!d) d = make();
    return d;
}

std::shared_ptr<const void> Storage::find_derived(const std::string& key) {
    std::lock_guard<std::mutex> lock(derived_m_);
    auto it = derived_.find(key);
    return it == derived_.end() ? nullptr : it->second;
}

std::shared_ptr<Storage> heap_storage(size_t n) { return std::make_shared<HeapStorage>(n); }

std::shared_ptr<Storage> string_storage(std::string&& bytes) {
    return std::make_shared<StringStorage>(std::move(bytes));
}

std::shared_ptr<Storage> map_file(const std::string& path, int64_t offset, int64_t length) {
    if (offset < 0 || length < 0) bad_input(path + ": negative offset or length");
    if (length == 0) return heap_storage(0);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) bad_input(path + ": cannot open: " + std::strerror(errno));
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t start = size_t(offset) / page * page, skip = size_t(offset) - start;
    auto m = std::make_shared<MappedStorage>();
    m->len = skip + size_t(length);
    void* p = mmap(nullptr, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, off_t(start));
    close(fd);
    if (p == MAP_FAILED)
        bad_input(path + ": cannot map " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                  ": " + std::strerror(errno));
    m->base = p;
    m->data = static_cast<uint8_t*>(p) + skip;
    m->size = size_t(length);
    return m;
}

}  // namespace onnx2ggml::core
