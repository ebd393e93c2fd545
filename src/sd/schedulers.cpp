#include "schedulers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace onnx2ggml::sd {

double Rng::uniform() {
    const uint32_t a = mt_() >> 5, b = mt_() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

std::vector<float> Rng::randn(size_t n) {
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i += 2) {
        const double u1 = uniform(), u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log(1.0 - u1)), th = 2.0 * M_PI * u2;
        out[i] = float(r * std::cos(th));
        if (i + 1 < n) out[i + 1] = float(r * std::sin(th));
    }
    return out;
}

SamplerKind sampler_from_name(const std::string& name) {
    if (name == "euler") return SamplerKind::Euler;
    if (name == "euler_a") return SamplerKind::EulerAncestral;
    if (name == "dpmpp_2m") return SamplerKind::DpmPP2M;
    if (name == "ddim") return SamplerKind::Ddim;
    throw std::invalid_argument("unknown sampler '" + name + "' (euler, euler_a, ddim, dpmpp_2m)");
}

const char* sampler_name(SamplerKind k) {
    switch (k) {
        case SamplerKind::Euler: return "euler";
        case SamplerKind::EulerAncestral: return "euler_a";
        case SamplerKind::DpmPP2M: return "dpmpp_2m";
        case SamplerKind::Ddim: return "ddim";
    }
    return "?";
}

namespace {

constexpr int kTrainSteps = 1000;

std::vector<double> alphas_cumprod() {  // scaled_linear betas
    std::vector<double> ac(kTrainSteps);
    const double b0 = std::sqrt(0.00085), b1 = std::sqrt(0.012);
    double prod = 1.0;
    for (int i = 0; i < kTrainSteps; ++i) {
        const double b = b0 + (b1 - b0) * i / (kTrainSteps - 1);
        prod *= 1.0 - b * b;
        ac[size_t(i)] = prod;
    }
    return ac;
}

// linspace(a, b, n) as numpy computes it
double linspace_at(double a, double b, int n, int i) { return n == 1 ? a : a + (b - a) * i / (n - 1); }

}  // namespace

Sampler::Sampler(SamplerKind kind, int steps, bool karras, double strength) : kind_(kind) {
    if (steps < 1) throw std::invalid_argument("--steps must be at least 1");
    alphas_cumprod_ = alphas_cumprod();
    const auto& ac = alphas_cumprod_;
    // img2img: int(steps * strength) steps run, the first ones skipped
    const int skip = std::max(steps - std::min(int(steps * strength), steps), 0);
    if (kind == SamplerKind::Ddim) {
        ddim_ratio_ = kTrainSteps / steps;
        for (int i = steps - 1 - skip; i >= 0; --i) timesteps_.push_back(double(i * ddim_ratio_ + 1));
        return;
    }
    std::vector<double> train(kTrainSteps), log_train(kTrainSteps);
    for (int i = 0; i < kTrainSteps; ++i) {
        train[size_t(i)] = std::sqrt((1 - ac[size_t(i)]) / ac[size_t(i)]);
        log_train[size_t(i)] = std::log(train[size_t(i)]);
    }
    std::vector<double> ts(static_cast<size_t>(steps)), sig(static_cast<size_t>(steps));
    for (int i = 0; i < steps; ++i) {
        const double t = linspace_at(kTrainSteps - 1, 0, steps, i);  // linspace(0, 999)[::-1]
        const int lo = std::min(int(t), kTrainSteps - 2);
        ts[size_t(i)] = t;
        sig[size_t(i)] = train[size_t(lo)] + (t - lo) * (train[size_t(lo) + 1] - train[size_t(lo)]);
    }
    if (karras) {
        const double rho = 7.0, lo = std::pow(train.front(), 1 / rho), hi = std::pow(train.back(), 1 / rho);
        for (int i = 0; i < steps; ++i) {
            const double s = std::pow(hi + linspace_at(0, 1, steps, i) * (lo - hi), rho), ls = std::log(s);
            // the training step whose log sigma is the last at or below ls, then linear in log sigma
            int low = int(std::upper_bound(log_train.begin(), log_train.end(), ls) - log_train.begin()) - 1;
            low = std::clamp(low, 0, kTrainSteps - 2);
            const double w = std::clamp((log_train[size_t(low)] - ls) / (log_train[size_t(low)] - log_train[size_t(low) + 1]), 0.0, 1.0);
            sig[size_t(i)] = s;
            ts[size_t(i)] = (1 - w) * low + w * (low + 1);
        }
    }
    sig.push_back(0.0);
    timesteps_.assign(ts.begin() + skip, ts.end());
    sigmas_.assign(sig.begin() + skip, sig.end());
}

