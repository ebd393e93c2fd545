#include "util/limits.h"

#include <unistd.h>

#include <atomic>

#include "util/error.h"

namespace onnx2ggml::core {

static std::atomic<uint64_t> g_limit{0}, g_held{0};  // (sessions may run on several threads)

uint64_t memory_limit() {
    if (!g_limit) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        uint64_t none = 0;
        g_limit.compare_exchange_strong(none,
                                        pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : (uint64_t(1) << 34));
    }
    return g_limit;
}

void set_memory_limit(uint64_t bytes) { g_limit = bytes; }

uint64_t memory_held() { return g_held; }

void MemoryHold::set(uint64_t bytes) {
    g_held += bytes - n_;  // (modulo 2^64: a smaller hold subtracts)
    n_ = bytes;
}

uint64_t parse_size(const std::string& s) {
    if (s.empty()) bad_input("empty size");
    size_t n = 0;
    while (n < s.size() && isdigit(static_cast<unsigned char>(s[n]))) ++n;
    if (n == 0 || n > 15) bad_input("bad size '" + s + "' (expected e.g. 512M, 4G)");
    uint64_t v = std::stoull(s.substr(0, n));
    std::string unit = s.substr(n);
    if (unit == "" || unit == "B") return v;
    if (unit == "K" || unit == "KB") return v << 10;
    if (unit == "M" || unit == "MB") return v << 20;
    if (unit == "G" || unit == "GB") return v << 30;
    bad_input("bad size unit in '" + s + "' (use K, M or G)");
}

void check_memory(uint64_t bytes, const std::string& what) {
    uint64_t limit = memory_limit(), held = memory_held();
    if (bytes > limit || held > limit - bytes)
        throw MemoryLimit(what + " needs " + std::to_string(bytes >> 20) + " MiB, above the memory limit of " +
                  std::to_string(limit >> 20) + " MiB (--max-memory)" +
                  (held >> 20 ? " with the " + std::to_string(held >> 20) + " MiB this process's sessions hold" : ""));
}

}  // namespace onnx2ggml::core
