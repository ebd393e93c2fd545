#!/usr/bin/env python3
"""ctest sd_pipeline: onnx2ggml-sd against the PyTorch reference pipeline (ref_pipeline.py).

usage: test_pipeline.py ONNX2GGML_SD WORKDIR

Makes a small CLIP vocabulary (make_vocab.py), writes a model folder of the tiny config with random
weights (scripts/export_sd_folder.py: every block kind of SD 1.5 at a few channels), then for each
sampler runs txt2img at 256x256 with 4 steps and classifier-free guidance, and img2img, with
onnx2ggml-sd and with the reference, and requires:
  - final latents within 1e-3 of max |reference| (fp32 everywhere; the difference is rounding),
  - the PNG within 1 level of 255 of the reference's pixels on at least 99.9% of them,
  - the PNG's "parameters" text naming the prompt, sampler and seed,
  - the same seed giving the same PNG bytes again, another seed another image,
  - VAE tiling (the `decode` command on latents --save-latents wrote, 384x256 in tiles of 160 pixels
    overlapping by >= 64: 4 x 2 tiles, the columns' origins 0, 9, 18, 28 latents, unevenly spaced):
    the tiled image within 1 level of a PyTorch decode with the same tiles and blend weights
    (ref_pipeline.py --decode) on 99.9% of its pixels (the tile placement and the blending), and
    within the bound TILED_* of the untiled image (tiling is an approximation: see tiling()),
and bad usage failing with exit 2 and a message.
"""
import os
import subprocess
import sys

import numpy as np
from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
PY = sys.executable
LATENT_TOL = 1e-3
PIXEL_SHARE = 0.999
# A tiled VAE decode is not the untiled one: each tile's GroupNorms normalize by the tile's own
# statistics, the mid-block's attention sees only the tile, and the convolutions see zero padding at
# the tile's border where the untiled decoder sees the neighbouring latents. Measured on 8 tiny models
# (export_sd_folder.py's random weights differ between exports) with these 20-latent tiles (a small
# tile, so a large share of the image is near a tile's border): a mean |tiled - untiled| of 1.7 to
# 2.7 levels of 255, 97.1% to 99.7% of pixels within 8 levels, max 14 to 25. The bound keeps a
# margin over that: a mean of at most 4 levels, at least 95% of pixels within 8. It does not pin the
# blend down (a hard seam between tiles could pass it): the comparison with ref_pipeline.py's tiled
# decode, within 1 level, does that; this one bounds the approximation itself, and a misplaced or
# missing tile (content shifted by whole latents) is far outside it.
TILED_MEAN = 4.0
TILED_LEVELS, TILED_SHARE = 8, 0.95

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(" ".join(cmd), "\n", r.stdout, r.stderr)
        sys.exit(f"command failed with exit {r.returncode}")
    return r


def compare(name, sd_bin, folder, work, args, init_png=None):
    out_png = os.path.join(work, name + ".png")
    out_lat = os.path.join(work, name + ".npy")
    ref_npz = os.path.join(work, name + "_ref.npz")
    cmd = [sd_bin, "img2img" if init_png else "txt2img", "--model", folder, "-o", out_png, "--save-latents", out_lat,
           "--quiet"] + args
    if init_png:
        cmd += ["--init-image", init_png]
    sh(cmd)
    ref_args = list(args)
    if init_png:
        ref_args += ["--init-image", init_png]
    sh([PY, os.path.join(here, "ref_pipeline.py"), folder, ref_npz] + ref_args)
    ref = np.load(ref_npz)
    lat = np.load(out_lat)
    err = float(np.abs(lat - ref["latents"]).max() / np.abs(ref["latents"]).max())
    img = np.asarray(Image.open(out_png).convert("RGB")).astype(np.int16)
    d = np.abs(img - ref["image"].astype(np.int16))
    share = float((d <= 1).mean())
    check(lat.shape == ref["latents"].shape and err <= LATENT_TOL,
          f"{name}: latents error {err:.2e} of max|ref| {np.abs(ref['latents']).max():.3g} (tolerance {LATENT_TOL})")
    check(share >= PIXEL_SHARE, f"{name}: {share * 100:.3f}% of pixels within 1 level (max diff {int(d.max())})")
    check(float(ref["image"].std()) > 5, f"{name}: the reference image is not flat (std {ref['image'].std():.1f})")
    return out_png


