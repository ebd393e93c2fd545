// `onnx2ggml run`, `check MODEL`, `bench` and `compile`, written on the public C++ API only
// (include/onnx2ggml/onnx2ggml.hpp): what they do, an application linking libonnx2ggml can do too; and
// what the command's files share (JSON strings, placement text, outputs checked against expected ones).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"  // (the public API and the arguments: this target sees no internal header)

namespace onnx2ggml::cli {

namespace {

std::vector<TensorRef> refs(const std::vector<Tensor>& ts) {
    std::vector<TensorRef> r;
    for (const Tensor& t : ts) r.push_back(t.ref());
    return r;
}

// mkdir -p: the output folder and its parents; exit 2 naming the path when that fails
void make_dirs(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        bad(dir + ": cannot create output folder" + (ec ? " (" + ec.message() + ")" : ""));
}

void write_outputs(const std::vector<Tensor>& outs, const std::string& dir) {
    make_dirs(dir);
    std::string json = "{\n";
    for (size_t k = 0; k < outs.size(); ++k) {
        std::string file = "output_" + std::to_string(k) + ".npy";
        save_npy(dir + "/" + file, outs[k]);
        json += "  " + json_str(outs[k].name()) + ": \"" + file + "\"" + (k + 1 < outs.size() ? "," : "") + "\n";
    }
    json += "}\n";
    std::ofstream(dir + "/outputs.json") << json;
}

// `run` without --output-dir: one line per output (name, dtype, shape, min/max/mean, the first values);
// nothing is written
void print_summary(const std::string& tag, const Tensor& t) {
    const int64_t n = t.numel(), shown = std::min<int64_t>(n, 6);
    std::string line = tag + t.name() + ": " + dtype_name(t.dtype()) + " " + dims_str(t.shape());
    char buf[64];
    if (t.dtype() == DType::String) {
        const auto v = t.strings();
        line += " values:";
        for (int64_t i = 0; i < shown; ++i) line += " " + json_str(v[size_t(i)]);
    } else if (n > 0) {
        double lo = t.at(0), hi = lo, sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            double x = t.at(i);
            lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
        }
        snprintf(buf, sizeof buf, " min=%.6g max=%.6g mean=%.6g", lo, hi, sum / double(n));
        line += std::string(buf) + " values:";
        for (int64_t i = 0; i < shown; ++i) {
            snprintf(buf, sizeof buf, " %.6g", t.at(i));
            line += buf;
        }
    }
    if (shown < n) line += " ...";
    std::cout << line << "\n";
}

double peak_rss_mb() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_maxrss) / 1024.0;
}

void print_stats(const SessionStats& st) {
    std::string ctl;
    for (auto& n : st.control_inputs) ctl += (ctl.empty() ? "" : ",") + n;
    fprintf(stderr,
            "onnx2ggml: specializations: runs=%llu hits=%llu misses=%llu evictions=%llu cached=%zu specialize_ms=%.1f "
            "control_inputs=%s shared_weights_mb=%.1f\n",
            static_cast<unsigned long long>(st.runs), static_cast<unsigned long long>(st.hits),
            static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.evictions), st.cached,
            st.specialize_ms, ctl.empty() ? "none" : ctl.c_str(), double(st.shared_weight_bytes) / 1048576.0);
}

// `run --profile`: time per ggml op type and backend, per backend, the slowest nodes, and how the
// scheduler cut the graph (stderr, largest first).
void print_profile(const Profile& prof, const Placement& pl) {
    double total = 0;
    std::map<std::string, double> per_backend;
    for (auto& r : prof.ops) total += r.ms, per_backend[r.backend] += r.ms;
    fprintf(stderr, "profile (each node computed and timed alone; %.1f ms in all):\n", total);
    fprintf(stderr, "  %-16s %-10s %6s %10s %6s\n", "ggml op", "backend", "nodes", "ms", "%");
    for (auto& r : prof.ops)
        if (r.ms >= 0.01 || r.nodes > 0)
            fprintf(stderr, "  %-16s %-10s %6d %10.2f %5.1f%%\n", r.op.c_str(), r.backend.c_str(), r.nodes, r.ms,
                    total > 0 ? 100 * r.ms / total : 0.0);
    fprintf(stderr, "per backend:\n");
    for (auto& kv : pl.nodes)
        fprintf(stderr, "  %-10s %6d nodes %10.2f ms %5.1f%%\n", kv.first.c_str(), kv.second, per_backend[kv.first],
                total > 0 ? 100 * per_backend[kv.first] / total : 0.0);
    fprintf(stderr, "%s", placement_text(pl, false).c_str());
    fprintf(stderr, "slowest nodes:\n");
    for (size_t i = 0; i < prof.nodes.size() && i < 12; ++i)
        fprintf(stderr, "  %10.2f ms %5.1f%%  %-16s %-10s %s\n", prof.nodes[i].ms,
                total > 0 ? 100 * prof.nodes[i].ms / total : 0.0, prof.nodes[i].op.c_str(),
                prof.nodes[i].backend.c_str(), prof.nodes[i].name.c_str());
}

