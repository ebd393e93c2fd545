// api_bench MODEL CALLS [THREADS]: the C++ API's cost per call on MODEL (inputs of ones at its static
// shapes): CALLS runs after 20 warm-up runs, the median of 5 rounds, in microseconds per call (one line:
// "cpp_us_per_call=..."). bench/api_overhead.py compares it with the Python module's on the same model.
#include <onnx2ggml/onnx2ggml.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: api_bench MODEL CALLS [THREADS]\n");
        return 2;
    }
    try {
        onnx2ggml::Model model = onnx2ggml::Model::load(argv[1]);
        onnx2ggml::SessionOptions o;
        o.threads = argc > 3 ? std::atoi(argv[3]) : 1;
        onnx2ggml::Session s(model, o);
        std::vector<std::vector<float>> data;
        std::vector<onnx2ggml::TensorRef> ins;
        for (auto& i : model.inputs()) {
            int64_t n = 1;
            for (int64_t d : i.shape) n *= d;
            data.emplace_back(size_t(n), 1.0f);
            ins.push_back(onnx2ggml::TensorRef::of(data.back().data(), i.shape));
        }
        for (int k = 0; k < 20; ++k) s.run(ins);
        int calls = std::atoi(argv[2]);
        std::vector<double> rounds;
        for (int r = 0; r < 5; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            for (int k = 0; k < calls; ++k) s.run(ins);
            rounds.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                             calls);
        }
        std::sort(rounds.begin(), rounds.end());
        std::printf("cpp_us_per_call=%.2f\n", rounds[2]);
    } catch (const onnx2ggml::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return e.exit_code();
    }
    return 0;
}
