// Stable Diffusion samplers (onnx2ggml-sd): diffusers' formulas for SD 1.5's scheduler config
// (scaled_linear betas 0.00085..0.012, 1000 training steps, epsilon prediction).
//
//   euler, euler_a  EulerDiscreteScheduler / EulerAncestralDiscreteScheduler, timestep_spacing
//                   "linspace": sigmas interpolated at linspace(0, 999, steps), then 0; the initial
//                   noise scaled by the largest sigma; the model sees x / sqrt(sigma^2 + 1).
//   dpmpp_2m        DPM-Solver++(2M) on the same sigmas (k-diffusion's sample_dpmpp_2m; diffusers'
//                   DPMSolverMultistepScheduler with algorithm_type "dpmsolver++", solver_order 2,
//                   lower-order final step).
//   ddim            DDIMScheduler, eta 0, timestep_spacing "leading", steps_offset 1,
//                   set_alpha_to_one false.
//   karras          Karras et al.'s sigmas (rho 7) between the smallest and largest training sigma
//                   for the sigma samplers, timesteps by log-sigma interpolation.
// tests/sd_pipeline/ref_pipeline.py implements the same formulas in PyTorch.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace onnx2ggml::sd {

// Normal numbers from std::mt19937(seed): doubles of 53 bits from two draws (numpy's RandomState
// makes the same ones), pairs by Box-Muller. One stream per image: the VAE encoder's sample
// (img2img), the initial noise, then euler_a's noise per step.
class Rng {
public:
    explicit Rng(uint32_t seed) : mt_(seed) {}
    std::vector<float> randn(size_t n);

private:
    double uniform();
    std::mt19937 mt_;
};

enum class SamplerKind { Euler, EulerAncestral, DpmPP2M, Ddim };
SamplerKind sampler_from_name(const std::string& name);  // throws std::invalid_argument
const char* sampler_name(SamplerKind k);

class Sampler {
public:
    // strength < 1 (img2img): the schedule's first steps are skipped, as diffusers' img2img does
    // (int(steps * strength) steps run).
    Sampler(SamplerKind kind, int steps, bool karras, double strength = 1.0);
    int steps() const { return int(timesteps_.size()); }  // steps that run
    double timestep(int i) const { return timesteps_[size_t(i)]; }  // what the UNet is given at step i
    // initial latents: noise * the first sigma (txt2img), or the encoded image noised to the first step
    std::vector<float> init(const std::vector<float>& noise, const std::vector<float>* image_latents) const;
    // the UNet's input at step i (x scaled for the sigma samplers)
    std::vector<float> model_input(const std::vector<float>& x, int i) const;
    // one step from the guided noise prediction eps
    void step(std::vector<float>& x, const std::vector<float>& eps, int i, Rng& rng);

private:
    SamplerKind kind_;
    std::vector<double> timesteps_, sigmas_;  // sigmas_ has steps() + 1 entries (the last 0); unused by ddim
    std::vector<double> alphas_cumprod_;
    int ddim_ratio_ = 0;
    std::vector<float> old_denoised_;  // dpmpp_2m's previous prediction
};

}  // namespace onnx2ggml::sd
