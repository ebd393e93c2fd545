#include "onnx/loader.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "util/error.h"
#include "util/limits.h"

namespace onnx2ggml::core {
namespace {

constexpr int64_t kMaxOpset = 22;  // newest ai.onnx opset whose operator semantics are implemented

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) bad_input(path + ": cannot open file");
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string dir_of(const std::string& path) {
    auto p = path.find_last_of('/');
    return p == std::string::npos ? std::string(".") : (p == 0 ? std::string("/") : path.substr(0, p));
}

struct Ctx {
    std::string file;                       // model path for messages
    std::string base_dir;                   // folder external data must stay in
    std::set<std::string> local_functions;  // "domain.name" of the model's local functions
    int depth = 0;                          // subgraph nesting
};

void build_body(const Ctx& c, const onnx::GraphProto& gp, onnx::GraphProto* mutable_gp, Graph& g, bool sub);

// Resolves an external-data location inside base_dir, or fails.
std::string confined_path(const Ctx& c, const std::string& loc, const std::string& tensor) {
    auto err = [&](const std::string& why) {
        bad_input(c.file + ": external data of tensor '" + tensor + "': location '" + loc + "' " + why);
    };
    if (loc.empty()) err("is empty");
    if (loc[0] == '/' || loc[0] == '\\' || loc.find(':') != std::string::npos) err("is an absolute path");
    if (loc.find('\0') != std::string::npos) err("contains a NUL byte");
    std::stringstream ss(loc);
    std::string seg;
    while (std::getline(ss, seg, '/'))
        if (seg == "..") err("contains a '..' segment");
    char base_real[PATH_MAX], full_real[PATH_MAX];
    if (!realpath(c.base_dir.c_str(), base_real)) err("cannot resolve the model folder");
    std::string full = std::string(base_real) + "/" + loc;
    if (!realpath(full.c_str(), full_real)) err("does not exist");
    std::string b = base_real, f = full_real;
    if (f.compare(0, b.size() + 1, b + "/") != 0) err("resolves outside the model's folder (symlink?)");
    struct stat st;
    if (stat(full_real, &st) != 0 || !S_ISREG(st.st_mode)) err("is not a regular file");
    return f;
}

// Parses a TensorProto. With `steal`, raw_data is taken over (no copy): the proto is left without it.
Tensor parse_tensor(const Ctx& c, const onnx::TensorProto& tp, const std::string& what,
                    onnx::TensorProto* steal = nullptr) {
    const std::string tname = tp.name().empty() ? what : tp.name();
    auto err = [&](const std::string& why) { bad_input(c.file + ": tensor '" + tname + "': " + why); };
    if (!dtype_known(tp.data_type()) && tp.data_type() != onnx::TensorProto::STRING)
        unsupported(c.file + ": tensor '" + tname + "': data type " + std::to_string(tp.data_type()) +
                    " is not supported");
    DType dt = DType(tp.data_type());
    Shape shape(tp.dims().begin(), tp.dims().end());
    for (int64_t d : shape)
        if (d < 0) err("negative dimension in " + shape_str(shape));
    int64_t n = shape_numel(shape);
    if (dt == DType::String) {  // string_data only (raw_data and external data hold numbers)
        if (tp.data_location() == onnx::TensorProto::EXTERNAL || tp.has_raw_data())
            err("a string tensor must hold its elements in string_data");
        if (tp.string_data_size() != n)
            err("holds " + std::to_string(tp.string_data_size()) + " strings but shape " + shape_str(shape) +
                " needs " + std::to_string(n));
        uint64_t total = 0;
        for (const auto& e : tp.string_data()) total += e.size() + sizeof(std::string);
        check_memory(total, "tensor '" + tname + "'");
        return Tensor::from_strings(std::vector<std::string>(tp.string_data().begin(), tp.string_data().end()), shape);
    }
    size_t es = dtype_size(dt);
    if (n > (int64_t(1) << 38) / int64_t(es)) err("shape " + shape_str(shape) + " is too large");
    size_t want = size_t(n) * es;

    if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
        std::string loc;
        int64_t offset = 0, length = -1;
        for (const auto& kv : tp.external_data()) {
            auto number = [&]() -> int64_t {
                const std::string& v = kv.value();
                if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
                    err("external data entry '" + kv.key() + "' is not a number: '" + v + "'");
                return std::stoll(v);
            };
            if (kv.key() == "location") loc = kv.value();
            else if (kv.key() == "offset") offset = number();
            else if (kv.key() == "length") length = number();
        }
        std::string path = confined_path(c, loc, tname);
        struct stat st;
        stat(path.c_str(), &st);
        int64_t fsize = st.st_size;
        if (offset < 0 || offset > fsize)
            err("external data offset " + std::to_string(offset) + " is outside '" + loc + "' (" +
                std::to_string(fsize) + " bytes)");
        if (length < 0) length = fsize - offset;
        if (length > fsize - offset)
            err("external data length " + std::to_string(length) + " at offset " + std::to_string(offset) +
                " runs past the end of '" + loc + "' (" + std::to_string(fsize) + " bytes)");
        if (size_t(length) != want)
            err("external data holds " + std::to_string(length) + " bytes but shape " + shape_str(shape) + " of " +
                dtype_name(dt) + " needs " + std::to_string(want));
        // mapped, not read: pages are loaded on first touch (upload) and released with the tensor
        Tensor t;
        t.dtype = dt;
        t.shape = shape;
        t.buf = map_file(path, offset, length);
        return t;
    }

