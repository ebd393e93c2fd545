// A Graph as bytes and back: what a generated program needs to rebuild a graph that onnx2ggml
// made (a host kernel's node with its constant inputs, codegen stores it in the GGUF file). The format is
// onnx2ggml's own, versioned, little-endian; load_graph checks every length against the bytes it is given
// and throws Error(kExitBadInput) on anything malformed, never reading past the end.
#pragma once
#include <string>

#include "ir/graph.h"

namespace onnx2ggml::core {

std::string save_graph(const Graph& g);
// `what` names the bytes' origin in errors ("model.gguf: host kernel 3")
Graph load_graph(const std::string& bytes, const std::string& what);

// The same writer and reader for the pieces other records are made of (lower/host_kernel.cpp)
class ByteWriter {
public:
    void u64(uint64_t v);
    void i64(int64_t v) { u64(uint64_t(v)); }
    void f32(float v);
    void f64(double v);
    void str(const std::string& s);
    void graph(const Graph& g);
    std::string bytes;

private:
    void tensor(const Tensor& t);
    void value(const Value& v);
    void attr(const Attr& a);
};

class ByteReader {
public:
    ByteReader(const std::string& b, std::string what) : b_(b), what_(std::move(what)) {}
    uint64_t u64();
    int64_t i64() { return int64_t(u64()); }
    int64_t count(uint64_t item_bytes = 1);  // a length whose items (of at least item_bytes each) fit the rest
    float f32();
    double f64();
    std::string str();
    Graph graph(int depth = 0);
    bool at_end() const { return pos_ == b_.size(); }
    [[noreturn]] void malformed(const std::string& why) const;

private:
    Tensor tensor();
    Value value();
    Attr attr(int depth);
    const std::string& b_;
    std::string what_;
    size_t pos_ = 0;
};

}  // namespace onnx2ggml::core
