// Host tensors: dtype + shape + bytes. Used for initializers, folded constants and
// .npy inputs/outputs. Element access goes through double/int64 so that the host
// evaluators (constant folding) are written once for every dtype.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace onnx2ggml::core {

// Values are those of onnx.TensorProto.DataType.
enum class DType : int {
    Undefined = 0,
    F32 = 1,
    U8 = 2,
    I8 = 3,
    U16 = 4,
    I16 = 5,
    I32 = 6,
    I64 = 7,
    String = 8,
    Bool = 9,
    F16 = 10,
    F64 = 11,
    U32 = 12,
    U64 = 13,
    BF16 = 16,
};

size_t dtype_size(DType t);  // 0 for unsupported/unknown
const char* dtype_name(DType t);
bool dtype_is_float(DType t);
bool dtype_known(int onnx_type);  // a dtype onnx2ggml can hold on the host

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);  // throws on overflow or negative dims
std::string shape_str(const Shape& s);

// The bytes behind a tensor: owned heap memory, a string taken over from a parsed protobuf,
// or a read-only file mapping (external data). Shared between tensors that are views of it.
struct Storage {
    virtual ~Storage() = default;
    // Gives the resident pages back to the kernel where they can be read again on the next touch (a
    // file mapping: MADV_PAGEOUT); the contents stay what they are. No-op for heap memory.
    virtual void release_pages() {}
    // Reads the pages in at once before a whole pass over the bytes (a file mapping:
    // MADV_POPULATE_READ, one call instead of a page fault per few pages). No-op for heap memory.
    virtual void prefetch() {}
    // A form derived from these bytes that an evaluator keeps across runs instead of remaking it each
    // time (an LSTM host kernel's recurrence weights packed for its matrix-vector product): made by
    // `make` on the first call with `key`, then shared; released with the bytes. Thread-safe.
    std::shared_ptr<const void> derived(const std::string& key,
                                        const std::function<std::shared_ptr<const void>()>& make);
    std::shared_ptr<const void> find_derived(const std::string& key);  // nullptr when none was made
    uint8_t* data = nullptr;
    size_t size = 0;

private:
    std::mutex derived_m_;
    std::map<std::string, std::shared_ptr<const void>> derived_;
};
std::shared_ptr<Storage> heap_storage(size_t n);               // zero-filled
std::shared_ptr<Storage> string_storage(std::string&& bytes);  // takes the string over, no copy
// Maps [offset, offset + length) of a file copy-on-write (pages are read on first touch and
// released with the last tensor using them). Throws Error(2) naming the file on failure.
std::shared_ptr<Storage> map_file(const std::string& path, int64_t offset, int64_t length);

// A string tensor (DType::String) is a host value only (ggml holds numbers): its elements are a
// list of byte strings (UTF-8), kept in a StringList storage with no numeric bytes.
struct StringList : Storage {
    std::vector<std::string> items;
};

struct Tensor {
    DType dtype = DType::Undefined;
    Shape shape;
    std::shared_ptr<Storage> buf;

    static Tensor zeros(DType t, const Shape& s);
    static Tensor from_i64(const std::vector<int64_t>& v, const Shape& s);
    static Tensor from_f32(const std::vector<float>& v, const Shape& s);
    static Tensor scalar_i64(int64_t v) { return from_i64({v}, {}); }
    static Tensor from_strings(std::vector<std::string> v, const Shape& s);
    const std::vector<std::string>& strings() const;  // the elements of a string tensor

    int64_t numel() const { return shape_numel(shape); }
    size_t nbytes() const { return buf ? buf->size : 0; }
    const uint8_t* data() const { return buf->data; }
    uint8_t* data() { return buf->data; }
    template <class T>
    const T* ptr() const {
        return reinterpret_cast<const T*>(buf->data);
    }
    template <class T>
    T* ptr() {
        return reinterpret_cast<T*>(buf->data);
    }

    double getf(int64_t i) const;
    int64_t geti(int64_t i) const;
    void setf(int64_t i, double v);
    void seti(int64_t i, int64_t v);
    std::vector<int64_t> to_i64() const;
    std::vector<float> to_f32() const;
    Tensor cast(DType t) const;                   // shares the storage when t == dtype; to/from string as ONNX Cast
    Tensor transposed_last2() const;              // host transpose of the last two dims (a copy)
    void transposed_last2_into(void* dst) const;  // the same, written to dst (nbytes() of memory)
    Tensor reshaped(const Shape& s) const {
        Tensor r = *this;
        r.shape = s;
        return r;
    }
};

}  // namespace onnx2ggml::core
