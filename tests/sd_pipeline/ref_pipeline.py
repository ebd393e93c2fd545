#!/usr/bin/env python3
"""The reference text-to-image / image-to-image pipeline in PyTorch, for onnx2ggml-sd's tests.

It runs the SD modules of tests/models/sd_models.py on the weights that scripts/export_sd_folder.py
saved with --save-safetensors (the same weights as the folder's ONNX files), with schedulers written
here from diffusers' formulas (SD 1.5's scheduler config: scaled_linear betas 0.00085..0.012, 1000
training steps, epsilon prediction):

- euler, euler_a: EulerDiscreteScheduler / EulerAncestralDiscreteScheduler, timestep_spacing
  "linspace" (sigmas interpolated at linspace(0, 999, steps), then 0; initial noise scaled by the
  largest sigma; model input x / sqrt(sigma^2 + 1)); --karras: Karras et al.'s sigmas (rho 7) between
  the smallest and largest training sigma, timesteps by log-sigma interpolation.
- dpmpp_2m: DPM-Solver++(2M) on the same sigmas (k-diffusion's sample_dpmpp_2m, which diffusers'
  DPMSolverMultistepScheduler(algorithm_type="dpmsolver++", solver_order=2) computes; first and last
  steps first order).
- ddim: DDIMScheduler with eta 0, timestep_spacing "leading", steps_offset 1, set_alpha_to_one False.

The random numbers are onnx2ggml-sd's: std::mt19937(seed) doubles (numpy's RandomState draws the
same), normal pairs by Box-Muller, in this order: the VAE encoder's sample (img2img), the initial
noise, then euler_a's noise per step.

VAE tiling (--decode): the latents decoded in tiles of T x T latents (a dim of at most T not split),
the tiles of a dim as few as keep neighbours overlapping by >= O latents, their origins spread evenly
(floor(i * (L - T) / (n - 1))); each tile's pixels weighted by the product of a weight per row and one
per column that ramps linearly from the tile's edge over the overlap with each neighbour (no ramp at the
image's border), the sum divided by the summed weights. --tile 0: one untiled decode.

usage: ref_pipeline.py FOLDER OUT.npz --prompt P [--negative-prompt N] --steps S --cfg-scale C --seed K
       --width W --height H --sampler NAME [--karras] [--init-image IMG.npy --strength F]
       ref_pipeline.py FOLDER OUT.npz --decode LATENTS.npy [--tile T --overlap O]
OUT.npz holds "latents" (final, before the VAE) and "image" (uint8, H x W x 3).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
sys.path.insert(0, here)
import export_sd_folder as ex  # noqa: E402
from clip_tokenizer_ref import ClipTokenizerRef  # noqa: E402

SCALING = 0.18215


class Rng:
    """onnx2ggml-sd's normal numbers: MT19937 doubles, Box-Muller pairs."""

    def __init__(self, seed):
        self.r = np.random.RandomState(seed & 0xFFFFFFFF)

    def randn(self, shape):
        n = int(np.prod(shape))
        m = (n + 1) // 2
        u = self.r.random_sample(2 * m).reshape(m, 2)
        rad = np.sqrt(-2.0 * np.log(1.0 - u[:, 0]))
        z = np.stack([rad * np.cos(2 * np.pi * u[:, 1]), rad * np.sin(2 * np.pi * u[:, 1])], axis=1).reshape(-1)
        return torch.from_numpy(z[:n].astype(np.float32).reshape(shape))


def alphas_cumprod():
    betas = np.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=np.float64) ** 2
    return np.cumprod(1.0 - betas)


def sigma_schedule(steps, karras):
    ac = alphas_cumprod()
    train = np.sqrt((1 - ac) / ac)
    log_train = np.log(train)
    ts = np.linspace(0, 999, steps)[::-1].copy()
    sig = np.interp(ts, np.arange(1000), train)
    if karras:
        rho = 7.0
        lo, hi = train[0] ** (1 / rho), train[-1] ** (1 / rho)
        sig = (hi + np.linspace(0, 1, steps) * (lo - hi)) ** rho
        ts = []
        for s in sig:  # timestep of a sigma: linear in log sigma between the two training sigmas around it
            ls = math.log(s)
            low = min(max(int(np.searchsorted(log_train, ls, side="right")) - 1, 0), 998)
            w = min(max((log_train[low] - ls) / (log_train[low] - log_train[low + 1]), 0.0), 1.0)
            ts.append((1 - w) * low + w * (low + 1))
        ts = np.array(ts)
    return ts, np.append(sig, 0.0)


