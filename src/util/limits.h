// The memory budget (--max-memory, default: physical memory), the process's: host tensors and ggml
// buffers are checked against it before they are allocated, counting the ggml buffers every session
// of the process holds (MemoryHold), so that an absurd model or input, or one session too many, ends
// in a clear error instead of the OOM killer.
#pragma once
#include <cstdint>
#include <string>

namespace onnx2ggml::core {

uint64_t memory_limit();
void set_memory_limit(uint64_t bytes);
uint64_t parse_size(const std::string& s);  // "512M", "4G", "1000000"; throws Error(2)
// throws Error(2) when `bytes` more would take what the process holds (memory_held) above the limit
void check_memory(uint64_t bytes, const std::string& what);

// The bytes of the ggml buffers this process holds: every session's weights and compute buffers and
// the weight pools its specializations share (not host tensors, which are transient or mapped from files,
// nor what a backend keeps on its own, such as oneDNN's reordered kernels).
uint64_t memory_held();

// Counts `bytes` in memory_held() while it lives (set again to change it; neither copied nor moved).
class MemoryHold {
public:
    MemoryHold() = default;
    MemoryHold(const MemoryHold&) = delete;
    MemoryHold& operator=(const MemoryHold&) = delete;
    ~MemoryHold() { set(0); }
    void set(uint64_t bytes);
    uint64_t bytes() const { return n_; }

private:
    uint64_t n_ = 0;
};

}  // namespace onnx2ggml::core
