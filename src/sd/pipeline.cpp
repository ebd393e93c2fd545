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

Pipeline::Pipeline(const std::string& folder, const PipelineOptions& options)
    : folder_(folder), options_(options), tokenizer_(ClipTokenizer::load(folder + "/tokenizer")) {
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
        if (quantizable) o.weights = options_.weights;
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
        auto [ids, weights] = tokenizer_.encode_weighted(prompts[b]);
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

Image Pipeline::vae_decode(const std::vector<float>& latents, int h, int w) {
    Part& de = part(decoder_, "vae_decoder", false);
    const TensorInfo& in = de.input("latent_sample", 0);
    std::vector<float> z(latents);
    for (float& v : z) v = float(v / kLatentScale);
    auto r = de.session.run({{in.name, TensorRef::of(z.data(), {1, 4, h, w})}});
    Tensor o = de.output(r, "sample");
    const auto& s = o.shape();
    if (o.dtype() != DType::Float || s.size() != 4 || s[0] != 1 || s[1] != 3)
        throw bad_model(de.path + ": the output must be float32 [1, 3, H, W]");
    return image_from_planar(o.data<float>(), int(s[3]), int(s[2]));
}

Result Pipeline::generate(const GenerateParams& p) {
    if (p.width <= 0 || p.height <= 0 || p.width % 64 || p.height % 64)
        throw Error(ErrorCategory::BadInput, "--width and --height must be positive multiples of 64");
    if (p.init_image && !(p.strength > 0 && p.strength <= 1))
        throw Error(ErrorCategory::BadInput, "--strength must be in (0, 1]");
    const auto t_all = std::chrono::steady_clock::now();
    const double load_before = load_ms_;
    // the parts this image needs, loaded before the clocks of the stages start
    part(text_, "text_encoder", true);
    part(unet_, "unet", true);
    part(decoder_, "vae_decoder", false);
    if (p.init_image) part(encoder_, "vae_encoder", false);
    Result res;
    Timings& tm = res.timings;
    const int h = p.height / 8, w = p.width / 8;
    const bool guided = p.cfg_scale > 1.0;

    auto t0 = std::chrono::steady_clock::now();
    int dim = 0;
    std::vector<std::string> prompts;
    if (guided) prompts.push_back(p.negative_prompt);
    prompts.push_back(p.prompt);
    const std::vector<float> ctx = encode_text(prompts, dim);
    tm.text_ms = ms_since(t0);

    Rng rng(p.seed);
    std::optional<std::vector<float>> image_latents;
    if (p.init_image) {
        t0 = std::chrono::steady_clock::now();
        image_latents = vae_encode(resize_bilinear(*p.init_image, p.width, p.height), rng);
        tm.encode_ms = ms_since(t0);
    }
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
    t0 = std::chrono::steady_clock::now();
    res.image = vae_decode(x, h, w);
    tm.decode_ms = ms_since(t0);
    tm.total_ms = ms_since(t_all);
    tm.load_ms = load_ms_ - load_before;
    return res;
}

}  // namespace onnx2ggml::sd
