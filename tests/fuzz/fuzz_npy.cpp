// libFuzzer target: .npy parsing (the reader shared by onnx2ggml and the generated programs).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static std::string path = "/tmp/onnx2ggml-fuzz-npy-" + std::to_string(getpid()) + ".npy";
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    npy::Array a;
    std::string err = npy::read(path, a);
    if (err.empty()) {
        size_t n = 1;
        for (auto d : a.shape) n *= size_t(d);
        if (n * npy::item_size(a.descr) != a.data.size()) __builtin_trap();  // the reader's own invariant
    }
    return 0;
}
