#include "runtime/dot.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include "passes/pipeline.h"
#include "util/error.h"

namespace onnx2ggml::core {

static std::string esc(const std::string& s) {
    std::string r;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') r += '\\', r += char(c);
        else if (c == '\n') r += "\\n";
        else if (c >= 0x20) r += char(c);
    }
    return r;
}

static const char* backend_color(const std::string& b) {
    if (b.empty()) return "#eeeeee";
    if (b == "host") return "#fb6a4a";  // a host kernel: the node leaves ggml
    if (b == "oneDNN") return "#9ecae1";
    if (b == "CPU") return "#fdd0a2";
    return "#a1d99b";  // a GPU or other device
}

// "/down_blocks.0/resnets.0/conv1/Conv" -> {"down_blocks.0", "resnets.0", "conv1"} (the module path)
static std::vector<std::string> module_path(const std::string& name, int depth) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : name) {
        if (c == '/') {
            if (!cur.empty()) parts.push_back(cur);
            cur.clear();
        } else cur += c;
    }
    if (parts.size() > size_t(depth)) parts.resize(size_t(depth));
    return parts;
}

namespace {
struct Cluster {
    std::map<std::string, Cluster> children;
    std::vector<std::string> lines;  // node statements
};

void emit(std::ostringstream& out, const Cluster& c, int& id, int indent) {
    std::string pad(size_t(indent) * 2, ' ');
    for (auto& l : c.lines) out << pad << l << "\n";
    for (auto& kv : c.children) {
        if (kv.second.children.empty() && kv.second.lines.size() == 1) {  // a module of one node: no box around it
            out << pad << kv.second.lines[0] << "\n";
            continue;
        }
        out << pad << "subgraph cluster_" << id++ << " {\n"
            << pad << "  label=\"" << esc(kv.first) << "\"; style=rounded; color=\"#999999\";\n";
        emit(out, kv.second, id, indent + 1);
        out << pad << "}\n";
    }
}
}  // namespace

std::string onnx_graph_dot(const Graph& g, const DotOptions& o) {
    std::map<int, const CompareRow*> row_of;  // value id -> its compare row
    if (o.compare)
        for (auto& r : o.compare->rows) {
            int id = g.find(r.value);
            if (id >= 0) row_of[id] = &r;
        }
    std::vector<bool> live = live_nodes(g);
    Cluster root;
    std::ostringstream edges;
    for (size_t k = 0; k < g.inputs.size(); ++k) {
        const Value& v = g.values[size_t(g.inputs[k])];
        root.lines.push_back("v" + std::to_string(g.inputs[k]) + " [shape=ellipse, label=\"" + esc(v.name) + "\\n" +
                             shape_str(v.shape) + "\"];");
    }
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
        if (!live[ni]) continue;
        const Node& n = g.nodes[ni];
        std::string label = (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
        std::string tail = n.name.substr(n.name.rfind('/') == std::string::npos ? 0 : n.name.rfind('/') + 1);
        if (!tail.empty() && tail != n.op_type) label += "\n" + tail;
        std::string fill = "#eeeeee", extra;
        int out0 = n.outputs.empty() ? -1 : n.outputs[0];
        if (o.compare) {
            auto it = row_of.find(out0);
            if (it != row_of.end() && it->second->compared) {
                const CompareRow& r = *it->second;
                char b[48];
                snprintf(b, sizeof b, "\nerr %.2g", r.rel);
                label += b;
                fill = r.first ? "#de2d26" : r.over ? "#fc9272" : r.rel > o.tolerance / 10 ? "#fff7bc" : "#c7e9c0";
                if (r.first) extra = ", penwidth=3";
            }
        } else if (o.session && out0 >= 0) {
            std::string be = o.session->value_backend(out0);
            fill = backend_color(be);
            if (be == "host") label += "\n(host kernel)";
        }
        Cluster* c = &root;
        for (auto& p : module_path(n.name, o.cluster_depth)) c = &c->children[p];
        c->lines.push_back("n" + std::to_string(ni) + " [label=\"" + esc(label) + "\", fillcolor=\"" + fill + "\"" +
                           extra + "];");
        for (int in : n.inputs) {
            if (in < 0) continue;
            const Value& v = g.values[size_t(in)];
            std::string from = v.producer >= 0 && live[size_t(v.producer)] ? "n" + std::to_string(v.producer)
                               : std::find(g.inputs.begin(), g.inputs.end(), in) != g.inputs.end()
                                   ? "v" + std::to_string(in)
                                   : "";
            if (!from.empty()) edges << "  " << from << " -> n" << ni << " [label=\"" << shape_str(v.shape) << "\"];\n";
        }
    }
    for (int id : g.outputs) {
        const Value& v = g.values[size_t(id)];
        root.lines.push_back("o" + std::to_string(id) + " [shape=ellipse, label=\"" + esc(v.name) + "\\n" +
                             shape_str(v.shape) + "\"];");
        if (v.producer >= 0 && live[size_t(v.producer)]) edges << "  n" << v.producer << " -> o" << id << ";\n";
    }
    std::ostringstream out;
    out << "digraph onnx2ggml {\n  rankdir=TB; node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
           "fontsize=10];\n"
        << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#666666\"];\n";
    if (o.compare)
        out << "  label=\"error vs " << esc(o.compare->reference)
            << ": green < tol/10, yellow < tol, red > tol, dark red: first divergence\";\n";
    else if (o.session)
        out << "  label=\"backend: blue oneDNN, orange ggml CPU, green GPU, red host kernel, grey none (constant or "
               "fused)\";\n";
    int id = 0;
    emit(out, root, id, 1);
    out << edges.str() << "}\n";
    return out.str();
}