// run, check and bench: one session for every input set; with one set, one signature (the weights' host
// copy is dropped once uploaded)
SessionOptions one_run_options(const Args& a) {
    SessionOptions o = session_options(a);
    o.release_host_weights = true;
    o.one_signature = a.sets.size() == 1;
    return o;
}

}  // namespace

void bad(const std::string& message) { throw Error(ErrorCategory::BadInput, message); }

bool report_outputs(const std::vector<Tensor>& outs, const std::vector<Tensor>& expected, const Args& a,
                    const std::string& tag) {
    bool all = true;
    for (size_t k = 0; k < expected.size() && k < outs.size(); ++k) {
        Comparison c = compare(outs[k], expected[k], a.rtol, a.atol);
        all &= c.pass;
        printf("%s%s: max_abs_err=%.3g max_rel_err=%.3g %s%s\n", tag.c_str(), outs[k].name().c_str(), c.max_abs,
               c.max_rel, c.pass ? "PASS" : "FAIL", c.pass ? "" : (" (" + c.why + ")").c_str());
    }
    return all;
}

std::string json_str(const std::string& s) {
    std::string r = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += char(c);
        } else if (c < 0x20) {
            char b[8];
            snprintf(b, sizeof b, "\\u%04x", c);
            r += b;
        } else r += char(c);
    }
    return r + "\"";
}

std::string dims_str(const Dims& d) {
    std::string r = "[";
    for (size_t i = 0; i < d.size(); ++i) r += (i ? "," : "") + std::to_string(d[i]);
    return r + "]";
}

std::string placement_text(const Placement& p, bool per_op) {
    std::ostringstream o;
    std::map<std::string, int> per;
    for (auto& kv : p.ops) per[kv.first.first] += kv.second;
    o << "placement (--backend " << p.backend << "):";
    for (auto& kv : per) o << " " << kv.first << " " << kv.second;
    o << " computing nodes; " << p.fallback.size() << " fall back to the CPU\n";
    for (auto& kv : per) {
        if (!per_op) break;
        o << "  " << kv.first << ":";
        for (auto& op : p.ops)
            if (op.first.first == kv.first) o << " " << op.first.second << " " << op.second;
        o << "\n";
    }
    for (size_t i = 0; i < p.fallback.size() && i < 20; ++i)
        o << "  fallback: " << p.fallback[i].name << " (" << p.fallback[i].op << ", " << p.fallback[i].backend << ")\n";
    if (p.fallback.size() > 20) o << "  fallback: ... " << p.fallback.size() - 20 << " more\n";
    char line[160];
    snprintf(line, sizeof line, "scheduler: %d splits, %d copies between backends (%.1f MB)\n", p.splits, p.copies,
             double(p.copy_bytes) / 1e6);
    return o.str() + line;
}

std::string placement_json(const Placement& p) {
    std::ostringstream o;
    o << "{\"backend\": " << json_str(p.backend) << ", \"ops\": {";
    bool first = true;
    for (auto& kv : p.ops) {
        o << (first ? "" : ", ") << json_str(kv.first.first + "/" + kv.first.second) << ": " << kv.second;
        first = false;
    }
    o << "}, \"fallback\": [";
    for (size_t i = 0; i < p.fallback.size(); ++i)
        o << (i ? ", " : "") << "{\"name\": " << json_str(p.fallback[i].name)
          << ", \"op\": " << json_str(p.fallback[i].op) << ", \"backend\": " << json_str(p.fallback[i].backend) << "}";
    o << "], \"splits\": " << p.splits << ", \"copies\": " << p.copies << ", \"copy_bytes\": " << p.copy_bytes << "}";
    return o.str();
}

