#include "pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

namespace onnx2ggml::sd {

namespace {

constexpr double kLatentScale = 0.18215;  // SD 1.5's VAE scaling factor

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Error bad_model(const std::string& what) { return Error(ErrorCategory::BadInput, what); }

// VAE tiling. The origins of the tiles along one dim of `length` latents: tiles all of size `tile`
// (<= length), as few as keep neighbours overlapping by at least `overlap` (< tile), spread evenly
// from 0 to length - tile. Evenly, rather than at a fixed stride with the last tile shifted back to
// end at the border: the same count and size of tiles (one specialization of the decoder), but the
// overlaps all as wide (within one latent), so no seam gets a narrower blend than the others.
std::vector<int> tile_origins(int length, int tile, int overlap) {
    if (tile >= length) return {0};
    const int stride = tile - overlap, span = length - tile;
    const int n = 1 + (span + stride - 1) / stride;  // origins 0 .. span at most `stride` apart
    std::vector<int> o(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) o[size_t(i)] = int(int64_t(i) * span / (n - 1));
    return o;
}

// The blend weights along one dim of tile `i` (origins `o`, `tile` latents, `f` pixels per latent):
// 1 inside, ramping linearly down to the tile's edge across the overlap with each neighbour (no ramp
// at the image's border). With two tiles on a pixel, the ramps of both sum to 1 (a linear cross-
// fade, at pixel centres); with more (overlap > tile / 2) the accumulated weights are normalized.
// Weights are > 0 on every pixel, so every pixel's normalizer is too.
std::vector<float> tile_ramp(const std::vector<int>& o, size_t i, int tile, int f) {
    const int n = tile * f;
    const int left = i > 0 ? (o[i - 1] + tile - o[i]) * f : 0;              // overlap with the previous tile
    const int right = i + 1 < o.size() ? (o[i] + tile - o[i + 1]) * f : 0;  // and the next one
    std::vector<float> w(size_t(n), 1.0f);
    for (int p = 0; p < n; ++p) {
        if (left > 0) w[size_t(p)] = std::min(w[size_t(p)], float((p + 0.5) / left));
        if (right > 0) w[size_t(p)] = std::min(w[size_t(p)], float((n - p - 0.5) / right));
    }
    return w;
}

}  // namespace

// One ONNX part of the folder: its session and where its inputs are.
struct Pipeline::Part {
    std::string path;
    Model model;
    Session session;
    Part(const std::string& p, const SessionOptions& o) : path(p), model(Model::load(p)), session(model, o) {}

