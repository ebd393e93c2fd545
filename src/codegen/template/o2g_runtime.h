// onnx2ggml's runtime glue, shared by `onnx2ggml run|bench` (src/runtime/session.cpp) and every
// generated program (`compile` writes it next to main.cpp): which ggml backend a name selects, how
// many threads it computes with, and ggml's dynamically loaded backends. One copy, so the two
// cannot drift.
//
// Threads. The default count is the number of cores this process may use: its affinity mask
// (sched_getaffinity: taskset, cpusets), capped by the cgroup CPU quota (v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us; a container's --cpus), never 0. When the count is not fixed
// (--threads 0, the default), ggml's CPU backend and the oneDNN backend take it again before every
// compute, less the cores other processes keep busy at that moment (their runnable threads:
// /proc/loadavg's running count less this process's own running threads), at least 1: ggml's CPU
// backend and oneDNN split every op into equal static parts, so a thread that shares its core with
// another process holds up every op's barrier (measured on 2 cores with one competing process:
// vit_b_16 on the oneDNN backend, 108 ms alone: 2 threads 310-480 ms, 1 thread 192 ms). The oneDNN
// backend keeps a primitive per thread count it has run a shape on (onednn/context.h run_threads);
// its results may then differ in the last bits with the cores free (convnext_tiny: 6e-7 between 1 and
// 2 threads; ggml's CPU kernels give the same bits at any count). `--threads N` fixes both at N.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "o2g_onednn.h"

namespace o2g_runtime {

// the first two numbers of a one-line file (false when it cannot be read); `max` reads as -1
inline bool read_numbers(const char* path, long long* a, long long* b) {
    FILE* f = std::fopen(path, "r");
    if (!f) return false;
    char buf[128] = {0};
    bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
    std::fclose(f);
    if (!ok) return false;
    char* p = buf;
    *a = std::strncmp(p, "max", 3) == 0 ? -1 : std::strtoll(p, &p, 10);
    if (b) *b = std::strtoll(std::strncmp(p, "max", 3) == 0 ? p + 3 : p, nullptr, 10);
    return true;
}

// cores the cgroup CPU quota allows (rounded up), 0 when there is no quota or no cgroup file
inline int cgroup_cores() {
    long long q = 0, p = 0;
    if (read_numbers("/sys/fs/cgroup/cpu.max", &q, &p) ||
        read_numbers("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", &q, nullptr)) {
        if (p == 0 && !read_numbers("/sys/fs/cgroup/cpu/cpu.cfs_period_us", &p, nullptr)) return 0;
        if (q > 0 && p > 0) return int(std::max(1LL, (q + p - 1) / p));
    }
    return 0;
}

// the cores this process may use: affinity mask, cgroup quota; never 0
inline int usable_cores() {
    static const int n = [] {
        int c = 0;
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) c = CPU_COUNT(&set);
        if (c <= 0) c = int(std::thread::hardware_concurrency());
        int q = cgroup_cores();
        if (q > 0 && (c <= 0 || q < c)) c = q;
        return std::max(1, c);
    }();
    return n;
}

// runnable threads of other processes now: /proc/loadavg's running count less this process's own
inline int others_running() {
    FILE* f = std::fopen("/proc/loadavg", "r");
    if (!f) return 0;
    int running = 0, total = 0;
    double l1, l5, l15;
    bool ok = std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) == 5;
    std::fclose(f);
    if (!ok) return 0;
    int own = 0;
    if (DIR* d = opendir("/proc/self/task")) {
        char path[320], buf[256];
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
            FILE* s = std::fopen(path, "r");
            if (!s) continue;
            size_t n = std::fread(buf, 1, sizeof buf - 1, s);
            std::fclose(s);
            buf[n] = 0;
            const char* p = std::strrchr(buf, ')');  // "tid (name) S ...": the name may hold spaces
            if (p && p[1] == ' ' && p[2] == 'R') ++own;
        }
        closedir(d);
    }
    return std::max(0, running - std::max(own, 1));
}