    if (tp.has_raw_data()) {
        if (tp.raw_data().size() != want)
            err("raw_data holds " + std::to_string(tp.raw_data().size()) + " bytes but shape " + shape_str(shape) +
                " of " + dtype_name(dt) + " needs " + std::to_string(want));
        Tensor t;
        if (steal && want) {
            check_memory(want, "tensor '" + tname + "'");
            t.dtype = dt;
            t.shape = shape;
            t.buf = string_storage(std::move(*steal->mutable_raw_data()));
            steal->clear_raw_data();
            return t;
        }
        t = Tensor::zeros(dt, shape);
        if (want) std::memcpy(t.data(), tp.raw_data().data(), want);
        return t;
    }
    int64_t count = 0;
    switch (dt) {
        case DType::F32: count = tp.float_data_size(); break;
        case DType::F64: count = tp.double_data_size(); break;
        case DType::I64: count = tp.int64_data_size(); break;
        case DType::U32:
        case DType::U64: count = tp.uint64_data_size(); break;
        default: count = tp.int32_data_size(); break;
    }
    if (count != n) {
        if (count == 0 && n > 0) err("has no data for shape " + shape_str(shape));
        err("holds " + std::to_string(count) + " values but shape " + shape_str(shape) + " needs " + std::to_string(n));
    }
    Tensor t = Tensor::zeros(dt, shape);
    switch (dt) {
        case DType::F32:
            if (n) std::memcpy(t.data(), tp.float_data().data(), want);
            break;
        case DType::F64:
            if (n) std::memcpy(t.data(), tp.double_data().data(), want);
            break;
        case DType::I64:
            if (n) std::memcpy(t.data(), tp.int64_data().data(), want);
            break;
        case DType::U32:
        case DType::U64:
            for (int64_t i = 0; i < n; ++i) t.seti(i, int64_t(tp.uint64_data(int(i))));
            break;
        case DType::F16:
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) t.ptr<uint16_t>()[i] = uint16_t(tp.int32_data(int(i)));
            break;
        default:  // int32, int16, int8, uint8, uint16, bool
            for (int64_t i = 0; i < n; ++i) t.seti(i, tp.int32_data(int(i)));
            break;
    }
    return t;
}

Attr parse_attr(const Ctx& c, const onnx::AttributeProto& a, const std::string& node) {
    Attr r;
    int ty = a.type();
    if (ty == 0) {  // IR v1 files: infer the kind from the filled field
        if (a.has_f()) ty = 1;
        else if (a.has_i()) ty = 2;
        else if (a.has_s()) ty = 3;
        else if (a.has_t()) ty = 4;
        else if (a.has_g()) ty = 5;
        else if (a.floats_size()) ty = 6;
        else if (a.ints_size()) ty = 7;
        else if (a.strings_size()) ty = 8;
    }
    if (ty < 1 || ty > 14)
        bad_input(c.file + ": " + node + ": attribute '" + a.name() + "' has unknown type " + std::to_string(a.type()));
    r.kind = Attr::Kind(ty);
    switch (r.kind) {
        case Attr::Float: r.f = a.f(); break;
        case Attr::Int: r.i = a.i(); break;
        case Attr::String: r.s = a.s(); break;
        case Attr::TensorK: r.t = parse_tensor(c, a.t(), "attribute " + a.name() + " of " + node); break;
        case Attr::Floats: r.floats.assign(a.floats().begin(), a.floats().end()); break;
        case Attr::Ints: r.ints.assign(a.ints().begin(), a.ints().end()); break;
        case Attr::Strings: r.strings.assign(a.strings().begin(), a.strings().end()); break;
        case Attr::Graph: {  // If branches, Loop/Scan bodies: inlined at compile time (passes/pipeline)
            if (c.depth >= 16) bad_input(c.file + ": " + node + ": subgraphs nested more than 16 deep");
            Ctx sc = c;
            sc.depth++;
            r.g = std::make_shared<Graph>();
            r.g->path = c.file;
            r.g->name = a.g().name();
            build_body(sc, a.g(), nullptr, *r.g, true);
            break;
        }
        default: break;  // sparse tensors, type protos, lists of graphs: kept as their kind only
    }
    return r;
}

