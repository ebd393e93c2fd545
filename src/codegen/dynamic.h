// `compile --dim NAME=VALUES`: a generated program whose input shapes are taken at run time.
//
// The lowering works on concrete shapes, so the compiler records the program once per combination of the
// dynamic dims' values (a grid). Combinations whose recordings are the same program up to its numbers form a
// variant (the lowering may make other ggml calls where a dim is 1: at most 8 variants, picked at run time).
// Within a variant, each number that varies becomes an expression of the dims: the lowest-degree polynomial
// (<= 2 per dim, exact rational arithmetic) that gives the recorded number at every combination, else a table
// over the grid (`o2g_pick`). The program therefore computes, at each combination, exactly the program `run`
// computes for that shape (bit-identical), and refuses shapes off the grid (exit 2, listing the values).
// Weights that depend on the dims (constants folded from shapes) fail compile with exit 3 naming the weight
// and the two combinations; `run` takes any shape. Host kernels' records (which hold shapes) are stored once
// per distinct record, the kernel numbers in the code varying like any other number.
#pragma once
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "passes/pipeline.h"

namespace onnx2ggml::core {

struct DynamicDim {
    std::string name;             // a symbolic dim name (dim_param) of the model's inputs
    std::vector<int64_t> values;  // the values the program takes, ascending
};

// `loaded`: the graph as loaded; copts.input_shapes fixes other dynamic dims (its entries' axes named by a --dim
// take the grid's values).
EmitReport emit_dynamic_project(const Graph& loaded, const CompileOptions& copts, const std::vector<DynamicDim>& dims,
                                const std::string& outdir, const std::string& model_path,
                                const WeightRules& weight_rules, const GgufMeta& model_meta);

// The expression (C++, of the identifiers `names`) of the numbers `y` recorded at the grid's points (dim 0 the
// slowest), or "" when no polynomial of degree <= 2 per dim gives all of them (exposed for the unit tests).
std::string fit_expression(const std::vector<std::vector<int64_t>>& grid_values, const std::vector<std::string>& names,
                           const std::vector<int64_t>& y);

}  // namespace onnx2ggml::core
