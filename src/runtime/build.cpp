#include "runtime/build.h"

#include "passes/pipeline.h"

namespace onnx2ggml {

BuiltGraph::~BuiltGraph() {
    if (cctx) ggml_free(cctx);
    if (wctx) ggml_free(wctx);
}

std::unique_ptr<BuiltGraph> build_graph(Graph& g, bool record) {
    auto bg = std::make_unique<BuiltGraph>();
    size_t n = g.nodes.size() + g.values.size() + 64;
    bg->max_tensors = std::min<size_t>(64 * n, size_t(1) << 21);
    bg->graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, bg->max_tensors);
    ggml_init_params wp = {ggml_tensor_overhead() * (g.values.size() * 2 + 64 + n), nullptr, true};
    ggml_init_params cp = {ggml_tensor_overhead() * bg->max_tensors + ggml_graph_overhead_custom(bg->graph_size, false), nullptr, true};
    bg->wctx = ggml_init(wp);
    bg->cctx = ggml_init(cp);
    if (!bg->wctx || !bg->cctx) fail(kExitInternal, "cannot allocate ggml contexts");
    bg->b = std::make_unique<Builder>(bg->cctx, bg->wctx, record);
    lower_graph(g, *bg->b);
    bg->gf = ggml_new_graph_custom(bg->cctx, bg->graph_size, false);
    for (ggml_tensor* t : bg->b->outputs)
        if (t) ggml_build_forward_expand(bg->gf, t);
    return bg;
}

std::map<std::string, int> ggml_op_histogram(const ggml_cgraph* gf) {
    std::map<std::string, int> h;
    ggml_cgraph* g = const_cast<ggml_cgraph*>(gf);
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) h[ggml_op_desc(ggml_graph_node(g, i))]++;
    return h;
}

}  // namespace onnx2ggml
