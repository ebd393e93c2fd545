// Names of the custom CPU kernels (o2g_kernels.h) as the generated C++ spells them.
#include "lower/builder.h"
#include "o2g_kernels.h"
#include "util/error.h"

namespace onnx2ggml::core {

std::string Builder::kernel_name(void* f) {
#define K1(n) \
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom1_op_t>(o2g::n))) return "o2g::" #n;
#define K2(n) \
    if (f == reinterpret_cast<void*>(static_cast<ggml_custom2_op_t>(o2g::n))) return "o2g::" #n;
    K1(erf)
    K1(sign) K1(round_even) K1(isnan) K1(isinf) K1(isinf_pos) K1(isinf_neg) K1(logical_not) K1(softsign)
        K1(hardmax_rows) K1(tan) K1(asin) K1(acos) K1(atan) K1(sinh) K1(cosh) K1(asinh) K1(acosh) K1(atanh) K2(equal)
            K2(less) K2(greater) K2(less_equal) K2(greater_equal) K2(logical_and) K2(logical_or) K2(logical_xor) K2(pow)
                K2(fmod) K2(max) K2(min)
#undef K1
#undef K2
                    if (f == reinterpret_cast<void*>(static_cast<ggml_custom3_op_t>(o2g::where))) return "o2g::where";
    internal_error("custom kernel without a name");
}

}  // namespace onnx2ggml::core
