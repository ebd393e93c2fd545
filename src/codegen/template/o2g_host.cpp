// Host kernels in a generated program: see o2g_host.h.
#include "o2g_host.h"

#include <memory>
#include <vector>

#include "lower/host_kernel.h"
#include "lower/weights.h"
#include "util/error.h"

namespace o2g_host {

using onnx2ggml::core::HostKernel;
static std::vector<std::shared_ptr<HostKernel>> kernels;  // the graph's custom ops point at them

std::string load(gguf_context* gg, const std::string& file, int n) {
    try {
        kernels.clear();
        for (int k = 0; k < n; ++k) {
            std::string key = onnx2ggml::core::gguf_keys::host_kernel + std::to_string(k);
            int64_t id = gguf_find_key(gg, key.c_str());
            if (id < 0 || gguf_get_kv_type(gg, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(gg, id) != GGUF_TYPE_UINT8)
                return file + ": host kernel " + std::to_string(k) + " is missing (not this model's GGUF file?)";
            const char* p = static_cast<const char*>(gguf_get_arr_data(gg, id));
            std::string bytes(p, p + gguf_get_arr_n(gg, id));
            kernels.push_back(onnx2ggml::core::load_host_kernel(bytes, file + ": host kernel " + std::to_string(k)));
        }
    } catch (const std::exception& e) { return e.what(); }
    return "";
}

ggml_tensor* kernel(ggml_context* ctx, int k, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                    std::initializer_list<ggml_tensor*> args) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return onnx2ggml::core::host_kernel_node(ctx, kernels.at(size_t(k)).get(), type, ne, args);
}

std::string take_error(int* code) {
    std::string msg;
    return onnx2ggml::core::take_host_kernel_error(kernels, code, &msg) ? msg : "";
}

}  // namespace o2g_host