    const TensorInfo& input(const std::string& name, size_t fallback) const {
        const auto& ins = model.inputs();
        for (const auto& i : ins)
            if (i.name == name) return i;
        if (fallback >= ins.size()) throw bad_model(path + ": no input '" + name + "'");
        return ins[fallback];
    }
    // dim 0 is dynamic: the part takes a batch of 2 (the unconditional and the conditional halves)
    bool batched(const TensorInfo& t) const { return !t.shape.empty() && t.shape[0] < 0; }
    Tensor output(std::vector<Tensor> outs, const std::string& name) const {
        for (auto& o : outs)
            if (o.name() == name) return o;
        return outs.at(0);
    }
};

Pipeline::Pipeline(const std::string& folder, const PipelineOptions& options, PipelineParts parts)
    : folder_(folder), options_(options) {
    if (options.vae_tile < 8 || options.vae_tile_overlap < 0 || options.vae_tile_overlap >= options.vae_tile)
        throw Error(ErrorCategory::BadInput,
                    "VAE tiles: the tile must be at least 8 latents (64 pixels) and the overlap in [0, tile)");
    if (parts == PipelineParts::VaeDecoderOnly) {
        if (!std::filesystem::exists(folder + "/vae_decoder/model.onnx"))
            throw bad_model(folder + "/vae_decoder/model.onnx: not found");
        return;
    }
    tokenizer_ = ClipTokenizer::load(folder + "/tokenizer");
    for (const char* p : {"text_encoder", "unet", "vae_decoder"})
        if (!std::filesystem::exists(folder + "/" + p + "/model.onnx"))
            throw bad_model(folder + "/" + p + "/model.onnx: not found (the model folder needs text_encoder/, unet/, vae_decoder/ and tokenizer/)");
}

Pipeline::~Pipeline() = default;

Pipeline::Part& Pipeline::part(std::unique_ptr<Part>& slot, const char* name, bool quantizable) {
    if (!slot) {
        const auto t0 = std::chrono::steady_clock::now();
        SessionOptions o;
        o.backend = options_.backend;
        o.threads = options_.threads;
        if (quantizable) o.weights = options_.weights, o.weight_rules = options_.weight_rules;
        slot = std::make_unique<Part>(folder_ + "/" + name + "/model.onnx", o);
        load_ms_ += ms_since(t0);
    }
    return *slot;
}

std::vector<float> Pipeline::encode_text(const std::vector<std::string>& prompts, int& dim) {
    Part& te = part(text_, "text_encoder", true);
    const TensorInfo& in = te.input("input_ids", 0);
    std::vector<float> out;
    for (size_t b = 0; b < prompts.size(); ++b) {
        auto [ids, weights] = tokenizer_->encode_weighted(prompts[b]);
        const std::vector<int64_t> shape{1, int64_t(ids.size())};
        std::vector<Tensor> r;
        if (in.dtype == DType::Int64) {
            std::vector<int64_t> v(ids.begin(), ids.end());
            r = te.session.run({{in.name, TensorRef::of(v.data(), shape)}});
        } else if (in.dtype == DType::Int32) {
            std::vector<int32_t> v(ids.begin(), ids.end());
            r = te.session.run({{in.name, TensorRef::of(v.data(), shape)}});
        } else {
            throw bad_model(te.path + ": input_ids is " + dtype_name(in.dtype) + " (int32 or int64 expected)");
        }
        // one prompt per run: the text encoder is cheap next to the UNet
        Tensor h = te.output(r, "last_hidden_state");
        if (h.dtype() != DType::Float || h.shape().size() != 3)
            throw bad_model(te.path + ": last_hidden_state must be float32 [batch, tokens, dim]");
        dim = int(h.shape()[2]);
        std::vector<float> hs(h.data<float>(), h.data<float>() + h.numel());
        if (std::any_of(weights.begin(), weights.end(), [](float w) { return w != 1.0f; })) {
            // prompt weights as stable-diffusion.cpp and A1111 apply them: scale each token's state,
            // then restore the mean of the whole
            double before = 0, after = 0;
            for (float v : hs) before += v;
            for (size_t t = 0; t < weights.size(); ++t)
                for (int d = 0; d < dim; ++d) hs[t * size_t(dim) + size_t(d)] *= weights[t];
            for (float v : hs) after += v;
            const float k = float(before / after);
            for (float& v : hs) v *= k;
        }
        out.insert(out.end(), hs.begin(), hs.end());
    }
    return out;
}

std::vector<float> Pipeline::unet_eps(const std::vector<float>& x, double t, const std::vector<float>& ctx, int dim,
                                      int h, int w, bool guided, double cfg_scale) {
    Part& un = part(unet_, "unet", true);
    const TensorInfo& sample = un.input("sample", 0);
    const TensorInfo& ts = un.input("timestep", 1);
    const TensorInfo& hidden = un.input("encoder_hidden_states", 2);
    if (sample.dtype != DType::Float || hidden.dtype != DType::Float)
        throw bad_model(un.path + ": sample and encoder_hidden_states must be float32 (for f16 weights, use a float32 export with --weights f16)");
    const int64_t tokens = int64_t(ctx.size()) / (guided ? 2 : 1) / dim;
    const size_t n = x.size();
    float tf = float(t);
    double td = t;
    int64_t ti = int64_t(t);  // an integer timestep input: truncated, as diffusers' ONNX pipeline casts
    int32_t t32 = int32_t(t);
    TensorRef tref;
    switch (ts.dtype) {
        case DType::Float: tref = TensorRef::of(&tf, {1}); break;
        case DType::Double: tref = TensorRef::of(&td, {1}); break;
        case DType::Int64: tref = TensorRef::of(&ti, {1}); break;
        case DType::Int32: tref = TensorRef::of(&t32, {1}); break;
        default: throw bad_model(un.path + ": timestep is " + dtype_name(ts.dtype) + " (float32, float64, int64 or int32 expected)");
    }
    if (!ts.shape.empty() && ts.shape[0] > 1) throw bad_model(un.path + ": timestep must have one element");
    if (ts.shape.empty()) tref.shape.clear();
    auto run = [&](const float* xs, int64_t b, const float* c) {
        auto r = un.session.run({{sample.name, TensorRef::of(xs, {b, 4, h, w})},
                                 {ts.name, tref},
                                 {hidden.name, TensorRef::of(c, {b, tokens, dim})}});
        Tensor o = un.output(r, "out_sample");
        if (o.dtype() != DType::Float || size_t(o.numel()) != n * size_t(b))
            throw bad_model(un.path + ": out_sample must be float32 of the sample's shape");
        return std::vector<float>(o.data<float>(), o.data<float>() + o.numel());
    };
    if (!guided) return run(x.data(), 1, ctx.data());
    std::vector<float> eu, ec;
    if (un.batched(sample)) {  // one run on [uncond; cond]
        std::vector<float> xx(x);
        xx.insert(xx.end(), x.begin(), x.end());
        auto e = run(xx.data(), 2, ctx.data());
        eu.assign(e.begin(), e.begin() + long(n));
        ec.assign(e.begin() + long(n), e.end());
    } else {
        eu = run(x.data(), 1, ctx.data());
        ec = run(x.data(), 1, ctx.data() + ctx.size() / 2);
    }
    for (size_t k = 0; k < n; ++k) eu[k] = float(eu[k] + cfg_scale * (ec[k] - eu[k]));
    return eu;
}

std::vector<float> Pipeline::vae_encode(const Image& img, Rng& rng) {
    Part& en = part(encoder_, "vae_encoder", false);
    const TensorInfo& in = en.input("sample", 0);
    std::vector<float> px = planar_from_image(img);
    auto r = en.session.run({{in.name, TensorRef::of(px.data(), {1, 3, img.height, img.width})}});
    Tensor o = r.at(0);
    const auto& s = o.shape();
    if (o.dtype() != DType::Float || s.size() != 4 || s[0] != 1 || (s[1] != 8 && s[1] != 4))
        throw bad_model(en.path + ": the output must be float32 [1, 8, h, w] (mean and log-variance) or [1, 4, h, w]");
    const size_t plane = size_t(s[2] * s[3]), n = 4 * plane;
    const float* m = o.data<float>();
    std::vector<float> z(m, m + n);
    if (s[1] == 8) {  // a sample of the latent distribution, as diffusers' img2img takes
        const std::vector<float> eps = rng.randn(n);
        for (size_t k = 0; k < n; ++k) z[k] = float(m[k] + std::exp(0.5 * std::clamp(m[n + k], -30.0f, 20.0f)) * eps[k]);
    }
    for (float& v : z) v = float(v * kLatentScale);
    return z;
}

// One run of the VAE decoder on unscaled latents z (1 x 4 x h x w): the image, float32 [1, 3, H, W].
Tensor Pipeline::decode_run(Part& de, const float* z, int h, int w) {
    const TensorInfo& in = de.input("latent_sample", 0);
    auto r = de.session.run({{in.name, TensorRef::of(z, {1, 4, h, w})}});
    Tensor o = de.output(r, "sample");
    const auto& s = o.shape();
    if (o.dtype() != DType::Float || s.size() != 4 || s[0] != 1 || s[1] != 3 || s[2] % h || s[3] % w ||
        s[2] / h != s[3] / w || s[2] == 0)
        throw bad_model(de.path +
                        ": the output must be float32 [1, 3, H, W], H and W the same multiple of the latents'");
    return o;
}

Image Pipeline::vae_decode(const std::vector<float>& latents, int h, int w, int& runs) {
    Part& de = part(decoder_, "vae_decoder", false);
    std::vector<float> z(latents);
    for (float& v : z) v = float(v / kLatentScale);
    const int tile = options_.vae_tile;
    const bool tiled = options_.vae_tiling == VaeTiling::On ||
                       (options_.vae_tiling == VaeTiling::Auto && int64_t(h) * w > kVaeAutoTileArea);
    if (!tiled) {
        runs = 1;
        Tensor o = decode_run(de, z.data(), h, w);
        return image_from_planar(o.data<float>(), int(o.shape()[3]), int(o.shape()[2]));
    }
    // Overlapping tiles, all th x tw latents (one specialization of the decoder, whose activations
    // are what bounds the memory), each decoded alone; their pixels weighted by tile_ramp in both dims
    // into a float accumulator, divided by the summed weights at the end. Not exactly the untiled
    // decode: the GroupNorms' statistics and the mid-block's attention span one tile, and the
    // convolutions see the tile's border as zero padding; the ramps hide the seams this leaves.
    const int th = std::min(tile, h), tw = std::min(tile, w);
    const std::vector<int> ys = tile_origins(h, th, options_.vae_tile_overlap);
    const std::vector<int> xs = tile_origins(w, tw, options_.vae_tile_overlap);
    std::vector<float> tz(size_t(4) * size_t(th) * size_t(tw)), acc, wsum;
    std::vector<std::vector<float>> wy, wx;  // each tile row's and column's ramp, in pixels
    int f = 0, H = 0, W = 0;                 // pixels per latent, the image's size
    runs = 0;
    for (size_t i = 0; i < ys.size(); ++i)
        for (size_t j = 0; j < xs.size(); ++j) {
            for (int c = 0; c < 4; ++c)
                for (int y = 0; y < th; ++y) {
                    const float* src = &z[(size_t(c) * size_t(h) + size_t(ys[i] + y)) * size_t(w) + size_t(xs[j])];
                    std::copy(src, src + tw, &tz[(size_t(c) * size_t(th) + size_t(y)) * size_t(tw)]);
                }
            Tensor o = decode_run(de, tz.data(), th, tw);
            ++runs;
            if (!f) {
                f = int(o.shape()[2]) / th;
                H = h * f, W = w * f;
                acc.assign(size_t(3) * size_t(H) * size_t(W), 0.0f);
                wsum.assign(size_t(H) * size_t(W), 0.0f);
                for (size_t k = 0; k < ys.size(); ++k) wy.push_back(tile_ramp(ys, k, th, f));
                for (size_t k = 0; k < xs.size(); ++k) wx.push_back(tile_ramp(xs, k, tw, f));
            } else if (o.shape()[2] != int64_t(th) * f || o.shape()[3] != int64_t(tw) * f) {
                throw bad_model(de.path + ": the output's size differs between tiles of the same size");
            }
            const int ph = th * f, pw = tw * f, y0 = ys[i] * f, x0 = xs[j] * f;
            const float* px = o.data<float>();
            for (int y = 0; y < ph; ++y) {
                const size_t row = size_t(y0 + y) * size_t(W) + size_t(x0);
                for (int x = 0; x < pw; ++x) {
                    const float k = wy[i][size_t(y)] * wx[j][size_t(x)];
                    wsum[row + size_t(x)] += k;
                    for (int c = 0; c < 3; ++c)
                        acc[size_t(c) * size_t(H) * size_t(W) + row + size_t(x)] +=
                            k * px[(size_t(c) * size_t(ph) + size_t(y)) * size_t(pw) + size_t(x)];
                }
            }
        }
    const size_t plane = size_t(H) * size_t(W);
    for (int c = 0; c < 3; ++c)
        for (size_t p = 0; p < plane; ++p) acc[size_t(c) * plane + p] /= wsum[p];
    return image_from_planar(acc.data(), W, H);
}

Image Pipeline::decode(const std::vector<float>& latents, int h, int w, Timings* timings) {
    if (h <= 0 || w <= 0 || latents.size() != size_t(4) * size_t(h) * size_t(w))
        throw Error(ErrorCategory::BadInput, "the latents must be 1 x 4 x h x w");
    const double load_before = load_ms_;
    part(decoder_, "vae_decoder", false);
    const auto t0 = std::chrono::steady_clock::now();
    int runs = 0;
    Image img = vae_decode(latents, h, w, runs);
    if (timings) {
        timings->load_ms = load_ms_ - load_before;
        timings->decode_ms = ms_since(t0);
        timings->decode_tiles = runs;
    }
    return img;
}

Result Pipeline::generate(const GenerateParams& p) {
    if (!tokenizer_) throw Error(ErrorCategory::Internal, "Pipeline::generate on a pipeline of the VAE decoder only");
    if (p.width <= 0 || p.height <= 0 || p.width % 64 || p.height % 64)
        throw Error(ErrorCategory::BadInput, "--width and --height must be positive multiples of 64");
    if (p.init_image && !(p.strength > 0 && p.strength <= 1))
        throw Error(ErrorCategory::BadInput, "--strength must be in (0, 1]");
    const auto t_all = std::chrono::steady_clock::now();
    const double load_before = load_ms_;
    // Each part is loaded before its stage's clock starts (load_ms counts the loading). With
    // release_parts a part's session goes once its stage is done, so the process holds one part's
    // weights and buffers at a time (the UNet's, at most), and the next image loads them again.
    const bool release = options_.release_parts;
    Result res;
    Timings& tm = res.timings;
    const int h = p.height / 8, w = p.width / 8;
    const bool guided = p.cfg_scale > 1.0;

    part(text_, "text_encoder", true);
    auto t0 = std::chrono::steady_clock::now();
    int dim = 0;
    std::vector<std::string> prompts;
    if (guided) prompts.push_back(p.negative_prompt);
    prompts.push_back(p.prompt);
    const std::vector<float> ctx = encode_text(prompts, dim);
    tm.text_ms = ms_since(t0);
    if (release) text_.reset();

    Rng rng(p.seed);
    std::optional<std::vector<float>> image_latents;
    if (p.init_image) {
        part(encoder_, "vae_encoder", false);
        t0 = std::chrono::steady_clock::now();
        image_latents = vae_encode(resize_bilinear(*p.init_image, p.width, p.height), rng);
        tm.encode_ms = ms_since(t0);
        if (release) encoder_.reset();
    }
    part(unet_, "unet", true);
    Sampler sampler(p.sampler, p.steps, p.karras, p.init_image ? p.strength : 1.0);
    const std::vector<float> noise = rng.randn(size_t(4 * h * w));
    std::vector<float> x = sampler.init(noise, image_latents ? &*image_latents : nullptr);
    for (int i = 0; i < sampler.steps(); ++i) {
        t0 = std::chrono::steady_clock::now();
        const std::vector<float> eps =
            unet_eps(sampler.model_input(x, i), sampler.timestep(i), ctx, dim, h, w, guided, p.cfg_scale);
        sampler.step(x, eps, i, rng);
        const double ms = ms_since(t0);
        tm.unet_ms += ms;
        if (p.on_step) p.on_step(i + 1, sampler.steps(), ms / 1000);
    }
    tm.unet_steps = sampler.steps();
    res.latents = x;
    if (release) unet_.reset();
    part(decoder_, "vae_decoder", false);
    t0 = std::chrono::steady_clock::now();
    res.image = vae_decode(x, h, w, tm.decode_tiles);
    tm.decode_ms = ms_since(t0);
    if (release) decoder_.reset();
    tm.load_ms = load_ms_ - load_before;
    tm.total_ms = ms_since(t_all) - tm.load_ms;
    return res;
}

}  // namespace onnx2ggml::sd
