#include "util/progress.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace onnx2ggml::core {

static std::atomic<bool> g_quiet{false};

void set_progress_quiet(bool quiet) { g_quiet = quiet; }

// the delay before a bar appears: 500 ms (ONNX2GGML_PROGRESS_DELAY_MS overrides it, for the tests)
static double delay_ms() {
    const char* e = std::getenv("ONNX2GGML_PROGRESS_DELAY_MS");
    return e ? std::atof(e) : 500.0;
}

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(!g_quiet && total > 0 && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::update(uint64_t done) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    double since_start = std::chrono::duration<double, std::milli>(now - start_).count();
    double since_last = std::chrono::duration<double, std::milli>(now - last_).count();
    if (since_start < delay_ms() || (drawn_ && since_last < 100 && done < total_)) return;
    last_ = now;
    drawn_ = true;
    const int width = 30;
    int fill = int(double(width) * double(done) / double(total_));
    std::string bar(size_t(fill), '#');
    bar += std::string(size_t(width - fill), '.');
    fprintf(stderr, "\r%s [%s] %3d%% (%llu/%llu) %.1fs", label_.c_str(), bar.c_str(),
            int(100.0 * double(done) / double(total_)), static_cast<unsigned long long>(done),
            static_cast<unsigned long long>(total_), since_start / 1000.0);
    fflush(stderr);
}

Progress::~Progress() {
    if (!drawn_) return;
    update(total_);
    fprintf(stderr, "\n");
}

}  // namespace onnx2ggml::core