std::map<std::string, Tensor> frozen_inputs(const Args& a) {
    std::map<std::string, Tensor> r;
    for (auto& kv : a.freeze) r[kv.first] = load_npy(kv.second);
    return r;
}

// what SessionOptions and CompileOptions take alike from the command line
template <class Options>
void common_options(Options& o, const Args& a) {
    o.weights = a.weights;
    o.weight_rules = a.weight_rules;
    o.gguf = a.gguf;
    o.max_memory = a.max_memory;
    o.optimize = a.optimize;
    o.disabled_passes = a.disabled_passes;
    o.frozen_inputs = frozen_inputs(a);
}

SessionOptions session_options(const Args& a) {
    SessionOptions o;
    common_options(o, a);
    o.backend = a.backend;
    o.threads = a.threads;
    o.max_specializations = a.max_specs;
    o.verbose = a.verbose;
    return o;
}

std::vector<Tensor> gather_inputs(const Session& s, const Args& a, const InputSet& set) {
    const std::string& path = s.model().path();
    const std::vector<TensorInfo> ins = s.inputs();
    std::map<std::string, std::string> files(set.inputs.begin(), set.inputs.end()), sources;
    std::map<std::string, Tensor> given;
    for (const TensorInfo& in : ins) {
        auto it = files.find(in.name);
        if (it != files.end()) {
            given.emplace(in.name, load_npy(it->second));
            sources[in.name] = it->second;
            files.erase(it);
        } else if (in.dtype == DType::String) {
            bad(path + ": input '" + in.name + "' is a string tensor: give --input " + in.name +
                "=FILE.npy (a numpy str array); --random-inputs makes numbers only");
        } else if (!a.has_seed) {
            bad(path + ": no value for input '" + in.name + "' " + dims_str(in.shape) + " " + dtype_name(in.dtype) +
                " (give --input " + in.name + "=FILE.npy or --random-inputs SEED)");
        }
    }
    if (!files.empty()) bad("'" + files.begin()->first + "' is not an input of " + path);
    for (auto& kv : set.shapes)
        if (std::none_of(ins.begin(), ins.end(), [&](const TensorInfo& in) { return in.name == kv.first; }))
            bad(path + ": --input-shape names '" + kv.first + "', which is not a graph input");
    std::map<std::string, TensorRef> given_refs;
    for (auto& kv : given) given_refs[kv.first] = kv.second.ref();
    std::vector<Dims> shapes = s.input_shapes(given_refs, set.shapes, sources);
    std::vector<Tensor> r;
    for (size_t k = 0; k < ins.size(); ++k) {
        auto it = given.find(ins[k].name);
        r.push_back(it != given.end() ? it->second : random_tensor(ins[k].dtype, shapes[k], a.seed + k));
    }
    return r;
}

