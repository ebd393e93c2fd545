// Signal operators: DFT, STFT, MelWeightMatrix and the windows (Hann, Hamming, Blackman). ggml
// has no FFT: they are computed by their host evaluators (a direct DFT in double), folded when
// constant, else host kernels (lower/host_kernel.h).
#include <cmath>

#include "ops/common.h"

namespace onnx2ggml::core {
namespace {

// One DFT of n complex samples (re, im) -> bins [0, nout), sign -1 forward, +1 inverse (scaled 1/n).
void dft1(const std::vector<double>& re, const std::vector<double>& im, int64_t nout, bool inverse,
          std::vector<double>& ore, std::vector<double>& oim) {
    int64_t n = int64_t(re.size());
    ore.assign(size_t(nout), 0.0);
    oim.assign(size_t(nout), 0.0);
    double sign = inverse ? 1 : -1;
    for (int64_t k = 0; k < nout; ++k) {
        double sr = 0, si = 0;
        for (int64_t t = 0; t < n; ++t) {
            double a = sign * 2 * M_PI * double((k * t) % n) / double(n);
            sr += re[size_t(t)] * std::cos(a) - im[size_t(t)] * std::sin(a);
            si += re[size_t(t)] * std::sin(a) + im[size_t(t)] * std::cos(a);
        }
        ore[size_t(k)] = inverse ? sr / double(n) : sr;
        oim[size_t(k)] = inverse ? si / double(n) : si;
    }
}

int64_t dft_length(OpCtx& c, int axis) {
    int64_t n = c.has(1) ? c.cval(1).geti(0) : c.shape(0)[size_t(axis)];
    if (n <= 0) c.fail("dft_length must be positive, got " + std::to_string(n));
    return n;
}

void register_dft(Registry& r) {
    OpDef d;
    d.op_type = "DFT";
    d.host_inputs = {1};
    auto geom = [](OpCtx& c, int& axis, int64_t& n, int64_t& nout) {
        const Shape& s = c.shape(0);
        if (s.size() < 3 || (s.back() != 1 && s.back() != 2))
            c.fail("input must be [batch, ..., 1 or 2], got " + shape_str(s));
        axis = c.axis(c.ai("axis", 1), int(s.size()) - 1);
        if (axis == 0) c.fail("axis 0 is the batch dim");
        n = dft_length(c, axis);
        nout = c.ai("onesided", 0) != 0 ? n / 2 + 1 : n;
    };
    d.infer = [geom](OpCtx& c) {
        int axis;
        int64_t n, nout;
        geom(c, axis, n, nout);
        Shape o = c.shape(0);
        o[size_t(axis)] = nout;
        o.back() = 2;
        c.set_out(0, c.dtype(0), o);
    };
    d.work = [](OpCtx& c) {
        return double(shape_numel(c.out(0).shape)) * double(dft_length(c, c.axis(c.ai("axis", 1), c.rank(0) - 1)));
    };
    d.eval = [geom](OpCtx& c) {
        int axis;
        int64_t n, nout;
        geom(c, axis, n, nout);
        const Shape& s = c.shape(0);
        const Tensor& x = c.cval(0);
        int64_t len = s[size_t(axis)], comp = s.back(), inner = 1, outer = 1;
        for (size_t i = size_t(axis) + 1; i + 1 < s.size(); ++i) inner *= s[i];
        for (int i = 0; i < axis; ++i) outer *= s[size_t(i)];
        bool inverse = c.ai("inverse", 0) != 0;
        Tensor y = Tensor::zeros(c.dtype(0), c.out(0).shape);
        std::vector<double> re(static_cast<size_t>(n), 0.0), im(static_cast<size_t>(n), 0.0), ore, oim;
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t in = 0; in < inner; ++in) {
                for (int64_t t = 0; t < n; ++t) {  // zero-padded or truncated to dft_length
                    int64_t base = ((o * len + t) * inner + in) * comp;
                    re[size_t(t)] = t < len ? x.getf(base) : 0.0;
                    im[size_t(t)] = t < len && comp == 2 ? x.getf(base + 1) : 0.0;
                }
                dft1(re, im, nout, inverse, ore, oim);
                for (int64_t k = 0; k < nout; ++k) {
                    int64_t ob = ((o * nout + k) * inner + in) * 2;
                    y.setf(ob, ore[size_t(k)]);
                    y.setf(ob + 1, oim[size_t(k)]);
                }
            }
        c.set_const(0, y);
    };
    r.add(d);
}

void register_stft(Registry& r) {
    OpDef d;
    d.op_type = "STFT";
    d.min_inputs = 2;
    d.host_inputs = {1, 3};
    auto geom = [](OpCtx& c, int64_t& step, int64_t& flen, int64_t& frames, int64_t& bins) {
        const Shape& s = c.shape(0);
        if (s.size() != 3 || (s[2] != 1 && s[2] != 2))
            c.fail("signal must be [batch, length, 1 or 2], got " + shape_str(s));
        step = c.cval(1).geti(0);
        flen = c.has(3) ? c.cval(3).geti(0) : (c.has(2) ? shape_numel(c.shape(2)) : 0);
        if (step <= 0 || flen <= 0 || flen > s[1])
            c.fail("frame_step " + std::to_string(step) + " / frame_length " + std::to_string(flen) +
                   " do not fit a signal of " + std::to_string(s[1]));
        if (c.has(2) && shape_numel(c.shape(2)) != flen) c.fail("window length differs from frame_length");
        frames = (s[1] - flen) / step + 1;
        bins = c.ai("onesided", 1) != 0 ? flen / 2 + 1 : flen;
    };
    d.infer = [geom](OpCtx& c) {
        int64_t step, flen, frames, bins;
        geom(c, step, flen, frames, bins);
        c.set_out(0, c.dtype(0), {c.shape(0)[0], frames, bins, 2});
    };
    d.work = [geom](OpCtx& c) {
        int64_t step, flen, frames, bins;
        geom(c, step, flen, frames, bins);
        return double(shape_numel(c.out(0).shape)) * double(flen);
    };
    d.eval = [geom](OpCtx& c) {
        int64_t step, flen, frames, bins;
        geom(c, step, flen, frames, bins);
        const Shape& s = c.shape(0);
        const Tensor& x = c.cval(0);
        Tensor y = Tensor::zeros(c.dtype(0), c.out(0).shape);
        std::vector<double> re(static_cast<size_t>(flen), 0.0), im(static_cast<size_t>(flen), 0.0), ore, oim;
        for (int64_t b = 0; b < s[0]; ++b)
            for (int64_t f = 0; f < frames; ++f) {
                for (int64_t t = 0; t < flen; ++t) {
                    double w = c.has(2) ? c.cval(2).getf(t) : 1.0;
                    int64_t base = (b * s[1] + f * step + t) * s[2];
                    re[size_t(t)] = x.getf(base) * w;
                    im[size_t(t)] = s[2] == 2 ? x.getf(base + 1) * w : 0.0;
                }
                dft1(re, im, bins, false, ore, oim);
                for (int64_t k = 0; k < bins; ++k) {
                    y.setf(((b * frames + f) * bins + k) * 2, ore[size_t(k)]);
                    y.setf(((b * frames + f) * bins + k) * 2 + 1, oim[size_t(k)]);
                }
            }
        c.set_const(0, y);
    };
    r.add(d);
}

void register_mel(Registry& r) {
    OpDef d;
    d.op_type = "MelWeightMatrix";
    d.min_inputs = 5;
    d.host_inputs = {0, 1, 2, 3, 4};
    d.infer = [](OpCtx& c) {
        int64_t mel = c.cval(0).geti(0), dft = c.cval(1).geti(0);
        if (mel <= 0 || dft <= 0 || mel > (1 << 20) || dft > (1 << 24))
            c.fail("num_mel_bins and dft_length must be positive");
        DType t = DType(c.ai("output_datatype", 1));
        if (!dtype_is_float(t)) c.fail_unsupported("output_datatype " + std::string(dtype_name(t)));
        c.set_out(0, t, {dft / 2 + 1, mel});
    };
    // the spec's triangular filters on the mel scale (mel = 2595 log10(1 + f/700)), bin edges
    // rounded down to DFT bins
    d.eval = [](OpCtx& c) {
        int64_t mel = c.cval(0).geti(0), dft = c.cval(1).geti(0);
        double rate = c.cval(2).getf(0), lo = c.cval(3).getf(0), hi = c.cval(4).getf(0);
        if (rate <= 0) c.fail("sample_rate must be positive");
        int64_t nbins = dft / 2 + 1;
        double lo_mel = 2595 * std::log10(1 + lo / 700), hi_mel = 2595 * std::log10(1 + hi / 700);
        double step = (hi_mel - lo_mel) / double(mel + 2);
        std::vector<int64_t> edge(size_t(mel + 2));
        for (int64_t i = 0; i < mel + 2; ++i) {
            double f = 700 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595) - 1);
            edge[size_t(i)] = int64_t(std::floor(double(dft + 1) * f / rate));
        }
        Tensor y = Tensor::zeros(c.out(0).dtype, {nbins, mel});
        auto put = [&](int64_t j, int64_t i, double v) {
            if (j < 0 || j >= nbins)
                c.fail("mel filter edge outside the DFT bins (upper_edge_hertz above the Nyquist rate?)");
            y.setf(j * mel + i, v);
        };
        for (int64_t i = 0; i < mel; ++i) {
            int64_t l = edge[size_t(i)], m = edge[size_t(i + 1)], h = edge[size_t(i + 2)];
            if (m == l) put(m, i, 1);
            else
                for (int64_t j = l; j <= m; ++j) put(j, i, double(j - l) / double(m - l));
            if (h > m)
                for (int64_t j = m; j < h; ++j) put(j, i, double(h - j) / double(h - m));
        }
        c.set_const(0, y);
    };
    r.add(d);
}

}  // namespace

O2G_OP_FAMILY(signal) {
    register_dft(r);
    register_stft(r);
    register_mel(r);
    for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
        OpDef d;
        d.op_type = w;
        d.host_inputs = {0};
        auto dt = [](OpCtx& c) { return DType(c.ai("output_datatype", 1)); };
        d.infer = [dt](OpCtx& c) { c.set_out(0, dt(c), {c.cval(0).geti(0)}); };
        d.eval = [dt](OpCtx& c) {
            int64_t n = c.cval(0).geti(0);
            double den = c.ai("periodic", 1) ? double(n) : double(n - 1);
            std::string op = c.node().op_type;
            Tensor t = Tensor::zeros(dt(c), {n});
            for (int64_t i = 0; i < n; ++i) {
                double x = 2 * M_PI * double(i) / den, v;
                if (op == "HannWindow") v = 0.5 - 0.5 * std::cos(x);
                else if (op == "HammingWindow") v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(x);
                else v = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
                t.setf(i, v);
            }
            c.set_const(0, t);
        };
        r.add(d);
    }
}

}  // namespace onnx2ggml::core