def tiling(sd_bin, folder, work):
    """VAE tiling: the decode command, tiled and not, against each other and the tiled reference."""
    lat = os.path.join(work, "tiling.npy")
    full = os.path.join(work, "tiling_txt2img.png")
    # auto: no tiling at 384x256 (not more pixels than 512x512), even with tiles smaller than the image
    r = sh([sd_bin, "txt2img", "--model", folder, "-o", full, "--save-latents", lat, "--prompt", "a red cube",
            "--steps", "2", "--cfg-scale", "1", "--width", "384", "--height", "256", "--sampler", "euler",
            "--seed", "11", "--vae-tile-size", "160", "--vae-tile-overlap", "64"])
    check("VAE decode" in r.stderr and "(1 run)" in r.stderr, "--vae-tiling auto does not tile 384x256: " +
          (r.stderr.strip().splitlines() or [""])[-1])
    off = os.path.join(work, "tiling_off.png")
    sh([sd_bin, "decode", "--model", folder, "--latents", lat, "-o", off, "--vae-tiling", "off", "--quiet"])
    on = os.path.join(work, "tiling_on.png")
    r = sh([sd_bin, "decode", "--model", folder, "--latents", lat, "-o", on, "--vae-tiling", "on", "--vae-tile-size",
            "160", "--vae-tile-overlap", "64"])
    ref_npz = os.path.join(work, "tiling_ref.npz")
    sh([PY, os.path.join(here, "ref_pipeline.py"), folder, ref_npz, "--decode", lat, "--tile", "20", "--overlap", "8"])

    def px(path):
        return np.asarray(Image.open(path).convert("RGB")).astype(np.int16)

    check(np.array_equal(px(off), px(full)), "decode --vae-tiling off of the saved latents gives txt2img's image")
    check("(8 tiles)" in r.stderr, f"decode in 8 tiles: {r.stderr.strip()}")
    tiled, untiled = px(on), px(off)
    ref = np.load(ref_npz)["image"].astype(np.int16)
    d = np.abs(tiled - ref)
    share = float((d <= 1).mean())
    check(tiled.shape == ref.shape and share >= PIXEL_SHARE,
          f"tiled decode vs the tiled reference: {share * 100:.3f}% of pixels within 1 level (max diff {int(d.max())})")
    d = np.abs(tiled - untiled)
    mean, share = float(d.mean()), float((d <= TILED_LEVELS).mean())
    check(mean <= TILED_MEAN and share >= TILED_SHARE,
          f"tiled vs untiled decode: mean |diff| {mean:.2f} levels (bound {TILED_MEAN}), {share * 100:.1f}% within "
          f"{TILED_LEVELS} levels (bound {TILED_SHARE * 100:.0f}%), max {int(d.max())}")
    return on


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sd_bin, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    vocab = os.path.join(work, "vocab")
    folder = os.path.join(work, "model")
    sh([PY, os.path.join(here, "make_vocab.py"), vocab])
    sh([PY, os.path.join(root, "scripts", "export_sd_folder.py"), folder, "--config", "tiny", "--tokenizer", vocab,
        "--seed", "3", "--save-safetensors"])

    base = ["--prompt", "a photograph of an astronaut riding a horse, (detailed:1.2)", "--negative-prompt", "blurry",
            "--steps", "4", "--cfg-scale", "7.5", "--width", "256", "--height", "256"]
    pngs = {}
    for sampler, extra in (("euler", []), ("euler_a", []), ("ddim", []), ("dpmpp_2m", []), ("dpmpp_2m", ["--karras"])):
        name = sampler + ("_karras" if extra else "")
        pngs[name] = compare(name, sd_bin, folder, work, base + ["--sampler", sampler, "--seed", "7"] + extra)
    # another size (the UNet and VAE specialized per size), no guidance
    compare("euler_192x128_nocfg", sd_bin, folder, work,
            ["--prompt", "a red cube", "--steps", "3", "--cfg-scale", "1", "--width", "192", "--height", "128",
             "--sampler", "euler", "--seed", "11"])
    # img2img from a txt2img result
    for sampler in ("euler_a", "ddim"):
        compare("img2img_" + sampler, sd_bin, folder, work,
                base + ["--sampler", sampler, "--seed", "5", "--strength", "0.6"], init_png=pngs["euler"])

    tiled_png = tiling(sd_bin, folder, work)

    text = Image.open(pngs["euler_a"]).text.get("parameters", "")
    check("astronaut riding a horse" in text and "Sampler: euler_a" in text and "Seed: 7" in text
          and "Negative prompt: blurry" in text, f"PNG parameters text: {text!r}")

    again = os.path.join(work, "again.png")
    sh([sd_bin, "txt2img", "--model", folder, "-o", again, "--quiet", "--sampler", "euler_a", "--seed", "7"] + base)
    check(open(again, "rb").read() == open(pngs["euler_a"], "rb").read(), "the same seed gives the same PNG bytes")
    other = os.path.join(work, "other.png")
    sh([sd_bin, "txt2img", "--model", folder, "-o", other, "--quiet", "--sampler", "euler_a", "--seed", "8"] + base)
    diff = np.abs(np.asarray(Image.open(other), dtype=np.int16) - np.asarray(Image.open(again), dtype=np.int16)).mean()
    check(diff > 1.0, f"another seed gives another image (mean |diff| {diff:.1f})")

    # --weights-rule reaches the UNet: quantizing its convolution kernels too changes the image (q8_0 alone keeps
    # them f32)
    quant = {}
    for tag, rule in (("q8", []), ("q8_conv", ["--weights-rule", "conv=q8_0"])):
        quant[tag] = os.path.join(work, tag + ".png")
        sh([sd_bin, "txt2img", "--model", folder, "-o", quant[tag], "--quiet", "--sampler", "euler", "--seed", "7",
            "--steps", "2", "--weights", "q8_0"] + rule + base[:4] + ["--width", "128", "--height", "128"])
    check(open(quant["q8"], "rb").read() != open(quant["q8_conv"], "rb").read(),
          "--weights-rule conv=q8_0 changes the q8_0 image")

    bad = [
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--weights-rule", "conv=q9_9"], "unknown type"),
        (["txt2img", "--model", os.path.join(work, "nowhere"), "--prompt", "x", "-o", other], "tokenizer"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--width", "100"], "multiples of 64"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--sampler", "plms"], "unknown sampler"),
        (["img2img", "--model", folder, "--prompt", "x", "-o", other], "--init-image"),
        (["img2img", "--model", folder, "--prompt", "x", "-o", other, "--init-image",
          os.path.join(folder, "model_index.json")], "not a PNG"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--steps", "0"], "--steps"),
        (["frobnicate"], "unknown command"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--vae-tiling", "always"], "auto, on or off"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--vae-tile-size", "100"], "multiple of 8"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--vae-tile-size", "32"], "--vae-tile-size"),
        (["txt2img", "--model", folder, "--prompt", "x", "-o", other, "--vae-tile-overlap", "512"],
         "less than the tile"),
        (["decode", "--model", folder, "-o", other, "--vae-tile-size", "128", "--vae-tile-overlap", "128"],
         "less than the tile"),
        (["decode", "--model", folder, "-o", other], "--latents"),
        (["decode", "--model", folder, "-o", other, "--latents", tiled_png], "not a .npy"),
    ]
    for args, needle in bad:
        r = subprocess.run([sd_bin] + args, capture_output=True, text=True)
        check(r.returncode == 2 and needle in r.stderr, f"{' '.join(args[:1] + args[-2:])}: exit {r.returncode}, "
              f"message has {needle!r}: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else ''}")

    if failures:
        sys.exit(f"{len(failures)} failures")
    print("sd_pipeline: all checks passed")


if __name__ == "__main__":
    main()