std::vector<float> Sampler::init(const std::vector<float>& noise, const std::vector<float>* image) const {
    std::vector<float> x(noise.size());
    if (kind_ == SamplerKind::Ddim) {
        if (!image) return noise;
        if (timesteps_.empty()) return *image;
        const double a = alphas_cumprod_[size_t(timesteps_[0])];
        for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sqrt(a) * (*image)[i] + std::sqrt(1 - a) * noise[i]);
        return x;
    }
    const double s = sigmas_[0];
    for (size_t i = 0; i < x.size(); ++i) x[i] = (image ? (*image)[i] : 0.0f) + float(noise[i] * s);
    return x;
}

std::vector<float> Sampler::model_input(const std::vector<float>& x, int i) const {
    if (kind_ == SamplerKind::Ddim) return x;
    const double s = sigmas_[size_t(i)], scale = 1.0 / std::sqrt(s * s + 1);
    std::vector<float> out(x.size());
    for (size_t k = 0; k < x.size(); ++k) out[k] = float(x[k] * scale);
    return out;
}

void Sampler::step(std::vector<float>& x, const std::vector<float>& eps, int i, Rng& rng) {
    const size_t n = x.size();
    if (kind_ == SamplerKind::Ddim) {
        const int t = int(timesteps_[size_t(i)]), prev = t - ddim_ratio_;
        const double a_t = alphas_cumprod_[size_t(t)], a_p = alphas_cumprod_[size_t(std::max(prev, 0))];
        for (size_t k = 0; k < n; ++k) {
            const double x0 = (x[k] - std::sqrt(1 - a_t) * eps[k]) / std::sqrt(a_t);
            x[k] = float(std::sqrt(a_p) * x0 + std::sqrt(1 - a_p) * eps[k]);
        }
        return;
    }
    const double s = sigmas_[size_t(i)], sn = sigmas_[size_t(i) + 1];
    switch (kind_) {
        case SamplerKind::Euler:
            for (size_t k = 0; k < n; ++k) x[k] = float(x[k] + eps[k] * (sn - s));
            break;
        case SamplerKind::EulerAncestral: {
            const double up = std::sqrt(sn * sn * (s * s - sn * sn) / (s * s)), down = std::sqrt(sn * sn - up * up);
            for (size_t k = 0; k < n; ++k) x[k] = float(x[k] + eps[k] * (down - s));
            if (sn > 0) {
                const std::vector<float> z = rng.randn(n);
                for (size_t k = 0; k < n; ++k) x[k] = float(x[k] + z[k] * up);
            }
            break;
        }
        case SamplerKind::DpmPP2M: {
            std::vector<float> den(n);
            for (size_t k = 0; k < n; ++k) den[k] = float(x[k] - s * eps[k]);
            if (sn == 0) {
                x = den;
            } else {
                const double h = std::log(s) - std::log(sn), e = std::expm1(-h);
                double c_den = 1, c_old = 0;
                if (!old_denoised_.empty()) {
                    const double r = (std::log(sigmas_[size_t(i) - 1]) - std::log(s)) / h;
                    c_den = 1 + 1 / (2 * r);
                    c_old = -1 / (2 * r);
                }
                for (size_t k = 0; k < n; ++k) {
                    const double d = c_den * den[k] + (c_old != 0 ? c_old * old_denoised_[k] : 0.0);
                    x[k] = float((sn / s) * x[k] - e * d);
                }
            }
            old_denoised_ = std::move(den);
            break;
        }
        case SamplerKind::Ddim: break;
    }
}

}  // namespace onnx2ggml::sd