std::string ggml_graph_dot(const Session& s) {
    ggml_cgraph* gf = const_cast<ggml_cgraph*>(s.ggml_graph());
    std::map<const ggml_tensor*, int> index;
    std::ostringstream out;
    out << "digraph ggml {\n  rankdir=TB; node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
           "fontsize=10];\n"
        << "  edge [color=\"#666666\"];\n"
        << "  label=\"backend: blue oneDNN, orange ggml CPU, green GPU, red host kernel\";\n";
    for (int i = 0; gf && i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor* t = ggml_graph_node(gf, i);
        index[t] = i;
        std::string ne = "[" + std::to_string(t->ne[0]) + "," + std::to_string(t->ne[1]) + "," +
                         std::to_string(t->ne[2]) + "," + std::to_string(t->ne[3]) + "]";
        out << "  t" << i << " [label=\"" << esc(std::string(ggml_op_desc(t)) + "\n" + t->name + "\n" + ne)
            << "\", fillcolor=\"" << backend_color(s.tensor_backend(t)) << "\"];\n";
        for (ggml_tensor* src : t->src) {
            auto it = src ? index.find(src) : index.end();
            if (it != index.end()) out << "  t" << it->second << " -> t" << i << ";\n";
        }
    }
    out << "}\n";
    return out.str();
}

void write_picture(const std::string& dot, const std::string& file, bool svg) {
    std::string text = svg ? file + ".dot.tmp" : file;
    {
        std::ofstream f(text);
        if (!(f << dot)) bad_input(text + ": cannot write");
    }
    if (!svg) return;
    std::string quoted_in = "'" + text + "'", quoted_out = "'" + file + "'";
    for (const std::string& p : {text, file})
        if (p.find('\'') != std::string::npos) bad_input(p + ": a file name with a quote");
    if (std::system("command -v dot >/dev/null 2>&1") != 0) {
        std::remove(text.c_str());
        bad_input(
            "--svg needs Graphviz's dot (Debian: graphviz; scripts/setup.sh installs it); --dot FILE writes the DOT "
            "text");
    }
    int rc = std::system(("dot -Tsvg " + quoted_in + " -o " + quoted_out).c_str());
    std::remove(text.c_str());
    if (rc != 0) bad_input(file + ": Graphviz's dot failed (exit " + std::to_string(rc) + ")");
}

}  // namespace onnx2ggml::core