// the threads to compute with now: `fixed` when > 0, else the usable cores not busy elsewhere (>= 1)
// (others_running is read at most every 50 ms: the /proc reads cost tens of microseconds, a small
// model's whole run)
inline int threads_now(int fixed) {
    if (fixed > 0) return fixed;
    int n = usable_cores();
    if (n == 1) return 1;
    static std::atomic<long long> at{-1};
    static std::atomic<int> others{0};
    long long now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    long long last = at.load();
    if (last < 0 || now - last >= 50) {
        others = others_running();
        at = now;
    }
    return std::max(1, n - others.load());
}

// ggml_backend_set_n_threads of the backend's registry (CPU, oneDNN) to threads_now(fixed); no-op for a
// backend without it.
inline void set_threads(ggml_backend_t be, int fixed) {
    ggml_backend_dev_t dev = be ? ggml_backend_get_device(be) : nullptr;
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : nullptr;
    if (!reg) return;
    auto fn = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    if (!fn) return;
    fn(be, threads_now(fixed));
}

// ggml's dynamically loaded backends (libggml-*.so beside the program or on GGML_BACKEND_PATH) and
// the oneDNN backend when built in: registered once per process.
// ggml-vulkan computes F32 matrix products through fp16 shared memory on devices with fp16 arithmetic
// (measured on llvmpipe: 3e-4 of the range per product, regnet_y_400mf's output 3.6e-3 of its range off
// PyTorch's); onnx2ggml promises the model's numbers, so that is turned off (GGML_VK_DISABLE_F16, read
// when ggml-vulkan opens a device) unless ONNX2GGML_VULKAN_FP16=1 asks for ggml-vulkan's default, faster on
// GPUs with fp16 units. F16 weights are still read as F16, and accumulated in F32.
inline void register_backends() {
    static const bool done = [] {
        const char* fp16 = std::getenv("ONNX2GGML_VULKAN_FP16");
        if (!(fp16 && std::strcmp(fp16, "1") == 0)) setenv("GGML_VK_DISABLE_F16", "1", 0);
        ggml_backend_load_all();
#ifdef O2G_USE_ONEDNN
        o2g_onednn::register_backend();
#endif
        return true;
    }();
    (void)done;
}

inline std::vector<std::string> backend_names() {
    register_backends();
    std::vector<std::string> r;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) r.push_back(ggml_backend_dev_name(ggml_backend_dev_get(i)));
    return r;
}

// ---- ggml RPC (`onnx2ggml rpc-server`; --backend rpc:HOST:PORT[,rpc:HOST:PORT...]) -----------------------
// Through the registry's "RPC" entry (built with -DGGML_RPC=ON), so nothing here needs ggml-rpc.h.
inline void* rpc_proc(const char* name) {
    register_backends();
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    return reg ? ggml_backend_reg_get_proc_address(reg, name) : nullptr;
}

// HOST:PORT split at its last ':' ([v6] brackets dropped); false when malformed
inline bool split_endpoint(const std::string& ep, std::string& host, std::string& port) {
    size_t c = ep.rfind(':');
    if (c == std::string::npos || c == 0 || c + 1 >= ep.size()) return false;
    host = ep.substr(0, c);
    port = ep.substr(c + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535)
        return false;
    return true;
}

