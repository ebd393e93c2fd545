// A progress bar for long steps (loading, weight conversion and upload, GGUF writing, lowering big
// graphs, compare): drawn on stderr only when stderr is a terminal, only once a step has taken longer
// than half a second, and never under --quiet (set_quiet). Pipes and log files see nothing.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace onnx2ggml::core {

void set_progress_quiet(bool quiet);

class Progress {
public:
    Progress(std::string label, uint64_t total);
    ~Progress();  // ends the line if a bar was drawn
    void update(uint64_t done);
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

private:
    std::string label_;
    uint64_t total_;
    bool enabled_, drawn_ = false;
    std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace onnx2ggml::core
