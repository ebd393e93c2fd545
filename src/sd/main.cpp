// onnx2ggml-sd: Stable Diffusion 1.5 text-to-image and image-to-image on ONNX models run by
// onnx2ggml (docs/stable-diffusion.md). The model folder is the layout of Hugging Face's ONNX exports
// (scripts/export_sd_folder.py writes one).
//
// Exit codes as onnx2ggml's: 0 ok, 2 bad usage, input or model, 3 a model onnx2ggml cannot run,
// 4 internal error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "pipeline.h"

using namespace onnx2ggml;
using namespace onnx2ggml::sd;

namespace {

const char* kUsage = R"(usage:
  onnx2ggml-sd txt2img --model DIR --prompt TEXT [options] -o OUT.png
  onnx2ggml-sd img2img --model DIR --prompt TEXT --init-image IN.png [--strength 0.75] [options] -o OUT.png
  onnx2ggml-sd tokenize --model DIR --prompt TEXT      (the 77 token ids the text encoder gets)

DIR: text_encoder/, unet/, vae_decoder/ (vae_encoder/ for img2img) with model.onnx, tokenizer/ with
vocab.json and merges.txt (the layout of Hugging Face's ONNX exports of SD 1.5).

options:
  --negative-prompt TEXT   (default empty)
  --steps N                sampling steps (default 20)
  --cfg-scale F            classifier-free guidance scale (default 7.5; <= 1: no guidance)
  --seed N                 (default 42; -1: a random seed, printed)
  --width W --height H     image size, multiples of 64 (default 512x512)
  --sampler NAME           euler, euler_a (default), ddim, dpmpp_2m
  --karras                 Karras sigmas (euler, euler_a, dpmpp_2m)
  --backend NAME           onnx2ggml backend: auto (default), cpu, or a ggml device name
  --threads N              CPU threads (default: the usable cores)
  --weights TYPE           storage of the UNet's and text encoder's weights: f32 (default), f16, q8_0, ...
  --save-latents F.npy     also write the final latents (before the VAE), float32 1x4xH/8xW/8
  --quiet                  no progress bar or timings
Prompt weights: (word) x1.1, ((word)) x1.21, [word] /1.1, (word:1.3); \( for a literal parenthesis.
)";

[[noreturn]] void usage_error(const std::string& msg) {
    std::fprintf(stderr, "onnx2ggml-sd: %s\n\n%s", msg.c_str(), kUsage);
    std::exit(2);
}

void write_npy(const std::string& path, const std::vector<float>& v, const std::vector<int64_t>& shape) {
    std::string dims;
    for (size_t i = 0; i < shape.size(); ++i) dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
    header.append(63 - (10 + header.size()) % 64, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    const uint16_t hl = uint16_t(header.size());
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char*>(&hl), 2);
    f << header;
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    if (!f) throw std::runtime_error(path + ": write failed");
}

std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return b;
}

// the generation parameters in the PNG's "parameters" text, in the layout other SD tools write
std::string parameters_text(const GenerateParams& p, const std::string& model) {
    std::string s = p.prompt + "\n";
    if (!p.negative_prompt.empty()) s += "Negative prompt: " + p.negative_prompt + "\n";
    s += "Steps: " + std::to_string(p.steps) + ", Sampler: " + sampler_name(p.sampler) + (p.karras ? " karras" : "") +
         ", CFG scale: " + fmt(p.cfg_scale) + ", Seed: " + std::to_string(p.seed) + ", Size: " + std::to_string(p.width) +
         "x" + std::to_string(p.height) + ", Model: " + model;
    if (p.init_image) s += ", Denoising strength: " + fmt(p.strength);
    return s + ", Generator: onnx2ggml-sd " + version();
}

int run(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    if (cmd != "txt2img" && cmd != "img2img" && cmd != "tokenize") usage_error("unknown command '" + cmd + "'");
    GenerateParams p;
    PipelineOptions o;
    std::string model, out, init_image, save_latents, sampler = "euler_a";
    bool quiet = false, have_prompt = false;
    long long seed = 42;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        auto num = [&](double lo, double hi) {
            const std::string v = val();
            char* end = nullptr;
            const double d = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(d >= lo && d <= hi)) usage_error(a + " " + v + ": expected a number in [" + fmt(lo) + ", " + fmt(hi) + "]");
            return d;
        };
        if (a == "--model") model = val();
        else if (a == "--prompt") p.prompt = val(), have_prompt = true;
        else if (a == "--negative-prompt") p.negative_prompt = val();
        else if (a == "--steps") p.steps = int(num(1, 1000));
        else if (a == "--cfg-scale") p.cfg_scale = num(0, 100);
        else if (a == "--seed") seed = (long long)num(-1, 4294967295.0);
        else if (a == "--width") p.width = int(num(64, 16384));
        else if (a == "--height") p.height = int(num(64, 16384));
        else if (a == "--sampler") sampler = val();
        else if (a == "--karras") p.karras = true;
        else if (a == "--init-image") init_image = val();
        else if (a == "--strength") p.strength = num(0, 1);
        else if (a == "--backend") o.backend = val();
        else if (a == "--threads") o.threads = int(num(0, 4096));
        else if (a == "--weights") o.weights = val();
        else if (a == "-o" || a == "--output") out = val();
        else if (a == "--save-latents") save_latents = val();
        else if (a == "--quiet") quiet = true;
        else usage_error("unknown option '" + a + "'");
    }
    if (model.empty()) usage_error("--model DIR is required");
    if (!have_prompt) usage_error("--prompt is required");
    if (cmd == "tokenize") {
        const ClipTokenizer tok = ClipTokenizer::load(model + "/tokenizer");
        auto [ids, weights] = tok.encode_weighted(p.prompt);
        for (size_t k = 0; k < ids.size(); ++k) std::printf("%s%d", k ? " " : "", ids[k]);
        std::printf("\n");
        return 0;
    }
    if (out.empty()) usage_error("-o OUT.png is required");
    if (cmd == "img2img" && init_image.empty()) usage_error("img2img needs --init-image");
    if (cmd == "txt2img" && !init_image.empty()) usage_error("--init-image is for img2img");
    try {
        p.sampler = sampler_from_name(sampler);
    } catch (const std::invalid_argument& e) {
        usage_error(e.what());
    }
    if (p.width % 64 || p.height % 64) usage_error("--width and --height must be multiples of 64");
    p.seed = seed < 0 ? uint32_t(std::random_device{}()) : uint32_t(seed);
    if (seed < 0 && !quiet) std::fprintf(stderr, "seed: %u\n", p.seed);
    if (!init_image.empty()) p.init_image = read_png(init_image);

    const bool tty = isatty(fileno(stderr));
    if (!quiet)
        p.on_step = [tty](int step, int steps, double sec) {
            if (tty) {
                const int width = 30, done = step * width / steps;
                std::fprintf(stderr, "\r  |%s%s| %d/%d  %.2f s/it", std::string(size_t(done), '#').c_str(),
                             std::string(size_t(width - done), ' ').c_str(), step, steps, sec);
                if (step == steps) std::fprintf(stderr, "\n");
            } else {
                std::fprintf(stderr, "  step %d/%d  %.2f s/it\n", step, steps, sec);
            }
        };
    Pipeline pipe(model, o);
    Result r = pipe.generate(p);
    write_png(out, r.image, {{"parameters", parameters_text(p, model)}});
    if (!save_latents.empty()) write_npy(save_latents, r.latents, {1, 4, p.height / 8, p.width / 8});
    if (!quiet) {
        const Timings& t = r.timings;
        std::fprintf(stderr,
                     "%s: %dx%d, %d steps of %s, seed %u. load %.0f ms, text %.0f ms, %s%.0f ms per UNet step, "
                     "VAE decode %.0f ms, total %.0f ms (without load)\n",
                     out.c_str(), p.width, p.height, t.unet_steps, sampler_name(p.sampler), p.seed, t.load_ms, t.text_ms,
                     p.init_image ? ("VAE encode " + std::to_string(int(t.encode_ms)) + " ms, ").c_str() : "",
                     t.unet_steps ? t.unet_ms / t.unet_steps : 0.0, t.decode_ms, t.total_ms - t.load_ms);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const Error& e) {
        std::fprintf(stderr, "onnx2ggml-sd: %s\n", e.what());
        return e.exit_code();
    } catch (const std::exception& e) {
        // the tokenizer's and the PNG reader's errors name their file
        std::fprintf(stderr, "onnx2ggml-sd: %s\n", e.what());
        return 2;
    }
}
