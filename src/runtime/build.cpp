#include "runtime/build.h"

#include <algorithm>

#include "passes/pipeline.h"

namespace onnx2ggml::core {

BuiltGraph::~BuiltGraph() {
    if (cctx) ggml_free(cctx);
    if (wctx) ggml_free(wctx);
}

std::unique_ptr<BuiltGraph> build_graph(Graph& g, bool record, const WeightRules& weight_rules, WeightShare* share,
                                        bool keep_values, bool no_inplace) {
    size_t n = g.nodes.size() + g.values.size() + 64;
    size_t tensors = std::min<size_t>(16 * n, size_t(1) << 20);
    for (;;) {  // the lowering's tensor count is not known up front: grow the contexts until it fits
        auto bg = std::make_unique<BuiltGraph>();
        bg->max_tensors = tensors;
        bg->graph_size = std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, tensors);
        ggml_init_params wp = {ggml_tensor_overhead() * (tensors + 64), nullptr, true};
        ggml_init_params cp = {
            ggml_tensor_overhead() * (tensors + 64) + ggml_graph_overhead_custom(bg->graph_size, false), nullptr, true};
        bg->wctx = ggml_init(wp);
        bg->cctx = ggml_init(cp);
        if (!bg->wctx || !bg->cctx) fail(kExitInternal, "cannot allocate ggml contexts");
        bg->b = std::make_unique<Builder>(bg->cctx, bg->wctx, record);
        bg->b->weight_rules = weight_rules;
        bg->b->share = share;
        bg->b->keep_values = keep_values;
        bg->b->no_inplace = no_inplace;
        if (share) share->begin(tensors);
        try {
            lower_graph(g, *bg->b);
        } catch (const Builder::ContextFull&) {
            if (tensors >= (size_t(1) << 24))
                unsupported(g.path + ": the lowered ggml graph has more than 16M tensors");
            tensors *= 4;
            continue;
        }
        // the graph object comes last in the compute context: grow the contexts if the lowering left no room
        if (ggml_used_mem(bg->cctx) + ggml_graph_overhead_custom(bg->graph_size, false) > ggml_get_mem_size(bg->cctx)) {
            if (tensors >= (size_t(1) << 24))
                unsupported(g.path + ": the lowered ggml graph has more than 16M tensors");
            tensors *= 4;
            continue;
        }
        bg->gf = ggml_new_graph_custom(bg->cctx, bg->graph_size, false);
        for (ggml_tensor* t : bg->b->outputs)
            if (t) ggml_build_forward_expand(bg->gf, t);
        for (ggml_tensor* t : bg->b->values)  // kept: their memory is never reused for later tensors
            if (t && keep_values) {
                ggml_set_output(t->view_src ? t->view_src : t);
                ggml_build_forward_expand(bg->gf, t);
            }
        return bg;
    }
}

std::map<std::string, int> ggml_op_histogram(const ggml_cgraph* gf) {
    std::map<std::string, int> h;
    ggml_cgraph* g = const_cast<ggml_cgraph*>(gf);
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) h[ggml_op_desc(ggml_graph_node(g, i))]++;
    return h;
}

}  // namespace onnx2ggml::core