void read_type(const Ctx& c, const onnx::ValueInfoProto& vi, Value& v) {
    if (!vi.has_type() || !vi.type().has_tensor_type()) return;
    const auto& tt = vi.type().tensor_type();
    if (tt.elem_type() != 0) v.dtype = DType(tt.elem_type());
    if (!tt.has_shape()) return;
    v.shape.clear();
    v.dim_params.clear();
    for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
            if (d.dim_value() < 0)
                bad_input(c.file + ": value '" + vi.name() + "' has negative dimension " +
                          std::to_string(d.dim_value()));
            v.shape.push_back(d.dim_value());
            v.dim_params.push_back("");
        } else {
            v.shape.push_back(-1);
            v.dim_params.push_back(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
        }
    }
    v.has_shape = true;
}

Graph build(const Ctx& c, onnx::ModelProto& m) {
    Graph g;
    g.path = c.file;
    g.ir_version = m.ir_version();
    g.producer = m.producer_name();
    for (const auto& op : m.opset_import()) {
        std::string d = op.domain() == "ai.onnx" ? "" : op.domain();
        g.opsets[d] = op.version();
    }
    if (m.opset_import_size() == 0) g.opsets[""] = 1;  // IR v2 files without opset_import
    if (g.opsets.count("") && g.opsets[""] > kMaxOpset)
        unsupported(c.file + ": ai.onnx opset " + std::to_string(g.opsets[""]) +
                    " is newer than onnx2ggml supports (up to " + std::to_string(kMaxOpset) + ")");
    if (!m.has_graph()) bad_input(c.file + ": the model has no graph");
    g.name = m.graph().name();
    Ctx mc = c;
    for (const auto& f : m.functions()) mc.local_functions.insert(f.domain() + "." + f.name());
    build_body(mc, m.graph(), m.mutable_graph(), g, false);
    return g;
}

