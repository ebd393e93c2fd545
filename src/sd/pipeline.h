// The Stable Diffusion 1.5 pipeline of onnx2ggml-sd on the library API (onnx2ggml.hpp): a model folder
// in the layout of Hugging Face's ONNX exports (text_encoder/, unet/, vae_decoder/, vae_encoder/
// model.onnx, tokenizer/vocab.json + merges.txt), prompt in, image out. Each part is an
// onnx2ggml::Session; the UNet and the VAE are specialized per image size by the session's run-time
// specialization (their height and width are dynamic dims), their weights uploaded once.
#pragma once
#include <onnx2ggml/onnx2ggml.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clip_tokenizer.h"
#include "image.h"
#include "schedulers.h"

namespace onnx2ggml::sd {

struct PipelineOptions {
    std::string backend = "auto";
    int threads = 0;
    std::string weights = "f32";  // --weights of the UNet and the text encoder (the VAE stays f32)
};

struct GenerateParams {
    std::string prompt, negative_prompt;
    int steps = 20;
    double cfg_scale = 7.5;
    uint32_t seed = 42;
    int width = 512, height = 512;
    SamplerKind sampler = SamplerKind::EulerAncestral;
    bool karras = false;
    std::optional<Image> init_image;  // img2img (resized to width x height if it differs)
    double strength = 0.75;
    std::function<void(int step, int steps, double step_seconds)> on_step;  // progress
};

struct Timings {
    double load_ms = 0, text_ms = 0, encode_ms = 0, unet_ms = 0, decode_ms = 0, total_ms = 0;
    int unet_steps = 0;
};

struct Result {
    std::vector<float> latents;  // final latents (1 x 4 x h/8 x w/8), before the VAE
    Image image;
    Timings timings;
};

class Pipeline {
public:
    Pipeline(const std::string& folder, const PipelineOptions& options);
    ~Pipeline();
    Result generate(const GenerateParams& p);
    const ClipTokenizer& tokenizer() const { return tokenizer_; }

private:
    struct Part;
    Part& part(std::unique_ptr<Part>& slot, const char* name, bool quantizable);
    std::vector<float> encode_text(const std::vector<std::string>& prompts, int& dim);
    std::vector<float> unet_eps(const std::vector<float>& x, double t, const std::vector<float>& ctx, int dim, int h,
                                int w, bool guided, double cfg_scale);
    std::vector<float> vae_encode(const Image& img, Rng& rng);
    Image vae_decode(const std::vector<float>& latents, int h, int w);

    std::string folder_;
    PipelineOptions options_;
    ClipTokenizer tokenizer_;
    std::unique_ptr<Part> text_, unet_, decoder_, encoder_;
    double load_ms_ = 0;
};

}  // namespace onnx2ggml::sd
