// onnx2ggml-sd: Stable Diffusion 1.5 text-to-image and image-to-image on ONNX models run by
// onnx2ggml (docs/stable-diffusion.md). The model folder is the layout of Hugging Face's ONNX exports
// (scripts/export_sd_folder.py writes one).
//
// Exit codes as onnx2ggml's: 0 ok, 2 bad usage, input or model, 3 a model onnx2ggml cannot run,
// 4 internal error.
#include <unistd.h>

#include <algorithm>
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
  onnx2ggml-sd decode --model DIR --latents F.npy [VAE options] -o OUT.png
                           (the VAE decoder alone on latents --save-latents wrote; DIR needs only vae_decoder/)

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
  --weights-rule REGEX=TYPE  per tensor, before --weights (repeatable, first match wins; onnx2ggml's rules,
                           e.g. 'conv=q8_0' also quantizes the convolution kernels: docs/quantization.md)
  --save-latents F.npy     also write the final latents (before the VAE), float32 1x4xH/8xW/8
  --vae-tiling MODE        VAE decode in overlapping tiles, which bounds its memory: auto (default:
                           when the image has more pixels than 512x512), on, off
  --vae-tile-size N        tile side in image pixels, a multiple of 8, >= 64 (default 384)
  --vae-tile-overlap N     least overlap of neighbouring tiles in image pixels, a multiple of 8, less
                           than the tile (default 128)
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

VaeTiling vae_tiling_from(const std::string& v) {
    if (v == "auto") return VaeTiling::Auto;
    if (v == "on") return VaeTiling::On;
    if (v != "off") usage_error("--vae-tiling " + v + ": expected auto, on or off");
    return VaeTiling::Off;
}

