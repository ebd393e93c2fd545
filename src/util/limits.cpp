#include "util/limits.h"

#include <unistd.h>

#include "util/error.h"

namespace onnx2ggml::core {

static uint64_t g_limit = 0;

uint64_t memory_limit() {
    if (!g_limit) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        g_limit = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : (uint64_t(1) << 34);
    }
    return g_limit;
}

void set_memory_limit(uint64_t bytes) { g_limit = bytes; }

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
    if (bytes > memory_limit())
        bad_input(what + " needs " + std::to_string(bytes >> 20) + " MiB, above the memory limit of " +
                  std::to_string(memory_limit() >> 20) + " MiB (--max-memory)");
}

}  // namespace onnx2ggml::core
