// The memory budget (--max-memory, default: physical memory). Host tensors and ggml buffers
// are checked against it before they are allocated, so that an absurd model or input ends in
// a clear error instead of the OOM killer.
#pragma once
#include <cstdint>
#include <string>

namespace onnx2ggml::core {

uint64_t memory_limit();
void set_memory_limit(uint64_t bytes);
uint64_t parse_size(const std::string& s);                   // "512M", "4G", "1000000"; throws Error(2)
void check_memory(uint64_t bytes, const std::string& what);  // throws Error(2) above the limit

}  // namespace onnx2ggml::core
