// Host kernels: a node that ggml cannot compute exactly (integer arithmetic, float64,
// float16/int8 tensors, ops without a ggml kernel such as TopK or ScatterND) runs its
// operator's host evaluator -- the code that constant folding uses -- as a ggml custom op
// on the CPU, at run time. The value is exact in the node's own dtype: nothing is computed
// in a lower precision than the model asks for.
//
// `compile` emits a host kernel as a call of o2g_host::kernel (src/codegen/template/o2g_host.cpp): the
// kernel's record (save_host_kernel) goes into model.gguf, and the generated project builds the evaluators
// from the sources that onnx2ggml ships with it (OUTDIR/o2g_host/), so it computes the same bits as `run`.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml.h"
#include "ir/graph.h"

namespace onnx2ggml::core {

class LowerCtx;
struct OpDef;

// The threads of ggml's CPU backend computing one host kernel node: thread 0 runs the evaluator; the
// others wait in the node, blocked (not spinning at ggml's barrier against the evaluator's work), for the
// items the evaluator shares out with host_parallel_for, until it is done.
struct HostTeam {
    std::mutex m;
    std::condition_variable cv;
    int helpers = 0;                                    // threads besides thread 0 in this run of the node
    int left = 0;                                       // helpers that have left it
    bool done = false;                                  // the evaluator has finished
    const std::function<void(int64_t)>* job = nullptr;  // the current parallel_for and its items
    int64_t items = 0, next = 0, pending = 0;
    std::exception_ptr error;
};

struct HostKernel {
    const OpDef* def = nullptr;
    Graph node_graph;            // the node alone: node 0, its inputs (constants kept) and outputs
    std::vector<int> arg_input;  // ggml src j holds node input arg_input[j]
    int out = 0;                 // the node output this kernel writes
    std::string node_desc;       // "model.onnx: node 'x' (Op)" for run-time errors
    std::mutex m;
    int error_code = 0;  // first run-time error (an Error's exit code)
    std::string error;
    HostTeam team;
};

// The kernel as bytes (its node graph with the constant inputs, which node inputs the ggml sources hold, its
// output, its description) and back; load_host_kernel finds the operator in the registry and throws
// Error(kExitBadInput) naming `what` on a malformed record.
std::string save_host_kernel(const HostKernel& k);
std::shared_ptr<HostKernel> load_host_kernel(const std::string& bytes, const std::string& what);
// The ggml node that computes k (a custom op entered by every thread of the CPU backend); k outlives the graph.
ggml_tensor* host_kernel_node(ggml_context* ctx, HostKernel* k, ggml_type type, const int64_t ne[4],
                              std::vector<ggml_tensor*> args);
// The first run-time error of any of `kernels` (e.g. an index out of range in the data), cleared: false if none.
bool take_host_kernel_error(const std::vector<std::shared_ptr<HostKernel>>& kernels, int* code, std::string* msg);

// fn(0) ... fn(n - 1), shared with the other threads of the host kernel being computed (in any order,
// concurrently); in a loop on the calling thread elsewhere (folding) or with one thread. Rethrows the
// first exception of fn once all items have finished.
void host_parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

// Lowers the node of `c` to host kernels, one per output. `why` says why the ggml lowering
// does not apply; it is the message when the node cannot run on the host either.
void lower_on_host(LowerCtx& c, const std::string& why);

// The bytes of host tensor t as held in a ggml tensor of `type` (see ggml_type_for):
// float32 for floats/bools held as F32, int32 for int64 (range-checked), else bit for bit.
Tensor to_storage(const Tensor& t, ggml_type type);
// The host tensor of dtype `dtype` held in `data`, a contiguous ggml tensor of `type`.
Tensor from_storage(const void* data, ggml_type type, DType dtype, const Shape& s);

}  // namespace onnx2ggml::core
