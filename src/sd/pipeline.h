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

// VAE tiling (decode only): Off decodes the latents in one run; On in overlapping tiles of
// vae_tile x vae_tile latents (a dim no larger than the tile is not split); Auto tiles when the image
// has more pixels than 512 x 512 (SD 1.5's own size: 64 x 64 latents), whatever the tile size.
// The default tile, 48 latents (384 pixels), keeps a 1024 x 1024 decode with SD 1.5's VAE under 2 GB
// of RSS (docs/text-to-image.md, "VAE tiling").
enum class VaeTiling { Off, On, Auto };
constexpr int kVaeAutoTileArea = 64 * 64;  // Auto tiles above this many latents

struct PipelineOptions {
    std::string backend = "auto";
    int threads = 0;
    std::string weights = "f32";  // --weights of the UNet and the text encoder (the VAE stays f32)
    std::vector<std::string> weight_rules;  // --weights-rule of the same parts ("REGEX=TYPE")
    VaeTiling vae_tiling = VaeTiling::Auto;
    int vae_tile = 48;          // tile side, in latents (8 image pixels each): >= 8
    int vae_tile_overlap = 16;  // least overlap of neighbouring tiles, in latents: 0 <= overlap < vae_tile
    // free each part once its stage of an image is done (peak memory: one part at a time; the next
    // image loads them again). onnx2ggml-sd, which makes one image per process, sets it.
    bool release_parts = false;
};

// What a Pipeline loads: every part (generate), or only the VAE decoder (decode saved latents).
enum class PipelineParts { All, VaeDecoderOnly };

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
    double load_ms = 0, text_ms = 0, encode_ms = 0, unet_ms = 0, decode_ms = 0;
    double total_ms = 0;  // prompt to image, without load_ms
    int unet_steps = 0;
    int decode_tiles = 0;  // VAE decoder runs: 1 untiled, else the tile count
};

struct Result {
    std::vector<float> latents;  // final latents (1 x 4 x h/8 x w/8), before the VAE
    Image image;
    Timings timings;
};

class Pipeline {
public:
    // Throws Error (BadInput) for a folder without the parts `parts` needs or bad tiling options.
    Pipeline(const std::string& folder, const PipelineOptions& options, PipelineParts parts = PipelineParts::All);
    ~Pipeline();
    Result generate(const GenerateParams& p);  // needs PipelineParts::All
    // The VAE decoder alone on latents as generate() makes them (1 x 4 x h x w, scaled by 0.18215,
    // as --save-latents writes them), with the options' tiling. timings: load_ms, decode_ms, decode_tiles.
    Image decode(const std::vector<float>& latents, int h, int w, Timings* timings = nullptr);
    const ClipTokenizer& tokenizer() const { return *tokenizer_; }

private:
    struct Part;
    Part& part(std::unique_ptr<Part>& slot, const char* name, bool quantizable);
    std::vector<float> encode_text(const std::vector<std::string>& prompts, int& dim);
    std::vector<float> unet_eps(const std::vector<float>& x, double t, const std::vector<float>& ctx, int dim, int h,
                                int w, bool guided, double cfg_scale);
    std::vector<float> vae_encode(const Image& img, Rng& rng);
    Image vae_decode(const std::vector<float>& latents, int h, int w, int& runs);
    Tensor decode_run(Part& de, const float* z, int h, int w);

    std::string folder_;
    PipelineOptions options_;
    std::optional<ClipTokenizer> tokenizer_;  // absent with PipelineParts::VaeDecoderOnly
    std::unique_ptr<Part> text_, unet_, decoder_, encoder_;
    double load_ms_ = 0;
};

}  // namespace onnx2ggml::sd
