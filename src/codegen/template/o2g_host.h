// Host kernels in a generated program (onnx2ggml's src/lower/host_kernel.h): nodes that ggml cannot compute
// exactly (integer arithmetic, float64, TopK, ScatterND, LSTM, NonMaxSuppression, ...) run onnx2ggml's host
// evaluator as a ggml custom op on the CPU, as in `onnx2ggml run`. Each kernel's node and constant inputs are a
// record in model.gguf; the evaluators are built from the sources under o2g_host/ (CMakeLists.txt).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "ggml.h"
#include "gguf.h"

namespace o2g_host {

// Reads the records of host kernels 0..n-1 from `gg` (the GGUF file `file`): "" or what is wrong.
std::string load(gguf_context* gg, const std::string& file, int n);
// The node of host kernel k (model::build calls it where the model needs it).
ggml_tensor* kernel(ggml_context* ctx, int k, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                    std::initializer_list<ggml_tensor*> args);
// After a compute: the first run-time error of a host kernel (e.g. an index out of range in the data) and its
// exit code, cleared; "" if none.
std::string take_error(int* code);

}  // namespace o2g_host
