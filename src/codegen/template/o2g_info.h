// What this binary was built from, for `--version` of `onnx2ggml` and of every generated program:
// the ggml version and commit it was compiled against, the oneDNN version when the oneDNN backend is
// built in, and the ggml backends registered in this process with the devices each one sees.
// Header-only: the CLI includes it, and `compile` writes it next to every generated program.
#pragma once
#include <string>

#include "ggml-backend.h"
#include "ggml.h"
#include "o2g_onednn.h"
#ifdef O2G_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace o2g_info {

// The lines after onnx2ggml's own version line (each ends in '\n').
inline std::string build_info() {
#ifdef O2G_USE_ONEDNN
    o2g_onednn::register_backend();
#endif
    std::string s = std::string("ggml ") + ggml_version() + " (commit " + ggml_commit() + ")\n";
#ifdef O2G_USE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    s += "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " (commit " + (v->hash && *v->hash ? v->hash : "unknown") + ")\n";
#else
    s += "oneDNN: not built in\n";
#endif
    s += "backends:\n";
    for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
        ggml_backend_reg_t reg = ggml_backend_reg_get(i);
        s += std::string("  ") + ggml_backend_reg_name(reg) + ":";
        size_t n = ggml_backend_reg_dev_count(reg);
        if (n == 0) s += " no device";
        for (size_t d = 0; d < n; ++d) {
            ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, d);
            s += std::string(d ? ", " : " ") + ggml_backend_dev_name(dev) + " (" + ggml_backend_dev_description(dev) +
                 ")";
        }
        s += "\n";
    }
    return s;
}

}  // namespace o2g_info
