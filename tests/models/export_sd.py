#!/usr/bin/env python3
"""Exports the Stable Diffusion 1.5 components (tests/models/sd_models.py) to ONNX with Debian's
PyTorch and writes PyTorch's reference outputs.

usage: export_sd.py OUTDIR NAME [NAME ...]
For each NAME: OUTDIR/NAME/model.onnx (with external data files beside it when over 2 GB),
in_<input>.npy per input, expected.npy (PyTorch's output) and meta.json (input names in order,
opset, parameter count). Random weights with a fixed seed; GroupNorm/LayerNorm affine parameters
and biases are randomized as well, and the reference is checked not to be degenerate.
"""
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sd_models as sd  # noqa: E402
from onnx_export import export as onnx_export  # noqa: E402


def vae(**kw):
    return sd.AutoencoderKL(**kw)


def latent(h, w):
    return lambda g: {"latent": torch.randn(1, 4, h, w, generator=g)}


def image(h, w):
    return lambda g: {"image": torch.rand(1, 3, h, w, generator=g) * 2 - 1}


def tokens(g):
    ids = torch.randint(0, 49406, (1, 77), generator=g)
    ids[0, 0], ids[0, 20] = 49406, 49407  # BOS ... EOS, then padding tokens
    ids[0, 21:] = 49407
    return {"input_ids": ids}


def unet_inputs(h, w, ctx_dim=768):
    return lambda g: {"sample": torch.randn(1, 4, h, w, generator=g), "timestep": torch.tensor([981.0]),
                      "encoder_hidden_states": torch.randn(1, 77, ctx_dim, generator=g)}


SMALL_UNET = dict(block_out_channels=(64, 128, 256, 256), layers_per_block=1, heads=8)
# name: (module constructor, inputs from a generator, opset)
MODELS = {
    "vae_decoder": (lambda: sd.VaeDecoder(vae()), latent(32, 32), 17),
    "vae_decoder_512": (lambda: sd.VaeDecoder(vae()), latent(64, 64), 17),
    "vae_encoder": (lambda: sd.VaeEncoder(vae()), image(256, 256), 17),
    "clip_text": (lambda: sd.CLIPTextModel(), tokens, 17),
    "clip_text_opset14": (lambda: sd.CLIPTextModel(), tokens, 14),
    "unet_small": (lambda: sd.UNet2DConditionModel(**SMALL_UNET), unet_inputs(32, 32), 17),
    "unet": (lambda: sd.UNet2DConditionModel(), unet_inputs(32, 32), 17),
}


def randomize(m, gen):
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.GroupNorm, nn.LayerNorm)) and mod.weight is not None:
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=gen) * 0.8 + 0.6)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.2)
            elif isinstance(mod, (nn.Conv2d, nn.Linear)) and mod.bias is not None:
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.1)


def export(name, outdir):
    ctor, make_inputs, opset = MODELS[name]
    t0 = time.time()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    m = ctor().eval()
    randomize(m, gen)
    inputs = make_inputs(gen)
    names = list(inputs)
    args = tuple(inputs[n] for n in names)
    with torch.no_grad():
        ref = m(*args).numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 1e-3 and ref.std() > 1e-4, f"{name}: degenerate reference output"
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with torch.no_grad():
        onnx_export(m, args, os.path.join(d, "model.onnx"), opset_version=opset, input_names=names,
                    output_names=["output"], do_constant_folding=True)
    for n in names:
        np.save(os.path.join(d, f"in_{n}.npy"), inputs[n].numpy())
    np.save(os.path.join(d, "expected.npy"), ref)
    params = sum(p.numel() for p in m.parameters())
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"inputs": names, "opset": opset, "parameters": params}, f)
    print(f"exported {name}: opset {opset}, {params / 1e6:.1f}M parameters, inputs "
          + ", ".join(f"{n}{tuple(inputs[n].shape)}" for n in names)
          + f", output {ref.shape}, max|y| {np.abs(ref).max():.4g}, {time.time() - t0:.0f} s")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: export_sd.py OUTDIR NAME [NAME ...]; names: " + ", ".join(MODELS))
    torch.set_num_threads(os.cpu_count() or 2)
    for n in sys.argv[2:]:
        export(n, sys.argv[1])


if __name__ == "__main__":
    main()