// The values, nodes (topologically sorted), inputs and outputs of a graph. A subgraph (`sub`)
// may read values of the graphs around it: those names become its free variables.
void build_body(const Ctx& c, const onnx::GraphProto& gp, onnx::GraphProto* mutable_gp, Graph& g, bool sub) {
    const std::set<std::string>& local_functions = c.local_functions;
    for (int k = 0; k < gp.initializer_size(); ++k) {
        onnx::TensorProto* owned =
            mutable_gp ? mutable_gp->mutable_initializer(k) : nullptr;  // its raw_data is taken over
        const onnx::TensorProto& init = gp.initializer(k);
        if (init.name().empty()) bad_input(c.file + ": an initializer has no name");
        if (g.find(init.name()) >= 0) bad_input(c.file + ": initializer '" + init.name() + "' is defined twice");
        int id = g.value_id(init.name());
        Value& v = g.values[id];
        v.constant = parse_tensor(c, init, "initializer", owned);
        v.dtype = v.constant->dtype;
        v.shape = v.constant->shape;
        v.has_shape = true;
        v.is_initializer = true;
    }
    if (gp.sparse_initializer_size() > 0) unsupported(c.file + ": sparse initializers are not supported");
    for (const auto& in : gp.input()) {
        if (in.name().empty()) bad_input(c.file + ": a graph input has no name");
        int existing = g.find(in.name());
        if (existing >= 0 && g.values[existing].is_initializer) continue;  // old-style: initializer listed as input
        if (existing >= 0) bad_input(c.file + ": graph input '" + in.name() + "' is declared twice");
        int id = g.value_id(in.name());
        if (sub) {  // bound to the caller's values when the subgraph is inlined
            read_type(c, in, g.values[id]);
            g.inputs.push_back(id);
            continue;
        }
        if (in.has_type() && !in.type().has_tensor_type())
            unsupported(c.file + ": graph input '" + in.name() +
                        "' is a sequence, map or optional: only tensors are supported");
        read_type(c, in, g.values[id]);
        if (!g.values[id].has_shape) bad_input(c.file + ": graph input '" + in.name() + "' has no tensor type/shape");
        if (!dtype_known(int(g.values[id].dtype)) && g.values[id].dtype != DType::String)
            unsupported(c.file + ": graph input '" + in.name() + "' has unsupported element type " +
                        std::to_string(int(g.values[id].dtype)));
        g.inputs.push_back(id);
    }

    // nodes, sorted topologically (Kahn); the file's order is kept where valid
    std::vector<Node> raw;
    std::unordered_map<std::string, int> producer_of;
    for (int i = 0; i < gp.node_size(); ++i) {
        const auto& np = gp.node(i);
        Node n;
        n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
        n.op_type = np.op_type();
        n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
        if (n.op_type.empty()) bad_input(c.file + ": node #" + std::to_string(i) + " has no op_type");
        for (const auto& a : np.attribute()) {
            if (n.attrs.count(a.name()))
                bad_input(c.file + ": " + n.describe() + ": attribute '" + a.name() + "' given twice");
            n.attrs[a.name()] = parse_attr(c, a, n.describe());
        }
        for (const auto& o : np.output()) {
            if (o.empty()) {
                n.outputs.push_back(-1);
                continue;
            }
            if (producer_of.count(o) ||
                (g.find(o) >= 0 && (g.values[g.find(o)].is_initializer ||
                                    std::find(g.inputs.begin(), g.inputs.end(), g.find(o)) != g.inputs.end())))
                bad_input(c.file + ": value '" + o + "' is produced twice (" + n.describe() + ")");
            producer_of[o] = int(raw.size());
            n.outputs.push_back(0);  // resolved below
        }
        raw.push_back(std::move(n));
    }
    std::vector<std::vector<std::string>> in_names(raw.size()), out_names(raw.size());
    for (int i = 0; i < gp.node_size(); ++i) {
        for (const auto& s : gp.node(i).input()) in_names[i].push_back(s);
        for (const auto& s : gp.node(i).output()) out_names[i].push_back(s);
    }
    std::vector<int> pending(raw.size(), 0);
    std::vector<std::vector<int>> users(raw.size());
    std::set<std::string> free;  // names read from the graphs around this one (subgraphs only)
    for (size_t i = 0; i < raw.size(); ++i) {
        std::set<int> deps;
        std::vector<std::string> used = in_names[i];
        for (const auto& kv : raw[i].attrs)  // a subgraph's reads of this graph's values order the node too
            if (kv.second.g) used.insert(used.end(), kv.second.g->free_vars.begin(), kv.second.g->free_vars.end());
        for (const auto& s : used) {
            if (s.empty()) continue;
            auto it = producer_of.find(s);
            if (it != producer_of.end()) deps.insert(it->second);
            else if (g.find(s) < 0) {
                if (sub) free.insert(s);
                else
                    bad_input(c.file + ": input '" + s + "' of " + raw[i].describe() +
                              " has no producer (not a graph input, initializer or node output)");
            }
        }
        for (int d : deps) {
            users[d].push_back(int(i));
            pending[i]++;
        }
    }
    std::vector<int> order, ready;
    for (size_t i = raw.size(); i-- > 0;)
        if (pending[i] == 0) ready.push_back(int(i));
    while (!ready.empty()) {
        // take the smallest index first to keep the file's order
        auto it = std::min_element(ready.begin(), ready.end());
        int i = *it;
        ready.erase(it);
        order.push_back(i);
        for (int u : users[i])
            if (--pending[u] == 0) ready.push_back(u);
    }
    if (order.size() != raw.size()) {
        for (size_t i = 0; i < raw.size(); ++i)
            if (pending[i] > 0) bad_input(c.file + ": the graph has a cycle through " + raw[i].describe());
    }
    for (int i : order) {
        Node n = std::move(raw[i]);
        for (const auto& s : in_names[i]) n.inputs.push_back(s.empty() ? -1 : g.value_id(s));
        for (size_t k = 0; k < out_names[i].size(); ++k) {
            const auto& s = out_names[i][k];
            n.outputs[k] = s.empty() ? -1 : g.value_id(s);
            if (n.outputs[k] >= 0) g.values[n.outputs[k]].producer = int(g.nodes.size());
        }
        if (local_functions.count(n.domain + "." + n.op_type)) n.domain = "local-function:" + n.domain;
        g.nodes.push_back(std::move(n));
    }
    for (const auto& vi : gp.value_info()) {
        int id = g.find(vi.name());
        if (id >= 0 && !g.values[id].is_initializer && g.values[id].dtype == DType::Undefined) {
            Value tmp;
            read_type(c, vi, tmp);
            g.values[id].dtype = tmp.dtype;
        }
    }
    for (const auto& o : gp.output()) {
        int id = g.find(o.name());
        if (id < 0 && sub) {  // a subgraph may output a value of the graphs around it
            free.insert(o.name());
            id = g.value_id(o.name());
        }
        if (id < 0) bad_input(c.file + ": graph output '" + o.name() + "' is not produced by any node");
        Value tmp;
        read_type(c, o, tmp);
        if (g.values[id].dtype == DType::Undefined) g.values[id].dtype = tmp.dtype;
        g.outputs.push_back(id);
        tmp.name = o.name();
        g.declared_outputs.push_back(std::move(tmp));
    }
    if (g.outputs.empty()) bad_input(c.file + ": the graph has no outputs");
    g.free_vars.assign(free.begin(), free.end());
}

