// onnx2ggml's runtime glue, shared by `onnx2ggml run|bench` (src/runtime/session.cpp) and every
// generated program (`compile` writes it next to main.cpp): which ggml backend a name selects, how
// many threads it computes with, and ggml's dynamically loaded backends. One copy, so the two
// cannot drift.
//
// Threads. The default count is the number of cores this process may use: its affinity mask
// (sched_getaffinity: taskset, cpusets), capped by the cgroup CPU quota (v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us; a container's --cpus), never 0. When the count is not fixed
// (--threads 0, the default), ggml's CPU backend takes it again before every compute, less the cores other
// processes keep busy at that moment (their runnable threads: /proc/loadavg's running count less
// this process's own running threads), at least 1: ggml's CPU backend and oneDNN split every op
// into equal static parts, so a thread that shares its core with another process holds up every
// op's barrier (measured on 2 cores with one competing process: squeezenet1_1 2 threads 39 ms, 1
// thread 31 ms; alone 20 and 31 ms). The oneDNN backend keeps the usable cores (its primitives
// keep the count they were created with). `--threads N` fixes both at N.
#pragma once

#include <dirent.h>
#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// ggml_backend_set_n_threads of the backend's registry (CPU, oneDNN); no-op for a backend without it.
// ggml's CPU backend takes threads_now(fixed); another backend (oneDNN, whose primitives keep the
// thread count they were created with, and whose results then cannot depend on the load at their
// creation) the usable cores or `fixed`.
inline void set_threads(ggml_backend_t be, int fixed) {
    ggml_backend_dev_t dev = be ? ggml_backend_get_device(be) : nullptr;
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : nullptr;
    if (!reg) return;
    auto fn = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    if (!fn) return;
    bool cpu = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
    fn(be, cpu ? threads_now(fixed) : fixed > 0 ? fixed : usable_cores());
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

// Weights to keep in host memory. ggml_backend_sched runs a node that reads a weight on the backend of the
// weight's buffer, and aborts when that backend cannot run the node (ggml-vulkan: a tensor larger than the
// device's largest storage buffer, e.g. CLIP's 152 MB token embedding on llvmpipe's 128 MB). So a weight that a
// node `be` cannot run reads (or that such a node reads through a view) goes to host memory, where the CPU
// backend runs its readers. None when `be` computes in host memory itself (CPU, oneDNN) or there is no `cpu`.
inline std::set<const ggml_tensor*> host_weights(ggml_backend_t be, ggml_backend_t cpu, ggml_cgraph* gf) {
    std::set<const ggml_tensor*> host;
    if (!cpu || ggml_backend_buft_is_host(ggml_backend_get_default_buffer_type(be))) return host;
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor* n = ggml_graph_node(gf, i);
        if (ggml_backend_supports_op(be, n)) continue;
        for (ggml_tensor* s : n->src)
            if (s) host.insert(s->view_src ? s->view_src : s);
    }
    return host;
}

// Allocates the tensors of `ctx` that have no memory yet: those in `host` in one buffer of host_buft, the others
// in one of buft. Appends the buffers made (none, one or two; usage: weights) to `bufs`; false when an
// allocation fails.
inline bool alloc_weights(ggml_context* ctx, ggml_backend_buffer_type_t buft, ggml_backend_buffer_type_t host_buft,
                          const std::set<const ggml_tensor*>& host, std::vector<ggml_backend_buffer_t>& bufs) {
    auto unallocated = [](const ggml_tensor* t) { return !t->data && !t->view_src; };
    auto add = [&bufs](ggml_backend_buffer_t b) {
        if (b) ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_WEIGHTS), bufs.push_back(b);
        return b != nullptr;
    };
    size_t size = 0, align = host_buft ? ggml_backend_buft_get_alignment(host_buft) : 1;
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t && host_buft; t = ggml_get_next_tensor(ctx, t))
        if (unallocated(t) && host.count(t)) size += GGML_PAD(ggml_backend_buft_get_alloc_size(host_buft, t), align);
    if (size > 0) {
        ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(host_buft, size);
        if (!add(b)) return false;
        ggml_tallocr ta = ggml_tallocr_new(b);
        for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
            if (unallocated(t) && host.count(t) && ggml_tallocr_alloc(&ta, t) != GGML_STATUS_SUCCESS) return false;
    }
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t))
        if (unallocated(t)) return add(ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft));
    return true;
}

// before every compute when the thread count is not fixed: ggml's CPU backend (`be` or `cpu`) to
// the cores free now
inline void set_threads_now(ggml_backend_t be, ggml_backend_t cpu) { set_threads(cpu ? cpu : be, 0); }

}  // namespace o2g_runtime
