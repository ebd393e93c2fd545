#!/usr/bin/env python3
"""Exports the test models with Debian's PyTorch and writes PyTorch's reference outputs.

Usage: export_models.py OUTDIR [NAME ...]
For each model NAME: OUTDIR/NAME/model.onnx, input.npy (input name in inputs.txt) and
expected.npy (PyTorch's output). Random weights with a fixed seed; biases, norm affine
parameters and BatchNorm running statistics are randomized too, so that the reference
outputs are not degenerate (checked here).
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_export import export as onnx_export  # noqa: E402


class TinyCNN(nn.Module):
    """A small CNN touching the common CNN ops: conv (groups, stride, dilation), BN, pools,
    activations, residual add, concat, upsample, global pool, flatten, gemm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.g = nn.Conv2d(16, 16, 1, groups=4)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.c3 = nn.Conv2d(24, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        a = torch.relu(self.bn1(self.c1(x)))
        a = a + nn.functional.hardswish(self.dw(a))
        b = nn.functional.leaky_relu(self.c2(a), 0.1)
        b = torch.sigmoid(self.g(b)) * b
        b = nn.functional.max_pool2d(b, 3, stride=1, padding=1)
        u = self.up(b)
        c = torch.cat([a, u], dim=1)
        c = nn.functional.avg_pool2d(torch.tanh(self.c3(c)), 2)
        c = nn.functional.adaptive_avg_pool2d(c, 1).flatten(1)
        return torch.softmax(self.fc(c), dim=1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(64, 128)
        self.ln = nn.LayerNorm(128)
        self.l2 = nn.Linear(128, 32)

    def forward(self, x):
        return self.l2(nn.functional.gelu(self.ln(self.l1(x))))


class Elementwise(nn.Module):
    """Ops that run as onnx2ggml's own CPU kernels (ggml has none): comparison, Where, Erf,
    Max, Round, Pow with a tensor exponent, Mod (fmod)."""

    def forward(self, x):
        a = torch.where(x > 0.1, torch.erf(x), torch.maximum(x, -0.5 * x))
        b = torch.round(x * 4.0) + torch.pow(x.abs() + 0.5, x) + torch.fmod(x * 3.0, 0.7)
        return a * b


class LongAttention(nn.Module):
    """Two self-attention layers over 1024 tokens (batch 2, 24 heads of 4): 192 MiB of scores each, which
    onnx2ggml computes in blocks of query rows (the chunk_attention pass); the second layer is causal
    (a constant mask added to the scaled scores)."""

    def __init__(self, dim=96, heads=24, seq=1024):
        super().__init__()
        self.heads = heads
        self.qkv = nn.ModuleList([nn.Linear(dim, 3 * dim) for _ in range(2)])
        self.out = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.register_buffer("causal", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def attend(self, x, i, mask):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in self.qkv[i](x).chunk(3, -1))
        scores = q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5
        if mask is not None:
            scores = scores + mask
        y = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, s, d)
        return x + self.out[i](y)

    def forward(self, x):
        return self.attend(self.attend(x, 0, None), 1, self.causal)


def randomize(m, gen):
    """Non-trivial biases, affine params and running stats (see the module docstring)."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm1d, nn.LayerNorm, nn.GroupNorm)):
                if mod.weight is not None:
                    mod.weight.copy_(torch.rand(mod.weight.shape, generator=gen) * 0.8 + 0.6)
                    mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.2)
                if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm1d)):
                    mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=gen) * 0.2)
                    mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=gen) * 0.8 + 0.6)
            elif isinstance(mod, (nn.Conv2d, nn.Linear)) and mod.bias is not None:
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.1)


MODELS = {
    # name: (constructor, input shape, opset)
    "tinycnn": (TinyCNN, (1, 3, 32, 32), 17),
    "mlp": (MLP, (4, 64), 17),
    "elementwise": (Elementwise, (2, 3, 16, 16), 17),
    "long_attention": (LongAttention, (2, 1024, 96), 17),
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224), 17),
    "resnet18_opset13": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224), 13),
    "resnet50": (lambda: torchvision.models.resnet50(), (1, 3, 224, 224), 17),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 224, 224), 17),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), (1, 3, 224, 224), 17),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), (1, 3, 224, 224), 17),
}


def export(name, outdir):
    ctor, shape, opset = MODELS[name]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    m = ctor().eval()
    randomize(m, gen)
    x = torch.randn(shape, generator=gen)
    with torch.no_grad():
        y = m(x)
    ref = y.numpy()
    # a reference that is constant or vanishingly small proves nothing
    assert np.abs(ref).max() > 1e-3 and ref.std() > 1e-4, f"{name}: degenerate reference output"
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    onnx_export(m, (x,), os.path.join(d, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"], do_constant_folding=True)
    np.save(os.path.join(d, "input.npy"), x.numpy())
    np.save(os.path.join(d, "expected.npy"), ref)
    print(f"exported {name}: opset {opset}, input {tuple(shape)}, output {ref.shape}, max|y| {np.abs(ref).max():.4g}")


def main():
    outdir = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    for n in names:
        export(n, outdir)


if __name__ == "__main__":
    main()