// Whether a TCP connection to HOST:PORT opens within `ms` (ggml-rpc aborts the process when its own connect
// fails: asked first, so an unreachable server is a clear error instead); the reason in `why` when not.
inline bool tcp_reachable(const std::string& ep, int ms, std::string* why) {
    std::string host, port;
    if (!split_endpoint(ep, host, port)) return *why = "expected HOST:PORT", false;
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0) return *why = gai_strerror(e), false;
    bool ok = false;
    *why = "connection refused or timed out";
    for (addrinfo* a = res; a && !ok; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) ok = true;
        else if (errno == EINPROGRESS) {
            pollfd p = {fd, POLLOUT, 0};
            int err = 0;
            socklen_t len = sizeof err;
            ok = poll(&p, 1, ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
            if (err) *why = std::strerror(err);
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

// For ggml_set_abort_callback in programs (the CLI, generated programs; not the library: an application
// decides for itself): ggml aborts the process on errors it does not return, among them a ggml RPC server that
// cannot be reached or dies mid-run. Those exit 2 (bad input or environment) with ggml's message instead of a
// core dump, any other abort 4 (internal error). Outputs are written only after a finished run, so nothing is
// left half written.
inline void exit_on_ggml_abort(const char* msg) {
    bool rpc = std::strstr(msg, "RPC") || std::strstr(msg, "Failed to connect");
    std::fprintf(stderr, "error: %s%s\n", msg, rpc ? " (a ggml RPC server of --backend stopped answering)" : "");
    std::_Exit(rpc ? 2 : 4);
}

// The devices of `rpc:EP[,rpc:EP...]`: the first device of each server, in order; empty and `err` when the
// name is malformed, ggml was built without RPC, or a server cannot be reached.
inline std::vector<ggml_backend_t> init_rpc_backends(const std::string& name, std::string* err) {
    using add_server_t = ggml_backend_reg_t (*)(const char*);
    auto add_server = reinterpret_cast<add_server_t>(rpc_proc("ggml_backend_rpc_add_server"));
    std::vector<ggml_backend_t> r;
    auto failed = [&](const std::string& why) {
        for (ggml_backend_t b : r) ggml_backend_free(b);
        r.clear();
        if (err) *err = why;
        return r;
    };
    if (!add_server) return failed("backend '" + name + "': this build has no ggml RPC (configure with -DGGML_RPC=ON)");
    std::string rest = name;
    while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string item = rest.substr(0, comma);
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
        if (item.compare(0, 4, "rpc:") != 0)
            return failed("backend '" + name + "': expected rpc:HOST:PORT[,rpc:HOST:PORT...]");
        std::string ep = item.substr(4), why, host, port;
        if (!split_endpoint(ep, host, port)) return failed("backend '" + name + "': '" + ep + "' is not HOST:PORT");
        if (!tcp_reachable(ep, 5000, &why)) return failed("RPC server " + ep + " is not reachable: " + why);
        ggml_backend_reg_t reg = add_server(ep.c_str());
        ggml_backend_dev_t dev =
            reg && ggml_backend_reg_dev_count(reg) > 0 ? ggml_backend_reg_dev_get(reg, 0) : nullptr;
        ggml_backend_t be = dev ? ggml_backend_dev_init(dev, nullptr) : nullptr;
        if (!be) return failed("RPC server " + ep + " offers no device");
        r.push_back(be);
    }
    if (r.empty()) return failed("backend '" + name + "': no server");
    return r;
}

// `auto`: a GPU (or integrated GPU) if ggml has one, else the fastest CPU path: the oneDNN backend
// when built in (ggml's CPU backend takes the nodes it does not), else ggml's CPU backend.
// A name selects the first device whose name starts with it (case-insensitive). nullptr and `err`
// (naming the backends this build has) when none matches.
inline ggml_backend_t init_backend(const std::string& name, int threads, std::string* err) {
    register_backends();
    ggml_backend_t be = nullptr;
    if (name.empty() || name == "auto") {
        for (auto type : {GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU})
            if (!be)
                if (ggml_backend_dev_t d = ggml_backend_dev_by_type(type)) be = ggml_backend_dev_init(d, nullptr);
        if (!be)
            if (ggml_backend_dev_t d = ggml_backend_dev_by_name("oneDNN")) be = ggml_backend_dev_init(d, nullptr);
        if (!be) be = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    } else {
        for (size_t i = 0; i < ggml_backend_dev_count() && !be; ++i) {
            ggml_backend_dev_t d = ggml_backend_dev_get(i);
            if (strncasecmp(ggml_backend_dev_name(d), name.c_str(), name.size()) == 0)
                be = ggml_backend_dev_init(d, nullptr);
        }
    }
    if (!be && err) {
        std::string avail;
        for (auto& n : backend_names()) avail += (avail.empty() ? "" : ", ") + n;
        *err = "backend '" + name + "' is not available (this build has: " + avail + ", auto)";
    }
    if (be) set_threads(be, threads);
    return be;
}

// Where each weight goes: bufts[i] for the tensors `of` says i (0: the first device's, when none is said).
// ggml_backend_sched runs a node that reads a weight on the backend of the weight's buffer, so placing the
// weights places the graph.
struct WeightPlacement {
    std::vector<ggml_backend_buffer_type_t> bufts;
    std::map<const ggml_tensor*, int> where;
    int of(const ggml_tensor* t) const {
        auto it = where.find(t);
        return it == where.end() ? 0 : it->second;
    }
};

// Quantized matrix weights that only ggml's CPU backend reads (the devices compute in host memory: the CPU itself,
// or the oneDNN backend, which leaves quantized products to it) go to the first of the CPU's extra buffer types
// whose kernels take every node reading them (ggml-cpu's repacked q4_0/q4_K/iq4_nl layouts on AVX2): the buffer
// repacks each weight as it is uploaded and ggml's CPU backend then runs the products with those kernels. Each
// candidate is checked with the CPU device's own supports_op on the real readers (the weight's buffer type set
// for the check only). ggml's AMX buffer is not used: on a KVM machine whose CPU reports AMX-INT8 its tile
// instructions raised SIGILL (docs/quantization.md).
inline void place_cpu_extra(WeightPlacement& p, ggml_cgraph* gf) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) return;
    auto get = (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(
        ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts");
    if (!get) return;
    std::vector<ggml_backend_buffer_type_t> extra;
    for (ggml_backend_buffer_type_t* b = get(dev); b && *b; ++b)
        if (std::string(ggml_backend_buft_name(*b)) != "AMX") extra.push_back(*b);
    if (extra.empty()) return;
    std::map<ggml_tensor*, std::vector<ggml_tensor*>> readers;  // quantized weights -> the nodes reading them
    std::set<ggml_tensor*> out;                                 // read otherwise (a view, another op)
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor* n = ggml_graph_node(gf, i);
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            ggml_tensor* s = n->src[k];
            if (!s || s->op != GGML_OP_NONE || (s->flags & GGML_TENSOR_FLAG_INPUT) || !ggml_is_quantized(s->type))
                continue;
            if (n->op == GGML_OP_MUL_MAT && k == 0 && !n->view_src) readers[s].push_back(n);
            else out.insert(s);
        }
    }
    for (auto& [w, ns] : readers) {
        if (out.count(w) || w->view_src || w->buffer || p.where.count(w)) continue;
        for (size_t e = 0; e < extra.size(); ++e) {
            ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(extra[e], 64);
            if (!probe) continue;
            w->buffer = probe;  // (supports_op reads the buffer type only)
            bool ok = true;
            for (ggml_tensor* n : ns) ok = ok && ggml_backend_dev_supports_op(dev, n);
            w->buffer = nullptr;
            ggml_backend_buffer_free(probe);
            if (!ok) continue;
            int at = -1;
            for (size_t b = 0; b < p.bufts.size(); ++b)
                if (p.bufts[b] == extra[e]) at = int(b);
            if (at < 0) at = int(p.bufts.size()), p.bufts.push_back(extra[e]);
            p.where[w] = at;
            break;
        }
    }
}

