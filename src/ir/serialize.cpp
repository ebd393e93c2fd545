#include "ir/serialize.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace onnx2ggml::core {

namespace {
constexpr uint64_t kMagic = 0x314752474732474fULL;  // "O2GGRG1" + version: bump when the layout changes
constexpr int kMaxDepth = 64;                       // subgraphs inside subgraphs
}  // namespace

// ---- writing ----------------------------------------------------------------------------

void ByteWriter::u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(char(uint8_t(v >> (8 * i))));
}

void ByteWriter::f32(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u64(u);
}

void ByteWriter::f64(double v) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    u64(u);
}

void ByteWriter::str(const std::string& s) {
    u64(s.size());
    bytes += s;
}

void ByteWriter::tensor(const Tensor& t) {
    i64(int64_t(t.dtype));
    u64(t.shape.size());
    for (int64_t d : t.shape) i64(d);
    if (t.dtype == DType::String) {
        const auto& items = t.strings();
        u64(items.size());
        for (const auto& s : items) str(s);
        return;
    }
    u64(t.nbytes());
    if (t.nbytes()) bytes.append(reinterpret_cast<const char*>(t.data()), t.nbytes());
}

void ByteWriter::value(const Value& v) {
    str(v.name);
    i64(int64_t(v.dtype));
    u64(v.shape.size());
    for (int64_t d : v.shape) i64(d);
    u64(v.has_shape);
    u64(v.dim_params.size());
    for (const auto& p : v.dim_params) str(p);
    u64(v.constant.has_value());
    if (v.constant) tensor(*v.constant);
    u64(v.seq.has_value());
    if (v.seq) {
        u64(v.seq->size());
        for (int id : *v.seq) i64(id);
    }
    i64(v.producer);
    u64(v.is_initializer);
}

void ByteWriter::attr(const Attr& a) {
    i64(int64_t(a.kind));
    f32(a.f);
    i64(a.i);
    str(a.s);
    tensor(a.t);
    u64(a.floats.size());
    for (float f : a.floats) f32(f);
    u64(a.ints.size());
    for (int64_t i : a.ints) i64(i);
    u64(a.strings.size());
    for (const auto& s : a.strings) str(s);
    u64(a.g != nullptr);
    if (a.g) graph(*a.g);
}

void ByteWriter::graph(const Graph& g) {
    str(g.path);
    str(g.name);
    i64(g.ir_version);
    str(g.producer);
    u64(g.opsets.size());
    for (const auto& [d, v] : g.opsets) str(d), i64(v);
    u64(g.values.size());
    for (const auto& v : g.values) value(v);
    u64(g.nodes.size());
    for (const auto& n : g.nodes) {
        str(n.name), str(n.op_type), str(n.domain);
        u64(n.inputs.size());
        for (int id : n.inputs) i64(id);
        u64(n.outputs.size());
        for (int id : n.outputs) i64(id);
        u64(n.attrs.size());
        for (const auto& [k, a] : n.attrs) str(k), attr(a);
        u64(n.folded);
    }
    for (const std::vector<int>* ids : {&g.inputs, &g.outputs}) {
        u64(ids->size());
        for (int id : *ids) i64(id);
    }
    u64(g.declared_outputs.size());
    for (const auto& v : g.declared_outputs) value(v);
    std::vector<std::pair<std::string, int>> names(g.by_name.begin(), g.by_name.end());
    std::sort(names.begin(), names.end());  // the same bytes for the same graph (an unordered_map's order is not)
    u64(names.size());
    for (const auto& [k, id] : names) str(k), i64(id);
    u64(g.free_vars.size());
    for (const auto& s : g.free_vars) str(s);
    u64(g.float64);
    f64(g.max_eval_work);
}

std::string save_graph(const Graph& g) {
    ByteWriter w;
    w.u64(kMagic);
    w.graph(g);
    return w.bytes;
}

// ---- reading ----------------------------------------------------------------------------

void ByteReader::malformed(const std::string& why) const {
    bad_input(what_ + ": malformed graph record (" + why + " at byte " + std::to_string(pos_) + ")");
}

