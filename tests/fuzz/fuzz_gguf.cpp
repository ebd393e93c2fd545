// libFuzzer target: reading GGUF weight files as the generated programs do (ggml's GGUF
// parser with no_alloc, then the per-weight lookups and size checks of main.cpp, and the host kernels' records
// that o2g_host.cpp reads).
#include <cstdint>
#include <string>

#include "ggml.h"
#include "gguf.h"
#include "lower/host_kernel.h"
#include "lower/weights.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static bool quiet =
        (ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr), true);  // GGUF errors are expected here
    (void)quiet;
    ggml_context* ctx = nullptr;
    gguf_init_params p = {true, &ctx};
    gguf_context* g = gguf_init_from_buffer(data, size, p);
    if (!g) return 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        std::string n = "w" + std::to_string(i);
        ggml_tensor* t = ggml_get_tensor(ctx, n.c_str());
        if (!t) continue;
        int64_t id = gguf_find_tensor(g, t->name);
        size_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, id);
        if (off + ggml_nbytes(t) > size) continue;  // main.cpp reports such a file as truncated
    }
    const std::string prefix = onnx2ggml::core::gguf_keys::host_kernel;
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        if (std::string(gguf_get_key(g, i)).rfind(prefix, 0) != 0 || gguf_get_kv_type(g, i) != GGUF_TYPE_ARRAY ||
            gguf_get_arr_type(g, i) != GGUF_TYPE_UINT8)
            continue;
        const char* p = static_cast<const char*>(gguf_get_arr_data(g, i));
        try {
            onnx2ggml::core::load_host_kernel(std::string(p, p + gguf_get_arr_n(g, i)), "fuzz");
        } catch (const onnx2ggml::core::Error&) {}  // a malformed record: exit 2 in the generated program
    }
    gguf_free(g);
    if (ctx) ggml_free(ctx);
    return 0;
}
