#!/usr/bin/env python3
"""The lowered ggml graphs of the SD components hold no copy that a hand port would not make.

usage: check_lean.py ONNX2GGML SD_MODELS_DIR
Reads `onnx2ggml inspect --ggml` of each exported component and checks the CONT and CPY node
counts against the copies a hand port (stable-diffusion.cpp) also makes, per block
(docs/stable-diffusion.md gives the reason for each kind):
  attention (mul_mat path): q made contiguous for the matmul, V transposed, heads merged = 3
  VAE mid-block attention: NCHW -> tokens once (shared by q, k, v), V transposed, tokens -> NCHW = 3
  UNet Transformer2D block: NCHW <-> tokens = 2, two attentions = 6 (GEGLU's gate half is read strided)
and checks that the fusions fired (GROUP_NORM, SOFT_MAX with scale, no standalone DIV by 1).
"""
import os
import re
import subprocess
import sys


def histogram(bin_, model):
    out = subprocess.run([bin_, "inspect", model, "--ggml"], capture_output=True, text=True, check=True).stdout
    section = out.split("ggml graph", 1)[1]
    return {k: int(v) for k, v in re.findall(r"^\s+([A-Z_0-9]+)\s+(\d+)$", section, re.M)}


def main():
    bin_, d = sys.argv[1], sys.argv[2]
    # model: (expected CONT, GROUP_NORM count, SOFT_MAX count)
    expect = {
        "vae_decoder": (3, 30, 1),
        "vae_encoder": (3, 22, 1),
        "clip_text": (12 * 3, 0, 12),
        "clip_text_opset14": (12 * 3, 0, 12),
        # 10 Transformer2D blocks (3 down, 1 mid, 6 up); 16 resnets x 2 + 10 + 1 group norms
        "unet_small": (10 * (2 + 6), 39, 20),
        "unet": (16 * (2 + 6), 61, 32),
    }
    ok = True
    for m, (cont, gn, sm) in expect.items():
        if m == "unet" and not os.path.exists(f"{d}/{m}/model.onnx"):
            continue
        h = histogram(bin_, f"{d}/{m}/model.onnx")
        got = (h.get("CONT", 0), h.get("CPY", 0), h.get("GROUP_NORM", 0), h.get("SOFT_MAX", 0))
        good = got[0] <= cont and got[1] == 0 and (gn == 0 or got[2] >= gn) and got[3] == sm
        print(f"{m}: CONT {got[0]} (hand port: {cont}), CPY {got[1]}, GROUP_NORM {got[2]}, SOFT_MAX {got[3]}, "
              f"{sum(h.values())} nodes -> {'ok' if good else 'NOT LEAN'}")
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