uint64_t ByteReader::u64() {
    if (b_.size() - pos_ < 8) malformed("truncated");
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(b_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
}

int64_t ByteReader::count(uint64_t item_bytes) {
    uint64_t n = u64();
    if (n > (b_.size() - pos_) / (item_bytes ? item_bytes : 1)) malformed("a length past the end");
    return int64_t(n);
}

float ByteReader::f32() {
    uint64_t u = u64();
    if (u >> 32) malformed("a float32 out of range");
    uint32_t v = uint32_t(u);
    float f;
    std::memcpy(&f, &v, 4);
    return f;
}

double ByteReader::f64() {
    uint64_t u = u64();
    double d;
    std::memcpy(&d, &u, 8);
    return d;
}

std::string ByteReader::str() {
    int64_t n = count();
    std::string s = b_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
}

static DType read_dtype(ByteReader& r) {
    int64_t d = r.i64();
    if (d != 0 && d != int64_t(DType::String) && !dtype_known(int(d))) r.malformed("an unknown dtype");
    return DType(d);
}

static Shape read_shape(ByteReader& r) {
    Shape s(size_t(r.count(8)));
    for (auto& d : s) d = r.i64();
    return s;
}

Tensor ByteReader::tensor() {
    DType dt = read_dtype(*this);
    Shape shape = read_shape(*this);
    if (dt == DType::String) {
        std::vector<std::string> items(size_t(count(8)));
        for (auto& s : items) s = str();
        if (int64_t(items.size()) != shape_numel(shape)) malformed("a string tensor of the wrong size");
        return Tensor::from_strings(std::move(items), shape);
    }
    int64_t n = count();
    if (dt == DType::Undefined) {
        if (n) malformed("bytes of an undefined tensor");
        return Tensor{};
    }
    for (int64_t d : shape)
        if (d < 0) malformed("a negative dim");
    const int64_t numel = shape_numel(shape);
    if (numel > n || uint64_t(numel) * dtype_size(dt) != uint64_t(n)) malformed("a tensor of the wrong size");
    Tensor t = Tensor::zeros(dt, shape);
    if (n) std::memcpy(t.data(), b_.data() + pos_, size_t(n));
    pos_ += size_t(n);
    return t;
}

Value ByteReader::value() {
    Value v;
    v.name = str();
    v.dtype = read_dtype(*this);
    v.shape = read_shape(*this);
    v.has_shape = u64() != 0;
    v.dim_params.resize(size_t(count(8)));
    for (auto& p : v.dim_params) p = str();
    if (u64()) v.constant = tensor();
    if (u64()) {
        std::vector<int> ids(size_t(count(8)));
        for (auto& id : ids) id = int(i64());
        v.seq = std::move(ids);
    }
    v.producer = int(i64());
    v.is_initializer = u64() != 0;
    return v;
}

Attr ByteReader::attr(int depth) {
    Attr a;
    int64_t k = i64();
    if (k < 0 || k > Attr::TypeProtos) malformed("an unknown attribute kind");
    a.kind = Attr::Kind(k);
    a.f = f32();
    a.i = i64();
    a.s = str();
    a.t = tensor();
    a.floats.resize(size_t(count(8)));
    for (auto& f : a.floats) f = f32();
    a.ints.resize(size_t(count(8)));
    for (auto& i : a.ints) i = i64();
    a.strings.resize(size_t(count(8)));
    for (auto& s : a.strings) s = str();
    if (u64()) a.g = std::make_shared<Graph>(graph(depth + 1));
    return a;
}

Graph ByteReader::graph(int depth) {
    if (depth > kMaxDepth) malformed("subgraphs nested too deep");
    Graph g;
    g.path = str();
    g.name = str();
    g.ir_version = i64();
    g.producer = str();
    for (int64_t n = count(16); n > 0; --n) {
        std::string d = str();
        g.opsets[d] = i64();
    }
    g.values.resize(size_t(count(64)));
    for (auto& v : g.values) v = value();
    g.nodes.resize(size_t(count(56)));  // the fewest bytes a node takes
    const int64_t nv = int64_t(g.values.size());
    auto id_in = [&](int64_t id, int64_t lo, int64_t hi) {
        if (id < lo || id >= hi) malformed("an id out of range");
        return int(id);
    };
    for (auto& n : g.nodes) {
        n.name = str(), n.op_type = str(), n.domain = str();
        n.inputs.resize(size_t(count(8)));
        for (auto& id : n.inputs) id = id_in(i64(), -1, nv);
        n.outputs.resize(size_t(count(8)));
        for (auto& id : n.outputs) id = id_in(i64(), -1, nv);
        for (int64_t m = count(16); m > 0; --m) {
            std::string key = str();
            n.attrs[key] = attr(depth);
        }
        n.folded = u64() != 0;
    }
    for (std::vector<int>* ids : {&g.inputs, &g.outputs}) {
        ids->resize(size_t(count(8)));
        for (auto& id : *ids) id = id_in(i64(), 0, nv);
    }
    g.declared_outputs.resize(size_t(count(64)));
    for (auto& v : g.declared_outputs) v = value();
    for (int64_t n = count(16); n > 0; --n) {
        std::string key = str();
        g.by_name[key] = id_in(i64(), 0, nv);
    }
    g.free_vars.resize(size_t(count(8)));
    for (auto& s : g.free_vars) s = str();
    g.float64 = u64() != 0;
    g.max_eval_work = f64();
    for (auto& v : g.values) {
        id_in(v.producer, -1, int64_t(g.nodes.size()));
        if (v.seq)
            for (int id : *v.seq) id_in(id, 0, nv);
    }
    return g;
}

Graph load_graph(const std::string& bytes, const std::string& what) {
    ByteReader r(bytes, what);
    if (r.u64() != kMagic) r.malformed("not a graph record of this onnx2ggml version");
    Graph g = r.graph();
    if (!r.at_end()) r.malformed("bytes after the graph");
    return g;
}

}  // namespace onnx2ggml::core
