// Names of the custom CPU kernels (o2g_kernels.h) as the generated C++ spells them, from o2g_kernels.h's own lists.
#include "lower/builder.h"
#include "o2g_kernels.h"
#include "util/error.h"

namespace onnx2ggml::core {

std::string Builder::kernel_name(void* f) {
#define K1(n, expr) \
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom1_op_t>(o2g::n))) return "o2g::" #n;
#define K2(n, expr) \
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom2_op_t>(o2g::n))) return "o2g::" #n;
    O2G_UNARY_KERNELS(K1)
    O2G_BINARY_KERNELS(K2)
#undef K1
#undef K2
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom1_op_t>(o2g::hardmax_rows))) return "o2g::hardmax_rows";
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom3_op_t>(o2g::where))) return "o2g::where";
    internal_error("custom kernel without a name");
}

}  // namespace onnx2ggml::core