def to_u8(img):
    return ((img[0].permute(1, 2, 0) / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).numpy()


def tiles_1d(length, tile, overlap):
    """The origins of the tiles along one dim, in latents."""
    if tile >= length:
        return [0]
    span, stride = length - tile, tile - overlap
    n = 1 + -(-span // stride)
    return [i * span // (n - 1) for i in range(n)]


def ramp(origins, i, tile, f):
    """Pixel weights of tile i along one dim: linear from 0 at the tile's edge to 1 across each overlap."""
    p = np.arange(tile * f) + 0.5
    w = np.ones(tile * f)
    if i > 0:
        w = np.minimum(w, p / ((origins[i - 1] + tile - origins[i]) * f))
    if i + 1 < len(origins):
        w = np.minimum(w, (tile * f - p) / ((origins[i] + tile - origins[i + 1]) * f))
    return w


def decode_tiled(vae, z, tile, overlap):
    """The VAE decoder on unscaled latents z (1, 4, h, w), in tiles (tile 0: untiled)."""
    h, w = z.shape[2], z.shape[3]
    if tile == 0:
        return vae.decoder(vae.post_quant_conv(z))
    th, tw = min(tile, h), min(tile, w)
    ys, xs = tiles_1d(h, th, overlap), tiles_1d(w, tw, overlap)
    acc, wsum = None, None
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            out = vae.decoder(vae.post_quant_conv(z[:, :, y:y + th, x:x + tw]))
            f = out.shape[2] // th
            if acc is None:
                acc = torch.zeros(1, 3, h * f, w * f, dtype=torch.float64)
                wsum = torch.zeros(h * f, w * f, dtype=torch.float64)
            k = torch.from_numpy(np.outer(ramp(ys, i, th, f), ramp(xs, j, tw, f)))
            acc[:, :, y * f:(y + th) * f, x * f:(x + tw) * f] += k * out.double()
            wsum[y * f:(y + th) * f, x * f:(x + tw) * f] += k
    return (acc / wsum).float()


def run_decode(a):
    with open(os.path.join(a.folder, "model_index.json")) as f:
        idx = json.load(f)
    _, _, vae = ex.build(idx["config"], 16)
    vae.load_state_dict(ex.read_safetensors(os.path.join(a.folder, "weights", "vae", "weights.safetensors")))
    torch.set_num_threads(os.cpu_count() or 2)
    lat = np.load(a.decode).astype(np.float32)
    with torch.no_grad():
        img = decode_tiled(vae, torch.from_numpy(lat) / SCALING, a.tile, a.overlap)
    np.savez(a.out, latents=lat, image=to_u8(img))


def run(a):
    if a.decode:
        return run_decode(a)
    with open(os.path.join(a.folder, "model_index.json")) as f:
        idx = json.load(f)
    tok = ClipTokenizerRef(os.path.join(a.folder, "tokenizer"))
    clip, unet, vae = ex.build(idx["config"], len(tok.vocab))
    for part, m in (("text_encoder", clip), ("unet", unet), ("vae", vae)):
        m.load_state_dict(ex.read_safetensors(os.path.join(a.folder, "weights", part, "weights.safetensors")))
    torch.set_num_threads(os.cpu_count() or 2)
    rng = Rng(a.seed)
    h, w = a.height // 8, a.width // 8
    cfg = a.cfg_scale > 1.0
    with torch.no_grad():
        ctx = []
        for prompt in ([a.negative_prompt] if cfg else []) + [a.prompt]:
            ids, weights = tok.encode_weighted(prompt)
            hs = clip(torch.tensor([ids], dtype=torch.int64))
            if any(wt != 1.0 for wt in weights):  # prompt weights, the mean of the whole kept
                before = hs.double().sum()
                hs = hs * torch.tensor(weights, dtype=torch.float32)[None, :, None]
                hs = hs * float(before / hs.double().sum())
            ctx.append(hs)
        ctx = torch.cat(ctx)

        def eps_of(x, t):
            inp = torch.cat([x, x]) if cfg else x
            e = unet(inp, torch.tensor([float(t)]), ctx)
            return e[0:1] + a.cfg_scale * (e[1:2] - e[0:1]) if cfg else e

        init = None
        if a.init_image:
            from PIL import Image
            px = np.asarray(Image.open(a.init_image).convert("RGB").resize((a.width, a.height), Image.BILINEAR))
            img = torch.from_numpy(px.astype(np.float32) / 255 * 2 - 1).permute(2, 0, 1)[None]
            mom = vae.encode_moments(img)
            mean, logvar = mom[:, :4], mom[:, 4:].clamp(-30.0, 20.0)
            init = (mean + torch.exp(0.5 * logvar) * rng.randn((1, 4, h, w))) * SCALING
        steps = a.steps
        t_start = 0
        if init is not None:
            t_start = max(steps - min(int(steps * a.strength), steps), 0)
        noise = rng.randn((1, 4, h, w))

        if a.sampler == "ddim":
            ac = alphas_cumprod()
            ratio = 1000 // steps
            ts = (np.arange(steps) * ratio)[::-1] + 1
            ts = ts[t_start:]
            if init is None:
                x = noise
            elif len(ts):
                x = math.sqrt(ac[ts[0]]) * init + math.sqrt(1 - ac[ts[0]]) * noise
            else:
                x = init
            for t in ts:
                eps = eps_of(x, t)
                prev = t - ratio
                a_t, a_p = ac[t], ac[prev] if prev >= 0 else ac[0]
                x0 = (x - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)
                x = math.sqrt(a_p) * x0 + math.sqrt(1 - a_p) * eps
        else:
            ts, sig = sigma_schedule(steps, a.karras)
            ts, sig = ts[t_start:], sig[t_start:]
            x = noise * sig[0] if init is None else init + noise * sig[0]
            old = None
            for i, t in enumerate(ts):
                s, sn = sig[i], sig[i + 1]
                eps = eps_of(x / math.sqrt(s * s + 1), t)
                if a.sampler == "euler":
                    x = x + eps * (sn - s)
                elif a.sampler == "euler_a":
                    up = math.sqrt(sn * sn * (s * s - sn * sn) / (s * s))
                    down = math.sqrt(sn * sn - up * up)
                    x = x + eps * (down - s)
                    if sn > 0:
                        x = x + rng.randn((1, 4, h, w)) * up
                elif a.sampler == "dpmpp_2m":
                    den = x - s * eps
                    if sn == 0:
                        x = den
                    else:
                        hh = math.log(s) - math.log(sn)
                        if old is not None:
                            r = (math.log(sig[i - 1]) - math.log(s)) / hh
                            d = (1 + 1 / (2 * r)) * den - (1 / (2 * r)) * old
                        else:
                            d = den
                        x = (sn / s) * x - math.expm1(-hh) * d
                    old = den
        img = vae.decoder(vae.post_quant_conv(x / SCALING))
    np.savez(a.out, latents=x.numpy(), image=to_u8(img))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--prompt")
    ap.add_argument("--decode", help="the VAE decoder alone on these latents (.npy, 1 x 4 x h x w, scaled)")
    ap.add_argument("--tile", type=int, default=0, help="--decode: tile side in latents (0: untiled)")
    ap.add_argument("--overlap", type=int, default=0, help="--decode: minimum overlap in latents")
    ap.add_argument("--negative-prompt", default="")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cfg-scale", type=float, default=7.5)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--height", type=int, default=512)
    ap.add_argument("--sampler", default="euler_a", choices=["euler", "euler_a", "ddim", "dpmpp_2m"])
    ap.add_argument("--karras", action="store_true")
    ap.add_argument("--init-image", help="img2img: a PNG (resized bilinearly to the size if it differs)")
    ap.add_argument("--strength", type=float, default=0.75)
    a = ap.parse_args()
    if a.prompt is None and not a.decode:
        ap.error("--prompt is required")
    run(a)


if __name__ == "__main__":
    main()