bool parse_model(const std::string& bytes, onnx::ModelProto& m) {
    google::protobuf::io::ArrayInputStream raw(bytes.data(), int(bytes.size()));
    google::protobuf::io::CodedInputStream cis(&raw);
    cis.SetTotalBytesLimit(INT_MAX);
    return m.ParseFromCodedStream(&cis) && cis.ConsumedEntireMessage();
}

}  // namespace

Graph load_onnx_from_bytes(const std::string& bytes, const std::string& path, const std::string& base_dir) {
    if (bytes.size() >= size_t(INT_MAX))
        bad_input(path + ": file is over 2 GB; protobuf cannot hold it: store the weights as external data");
    onnx::ModelProto m;
    if (bytes.empty()) bad_input(path + ": file is empty");
    if (!parse_model(bytes, m))
        bad_input(path + ": not a valid ONNX model (protobuf parse failed: truncated or corrupted file?)");
    if (!m.has_graph() && m.ir_version() == 0) bad_input(path + ": not an ONNX model (no graph, no IR version)");
    Ctx c{path, base_dir, {}, 0};
    return build(c, m);
}

Graph load_onnx(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) bad_input(path + ": no such file");
    if (!S_ISREG(st.st_mode)) bad_input(path + ": not a regular file");
    if (st.st_size >= INT_MAX)
        bad_input(path + ": file is over 2 GB; protobuf cannot hold it: store the weights as external data");
    // parsed straight from the file (no second copy of the bytes); raw_data is then taken over
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) bad_input(path + ": cannot open file");
    onnx::ModelProto m;
    bool ok;
    {
        google::protobuf::io::FileInputStream raw(fd);
        google::protobuf::io::CodedInputStream cis(&raw);
        cis.SetTotalBytesLimit(INT_MAX);
        ok = m.ParseFromCodedStream(&cis) && cis.ConsumedEntireMessage();
    }
    close(fd);
    if (st.st_size == 0) bad_input(path + ": file is empty");
    if (!ok) bad_input(path + ": not a valid ONNX model (protobuf parse failed: truncated or corrupted file?)");
    if (!m.has_graph() && m.ir_version() == 0) bad_input(path + ": not an ONNX model (no graph, no IR version)");
    Ctx c{path, dir_of(path), {}, 0};
    return build(c, m);
}

Tensor load_tensor_pb(const std::string& path, std::string* name) {
    std::string bytes = read_file(path);
    onnx::TensorProto tp;
    if (!tp.ParseFromString(bytes)) bad_input(path + ": not a valid TensorProto");
    if (name) *name = tp.name();
    Ctx c{path, dir_of(path), {}, 0};
    return parse_tensor(c, tp, "tensor");
}

}  // namespace onnx2ggml::core