// The weights' places for devices `devs` (one, or one per RPC server) and the CPU backend `cpu` (may be null):
// - over several devices, the weights in the order the graph first reads them, cut into runs of about equal
//   bytes, one run per device (a pipeline: each device computes the layers whose weights it holds), never
//   between a node and the nodes written in place on its output;
// - a weight that a node its device cannot run reads (or reads through a view) goes to host memory, where the
//   CPU backend runs that node: the scheduler aborts on a weight whose backend cannot run its reader (ggml-vulkan:
//   a tensor larger than the device's largest storage buffer, e.g. CLIP's 152 MB token embedding on llvmpipe's
//   128 MB). Not needed when the devices compute in host memory (CPU, oneDNN).
// Weights are the graph's sources without an op that are not graph inputs.
inline WeightPlacement place_weights(const std::vector<ggml_backend_t>& devs, ggml_backend_t cpu, ggml_cgraph* gf) {
    WeightPlacement p;
    for (ggml_backend_t d : devs) p.bufts.push_back(ggml_backend_get_default_buffer_type(d));
    auto weight = [](const ggml_tensor* t) {
        return t && t->op == GGML_OP_NONE && !t->view_src && !(t->flags & GGML_TENSOR_FLAG_INPUT);
    };
    auto base = [](const ggml_tensor* s) { return s && s->view_src ? s->view_src : s; };
    if (devs.size() > 1) {
        // A run ends only before a node that writes a tensor of its own: a node in place on another's output
        // (a bias, affine or activation written onto a convolution's or a norm's output) runs where that output
        // lives, so its weights must be there too (the scheduler runs a node where its weights are).
        std::set<const ggml_tensor*> seen;
        size_t total = 0, before = 0;
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i)
            for (const ggml_tensor* s : ggml_graph_node(gf, i)->src)
                if (weight(base(s)) && seen.insert(base(s)).second) total += ggml_nbytes(base(s));
        seen.clear();
        size_t dev = 0;
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
            ggml_tensor* n = ggml_graph_node(gf, i);
            bool fresh = false;
            for (const ggml_tensor* s : n->src) fresh |= weight(base(s)) && !seen.count(base(s));
            if (!fresh) continue;
            if (!n->view_src && dev + 1 < devs.size() && before * devs.size() >= (dev + 1) * total) ++dev;
            for (const ggml_tensor* s : n->src)
                if (weight(base(s)) && seen.insert(base(s)).second) {
                    p.where[base(s)] = int(dev);
                    before += ggml_nbytes(base(s));
                }
        }
    }
    bool host_mem = true;
    for (auto b : p.bufts) host_mem &= ggml_backend_buft_is_host(b);
    if (host_mem) place_cpu_extra(p, gf);
    if (!cpu || host_mem) return p;
    const int host = int(p.bufts.size());
    p.bufts.push_back(ggml_backend_get_default_buffer_type(cpu));
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor* n = ggml_graph_node(gf, i);
        for (ggml_tensor* s : n->src) {
            const ggml_tensor* b = base(s);
            if (weight(b) && p.of(b) < host && !ggml_backend_supports_op(devs[size_t(p.of(b))], n)) p.where[b] = host;
        }
    }
    return p;
}