int cmd_run(const Args& a) {
    Session s(a.model, one_run_options(a));  // (owning the model's only copy: its host weights go once uploaded)
    for (size_t si = 0; si < a.sets.size(); ++si) {
        const std::vector<Tensor> held = gather_inputs(s, a, a.sets[si]);  // (the refs read it)
        const std::vector<TensorRef> ins = refs(held);
        if (a.profile) {  // one plain run to warm up, one with every node alone (a backend may prepare
            s.run(ins);   // kernels for nodes it fuses otherwise), then that again, timed
            s.set_profiling(true);
            s.run(ins);
            s.set_profiling(true);
        }
        uint64_t misses = s.stats().misses;
        auto t0 = std::chrono::steady_clock::now();
        auto outs = s.run(ins);
        double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (a.verbose) {  // the first-run cost of a new signature (bench/first_run.py reads this line)
            SessionStats st = s.stats();
            fprintf(stderr, "onnx2ggml: input set %zu: run_ms=%.3f %s\n", si, run_ms,
                    st.misses > misses
                        ? ("new_specialization specialize_ms=" + std::to_string(st.last_specialize_ms)).c_str()
                        : "cached");
        }
        if (a.profile) {
            print_profile(s.profile(), s.placement());
            s.set_profiling(false);
        }
        std::string tag = a.sets.size() > 1 ? "set " + std::to_string(si) + ": " : "";
        if (a.output_dir.empty()) {  // no folder given: a summary on stdout, no files
            for (const Tensor& t : outs) print_summary(tag, t);
        } else {  // several input sets: the outputs of set K go to DIR/K
            write_outputs(outs, a.sets.size() == 1 ? a.output_dir : a.output_dir + "/" + std::to_string(si));
            for (const Tensor& t : outs)
                std::cerr << tag << t.name() << " " << dims_str(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
        }
        if (a.verbose) fprintf(stderr, "onnx2ggml: after input set %zu: peak_rss_mb=%.1f\n", si, peak_rss_mb());
    }
    if (a.verbose) print_stats(s.stats());
    return 0;
}

int cmd_check_model(const Args& a) {
    Session s(a.model, one_run_options(a));  // (owning the model's only copy: its host weights go once uploaded)
    bool all = true;
    for (size_t si = 0; si < a.sets.size(); ++si) {
        const InputSet& set = a.sets[si];
        const std::vector<Tensor> held = gather_inputs(s, a, set);
        const std::vector<TensorRef> ins = refs(held);
        std::map<std::string, std::string> ef(set.expects.begin(), set.expects.end());
        std::vector<Tensor> exp;
        for (const TensorInfo& o : s.model().outputs()) {
            auto it = ef.find(o.name);
            if (it == ef.end()) bad("no --expect for output '" + o.name + "'");
            exp.push_back(load_npy(it->second));
        }
        std::vector<Tensor> outs = s.run(ins);
        all &= report_outputs(outs, exp, a, a.sets.size() > 1 ? "set " + std::to_string(si) + ": " : "");
    }
    printf("%s\n", all ? "PASS" : "FAIL");
    return all ? 0 : int(ErrorCategory::Mismatch);
}

int cmd_bench(const Args& a) {
    Args b = a;
    if (b.sets[0].inputs.empty() && !b.has_seed) {
        b.has_seed = true;
        b.seed = 0;
    }
    if (b.sets.size() > 1) bad("bench takes one input set (no --then)");
    Session s(b.model, one_run_options(b));
    const std::vector<Tensor> held = gather_inputs(s, b, b.sets[0]);
    const std::vector<TensorRef> ins = refs(held);
    s.prepare(ins);  // specialized and allocated before timing
    for (int i = 0; i < a.warmup; ++i) s.run(ins);
    std::vector<double> ms(size_t(std::max(a.repeat, 0)));  // written before timing: the record does not grow the RSS
    for (int i = 0; i < a.repeat; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        s.run(ins);
        ms[size_t(i)] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    double med = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                   : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    printf("backend=%s threads=%d repeat=%d warmup=%d\n", s.backend().c_str(), a.threads, a.repeat, a.warmup);
    printf("median_ms=%.3f min_ms=%.3f peak_rss_mb=%.1f times_ms=", med, sorted.front(), peak_rss_mb());
    for (size_t i = 0; i < ms.size(); ++i) printf("%s%.3f", i ? "," : "", ms[i]);
    printf("\n");
    return 0;
}

int cmd_compile(const Args& a) {
    if (a.outdir.empty()) bad("compile needs -o OUTDIR");
    CompileOptions o;
    common_options(o, a);
    o.input_shapes = a.sets[0].shapes;
    o.dims = a.dims;
    CompileReport r = compile(a.model, a.outdir, o);
    std::cout << "wrote " << a.outdir << ": model.cpp (" << r.lines
              << " lines), model.h, main.cpp, npy.h, o2g_info.h, o2g_kernels.h, onednn/, CMakeLists.txt, model.gguf ("
              << r.weights << " weights, " << r.weight_bytes << " bytes)\n"
              << "build: cmake -S " << a.outdir << " -B " << a.outdir << "/build && cmake --build " << a.outdir
              << "/build\n";
    return 0;
}

}  // namespace onnx2ggml::cli
