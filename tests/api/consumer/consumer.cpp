// consumer_cpp MODEL OUT.bin: runs MODEL on an input of ones (its static shape) and writes output 0's bytes.
#include <onnx2ggml/onnx2ggml.hpp>

#include <cstdio>
#include <fstream>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    try {
        onnx2ggml::Model model = onnx2ggml::Model::load(argv[1]);
        onnx2ggml::Session session(model, {"auto", 2});
        const std::vector<int64_t>& shape = model.inputs()[0].shape;
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> x(size_t(n), 1.0f);
        std::vector<onnx2ggml::Tensor> outs = session.run({onnx2ggml::TensorRef::of(x.data(), shape)});
        std::ofstream(argv[2], std::ios::binary)
            .write(static_cast<const char*>(outs[0].raw()), std::streamsize(outs[0].nbytes()));
        std::printf("%s %s: %s, %lld values\n", onnx2ggml::version(), outs[0].name().c_str(), session.backend().c_str(),
                    static_cast<long long>(outs[0].numel()));
    } catch (const onnx2ggml::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return e.exit_code();
    }
    return 0;
}