// Allocates the tensors of `ctx` that have no memory yet where `p` places them: one buffer per buffer type used
// (the first device's through ggml_backend_alloc_ctx_tensors_from_buft, which splits at the device's largest
// allocation). Appends the buffers made (usage: weights) to `bufs`; false when an allocation fails.
inline bool alloc_weights(ggml_context* ctx, const WeightPlacement& p, std::vector<ggml_backend_buffer_t>& bufs) {
    auto unallocated = [](const ggml_tensor* t) { return !t->data && !t->view_src; };
    auto add = [&bufs](ggml_backend_buffer_t b) {
        if (b) ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS), bufs.push_back(b);
        return b != nullptr;
    };
    for (int i = 1; i < int(p.bufts.size()); ++i) {
        size_t size = 0, align = ggml_backend_buft_get_alignment(p.bufts[size_t(i)]);
        for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
            if (unallocated(t) && p.of(t) == i)
                size += GGML_PAD(ggml_backend_buft_get_alloc_size(p.bufts[size_t(i)], t), align);
        if (size == 0) continue;
        ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(p.bufts[size_t(i)], size);
        if (!add(b)) return false;
        ggml_tallocr ta = ggml_tallocr_new(b);
        for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
            if (unallocated(t) && p.of(t) == i && ggml_tallocr_alloc(&ta, t) != GGML_STATUS_SUCCESS) return false;
    }
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
        if (unallocated(t)) return add(ggml_backend_alloc_ctx_tensors_from_buft(ctx, p.bufts[0]));
    return true;
}

// The devices a --backend names: one (init_backend), or one per RPC server for `rpc:...` lists; empty and
// `err` when none.
inline std::vector<ggml_backend_t> init_backends(const std::string& name, int threads, std::string* err) {
    if (name.compare(0, 4, "rpc:") == 0) return init_rpc_backends(name, err);
    ggml_backend_t be = init_backend(name, threads, err);
    return be ? std::vector<ggml_backend_t>{be} : std::vector<ggml_backend_t>{};
}

// before every compute when the thread count is not fixed: the backends (`be`, ggml's CPU or the oneDNN
// backend, and `cpu`, the fallback beside a device) to the cores free now
inline void set_threads_now(ggml_backend_t be, ggml_backend_t cpu) {
    set_threads(be, 0);
    if (cpu) set_threads(cpu, 0);
}

}  // namespace o2g_runtime