// A float32 .npy of shape (1, 4, h, w) or (4, h, w), C order (what --save-latents writes).
std::vector<float> read_latents_npy(const std::string& path, int& h, int& w) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error(path + ": cannot open");
    auto bad = [&](const std::string& why) { return std::runtime_error(path + ": " + why); };
    char magic[8];
    if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6)) throw bad("not a .npy file");
    uint32_t hl = 0;
    unsigned char b[4] = {0, 0, 0, 0};
    if (magic[6] == 1) {
        f.read(reinterpret_cast<char*>(b), 2);
        hl = uint32_t(b[0]) | uint32_t(b[1]) << 8;
    } else {
        f.read(reinterpret_cast<char*>(b), 4);
        hl = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
    }
    if (!f || hl > 65536) throw bad("bad .npy header");
    std::string header(hl, '\0');
    if (!f.read(&header[0], hl)) throw bad("bad .npy header");
    auto squeeze = [](std::string v) {
        v.erase(std::remove(v.begin(), v.end(), ' '), v.end());
        return v;
    };
    const std::string hd = squeeze(header);
    if (hd.find("'descr':'<f4'") == std::string::npos) throw bad("the latents must be float32 ('<f4')");
    if (hd.find("'fortran_order':False") == std::string::npos) throw bad("the latents must be in C order");
    const size_t s0 = hd.find("'shape':(");
    const size_t s1 = s0 == std::string::npos ? s0 : hd.find(')', s0);
    if (s1 == std::string::npos) throw bad("bad .npy header (no shape)");
    std::vector<long long> dims;
    std::stringstream ss(hd.substr(s0 + 9, s1 - s0 - 9));
    for (std::string d; std::getline(ss, d, ',');)
        if (!d.empty()) dims.push_back(std::atoll(d.c_str()));
    if (dims.size() == 4 && dims[0] == 1) dims.erase(dims.begin());
    if (dims.size() != 3 || dims[0] != 4 || dims[1] <= 0 || dims[2] <= 0 || dims[1] > 4096 || dims[2] > 4096)
        throw bad("the latents must have shape (1, 4, h, w)");
    h = int(dims[1]), w = int(dims[2]);
    std::vector<float> v(size_t(4) * size_t(h) * size_t(w));
    if (!f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float))))
        throw bad("truncated data");
    return v;
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
    if (cmd != "txt2img" && cmd != "img2img" && cmd != "tokenize" && cmd != "decode")
        usage_error("unknown command '" + cmd + "'");
    GenerateParams p;
    PipelineOptions o;
    std::string model, out, init_image, save_latents, latents, sampler = "euler_a";
    // the tiles in pixels on the command line, in latents (8 pixels) in PipelineOptions
    int tile_px = o.vae_tile * 8, overlap_px = o.vae_tile_overlap * 8;
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
        else if (a == "--weights-rule") o.weight_rules.push_back(val());
        else if (a == "-o" || a == "--output") out = val();
        else if (a == "--save-latents") save_latents = val();
        else if (a == "--latents") latents = val();
        else if (a == "--vae-tiling") o.vae_tiling = vae_tiling_from(val());
        else if (a == "--vae-tile-size") tile_px = int(num(64, 16384));
        else if (a == "--vae-tile-overlap") overlap_px = int(num(0, 16384));
        else if (a == "--quiet") quiet = true;
        else usage_error("unknown option '" + a + "'");
    }
    if (model.empty()) usage_error("--model DIR is required");
    if (tile_px % 8) usage_error("--vae-tile-size " + std::to_string(tile_px) + ": must be a multiple of 8 pixels");
    if (overlap_px % 8)
        usage_error("--vae-tile-overlap " + std::to_string(overlap_px) + ": must be a multiple of 8 pixels");
    if (overlap_px >= tile_px)
        usage_error("--vae-tile-overlap " + std::to_string(overlap_px) + ": must be less than the tile (" +
                    std::to_string(tile_px) + " pixels)");
    o.vae_tile = tile_px / 8;
    o.vae_tile_overlap = overlap_px / 8;
    if (cmd == "decode") {
        if (latents.empty()) usage_error("decode needs --latents F.npy");
        if (out.empty()) usage_error("-o OUT.png is required");
        int h = 0, w = 0;
        const std::vector<float> z = read_latents_npy(latents, h, w);
        Pipeline pipe(model, o, PipelineParts::VaeDecoderOnly);
        Timings t;
        const Image img = pipe.decode(z, h, w, &t);
        write_png(out, img, {});
        if (!quiet)
            std::fprintf(stderr, "%s: %dx%d, load %.0f ms, VAE decode %.0f ms (%d %s)\n", out.c_str(), img.width,
                         img.height, t.load_ms, t.decode_ms, t.decode_tiles, t.decode_tiles == 1 ? "run" : "tiles");
        return 0;
    }
    if (!latents.empty()) usage_error("--latents is for decode");
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
    o.release_parts = true;  // one image per process: hold one part at a time
    Pipeline pipe(model, o);
    Result r = pipe.generate(p);
    write_png(out, r.image, {{"parameters", parameters_text(p, model)}});
    if (!save_latents.empty()) write_npy(save_latents, r.latents, {1, 4, p.height / 8, p.width / 8});
    if (!quiet) {
        const Timings& t = r.timings;
        std::fprintf(stderr,
                     "%s: %dx%d, %d steps of %s, seed %u. load %.0f ms, text %.0f ms, %s%.0f ms per UNet step, "
                     "VAE decode %.0f ms (%d %s), total %.0f ms (without load)\n",
                     out.c_str(), p.width, p.height, t.unet_steps, sampler_name(p.sampler), p.seed, t.load_ms, t.text_ms,
                     p.init_image ? ("VAE encode " + std::to_string(int(t.encode_ms)) + " ms, ").c_str() : "",
                     t.unet_steps ? t.unet_ms / t.unet_steps : 0.0, t.decode_ms, t.decode_tiles,
                     t.decode_tiles == 1 ? "run" : "tiles", t.total_ms);
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
