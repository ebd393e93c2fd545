#!/usr/bin/env python3
"""The model zoo (bench/zoo.py, ctest label `zoo`): torchvision 0.14's classification and
segmentation architectures, a BERT-base-like encoder, a GPT-2-small-like decoder, a 1-D conv +
LSTM audio model (all in plain PyTorch) and the Stable Diffusion 1.5 components of export_sd.py.

usage: zoo_models.py OUTDIR NAME [NAME ...]   (or: zoo_models.py --list [--quick|--large] | --tags)
For each NAME: OUTDIR/NAME/model.onnx, in_<input>.npy per input, expected.npy (PyTorch's output)
and meta.json (the layout export_sd.py writes; tests/models/check_model.py and bench/ read it).

Random weights, made informative: the default initialisations leave some outputs degenerate
(ViT's zero head gives exactly 0, ConvNeXt's layer scales are 1e-6, BatchNorm statistics of 0/1
let activations grow or vanish through 100 layers). So norm affine parameters and biases are
randomized, every parameter the initialisation leaves constant (zero heads, class tokens, layer
scales) is drawn anew, and BatchNorm's running statistics are recalibrated: measured in training
mode on random inputs of the model's input distribution, the rest of the model in eval mode.
The reference is then checked not to be degenerate. Fixed seeds, batch 1.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_export import export as onnx_export  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_sd  # noqa: E402


# ---- plain-torch transformers and audio model ----------------------------------------------

class SelfAttention(nn.Module):
    """Multi-head self-attention as matmul -> scale -> (+ mask) -> softmax -> matmul."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        if mask is not None:
            w = w + mask
        o = torch.matmul(torch.softmax(w, dim=-1), v)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))


class BertLayer(nn.Module):
    """Post-LN encoder layer (BERT): x = LN(x + attn(x)); x = LN(x + FFN(x)), erf GELU."""

    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BertLike(nn.Module):
    """BERT-base: vocab 30522, 512 positions, width 768, 12 layers, 12 heads, FFN 3072; returns the
    last hidden state (token type 0, no padding)."""

    def __init__(self, vocab=30522, positions=512, dim=768, layers=12, heads=12, hidden=3072):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(positions, dim)
        self.typ = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(dim, heads, hidden) for _ in range(layers)])

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.ln(self.tok(input_ids) + self.pos.weight[:s] + self.typ.weight[0])
        for layer in self.layers:
            x = layer(x)
        return x


class GPT2Block(nn.Module):
    """Pre-LN decoder block (GPT-2): causal attention and a tanh-GELU MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.proj = nn.Linear(4 * dim, dim)

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2Like(nn.Module):
    """GPT-2 small: vocab 50257, 1024 positions, width 768, 12 layers, 12 heads; returns the logits
    of every position (the output head tied to the token embedding)."""

    def __init__(self, vocab=50257, positions=1024, dim=768, layers=12, heads=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(positions, dim)
        self.blocks = nn.ModuleList([GPT2Block(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.register_buffer("bias", torch.full((positions, positions), -1e4).triu(1))

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe.weight[:s]
        mask = self.bias[:s, :s]
        for b in self.blocks:
            x = b(x, mask)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


class ConvLSTMAudio(nn.Module):
    """A speech-command style model: 80 mel bands x 400 frames -> two 1-D convolutions (BatchNorm,
    ReLU; the first halves the frames) -> a 2-layer bidirectional LSTM (256 per direction) -> per
    frame class logits (40)."""

    def __init__(self, mels=80, ch=256, hidden=256, classes=40):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(mels, ch, 5, stride=2, padding=2), nn.BatchNorm1d(ch), nn.ReLU(),
                                  nn.Conv1d(ch, ch, 3, padding=1), nn.BatchNorm1d(ch), nn.ReLU())
        self.lstm = nn.LSTM(ch, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, mel):
        y, _ = self.lstm(self.conv(mel).transpose(1, 2))
        return self.fc(y)


class SegOut(nn.Module):
    """torchvision's segmentation models return {'out': ...}: the tensor itself."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


# ---- the table -------------------------------------------------------------------------------

def image(size):
    return lambda g: {"input": torch.randn(1, 3, size, size, generator=g)}


def tokens(vocab, seq=128):
    return lambda g: {"input_ids": torch.randint(0, vocab, (1, seq), generator=g)}


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def seg(name):
    return lambda: SegOut(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False))


def small_vit():
    """ViT's op pattern (patch conv, class token, attention, MLP) at a quarter of ViT-B/16's width
    and a third of its depth: the CI subset's transformer."""
    return torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6, hidden_dim=384, mlp_dim=1536)


# name: (constructor, inputs from a generator, tags); tags: "quick" = bench/zoo.py --quick, "large" =
# over 1 GB of weights or tens of seconds a run (--quick skips them). The CI subset (ctest -L zoo) is
# ZOO_NAMES in tests/CMakeLists.txt; vit_small and lraspp_224 are smaller variants made for it.
CLASSIFIERS = (
    ["alexnet"] + [f"resnet{d}" for d in (18, 34, 50, 101, 152)] + ["resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
                                                                   "wide_resnet50_2", "wide_resnet101_2"]
    + [f"vgg{d}{bn}" for d in (11, 13, 16, 19) for bn in ("", "_bn")] + ["squeezenet1_0", "squeezenet1_1"]
    + [f"densenet{d}" for d in (121, 161, 169, 201)] + ["googlenet", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"]
    + [f"mnasnet{w}" for w in ("0_5", "0_75", "1_0", "1_3")] + [f"shufflenet_v2_x{w}" for w in ("0_5", "1_0", "1_5", "2_0")]
    + [f"efficientnet_b{i}" for i in range(4)] + ["efficientnet_v2_s"]
    + [f"regnet_{t}_{s}" for t in "xy" for s in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")] + ["regnet_y_128gf"]
    + [f"convnext_{s}" for s in ("tiny", "small", "base", "large")] + [f"vit_{s}" for s in ("b_16", "b_32", "l_16", "l_32", "h_14")]
    + ["swin_t", "maxvit_t"])
QUICK = {"resnet50", "mobilenet_v3_small", "squeezenet1_1", "efficientnet_b0", "regnet_y_400mf", "densenet121", "convnext_tiny",
         "vit_b_16"}
LARGE = {"regnet_y_128gf", "vit_h_14", "vit_l_16", "regnet_y_32gf", "regnet_x_32gf", "convnext_large"}

MODELS = {}
for _n in CLASSIFIERS:
    _tags = {t for t, s in (("quick", QUICK), ("large", LARGE)) if _n in s}
    MODELS[_n] = (tv(_n, **({"init_weights": True} if _n == "googlenet" else {})), image(299 if _n == "inception_v3" else 224), _tags)
MODELS["inception_v3"] = (tv("inception_v3", init_weights=True, aux_logits=True), image(299), set())
MODELS["vit_small"] = (small_vit, image(224), set())
for _n in ("fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101", "deeplabv3_mobilenet_v3_large",
           "lraspp_mobilenet_v3_large"):
    MODELS[_n] = (seg(_n), image(520), {"quick"} if _n == "lraspp_mobilenet_v3_large" else set())
MODELS["lraspp_224"] = (seg("lraspp_mobilenet_v3_large"), image(224), set())
MODELS["bert_base"] = (BertLike, tokens(30522), {"quick"})
MODELS["gpt2_small"] = (GPT2Like, tokens(50257), set())
MODELS["audio_conv_lstm"] = (ConvLSTMAudio, lambda g: {"mel": torch.randn(1, 80, 400, generator=g)}, {"quick"})
for _n in ("vae_decoder", "vae_decoder_512", "clip_text", "unet"):  # export_sd.py's, exported by it
    MODELS[_n] = (None, None, {"large"} if _n in ("unet", "vae_decoder_512") else set())


def names(tag=None):
    return [n for n, (_, _, tags) in MODELS.items() if tag is None or tag in tags]


# ---- informative random weights ----------------------------------------------------------------

NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm)


def make_informative(m, make_inputs, gen):
    """See the module docstring. `make_inputs(gen)` draws a batch-1 input dict."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, NORMS) and getattr(mod, "weight", None) is not None:
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=gen) * 0.8 + 0.6)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.2)
            elif isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Linear)) and mod.bias is not None:
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.1)
        seen = set()
        for p in m.parameters():
            if p.numel() < 2 or float(p.max() - p.min()) != 0 or id(p) in seen:
                continue
            seen.add(id(p))
            if p.numel() == max(p.shape):  # a vector: a layer scale, a class token
                p.copy_(torch.rand(p.shape, generator=gen) * 0.8 + 0.6 if float(p.flatten()[0]) != 0
                        else torch.randn(p.shape, generator=gen) * 0.2)
            else:  # a matrix left at zero (a classifier head)
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p[0].numel()))
        bns = [b for b in m.modules() if isinstance(b, nn.modules.batchnorm._BatchNorm)]
        if bns:
            for b in bns:
                b.reset_running_stats()
                b.momentum = None  # a cumulative average over the calibration batches
                b.train()
            for _ in range(2):  # batches of 2: statistics of 1x1 maps (ASPP's pooling branch) need 2 values
                xs = [make_inputs(gen) for _ in range(2)]
                m(*[torch.cat([x[k] for x in xs]) for k in xs[0]])
            for b in bns:
                b.eval()


def export(name, outdir):
    ctor, make_inputs, _ = MODELS[name]
    if ctor is None:
        return export_sd.export(name, outdir)
    t0 = time.time()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    m = ctor().eval()
    make_informative(m, make_inputs, gen)
    inputs = make_inputs(gen)
    ins = list(inputs)
    args = tuple(inputs[n] for n in ins)
    with torch.no_grad():
        ref = m(*args).numpy()
    assert np.isfinite(ref).all() and np.abs(ref).max() > 1e-3 and ref.std() > 1e-4 * np.abs(ref).max(), \
        f"{name}: degenerate reference output"
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    # with gradients enabled: torch 1.13 exports nn.MultiheadAttention (ViT, Swin) only so
    onnx_export(m, args, os.path.join(d, "model.onnx"), opset_version=17, input_names=ins, output_names=["output"],
                do_constant_folding=True)
    for n in ins:
        np.save(os.path.join(d, f"in_{n}.npy"), inputs[n].numpy())
    np.save(os.path.join(d, "expected.npy"), ref)
    params = sum(p.numel() for p in m.parameters())
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"inputs": ins, "opset": 17, "parameters": params}, f)
    print(f"exported {name}: {params / 1e6:.1f}M parameters, inputs " + ", ".join(f"{n}{tuple(inputs[n].shape)}" for n in ins)
          + f", output {ref.shape}, max|y| {np.abs(ref).max():.4g}, {time.time() - t0:.0f} s", flush=True)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--tags":  # the table for bench/zoo.py, which must not import torch
        print(json.dumps({n: sorted(tags) for n, (_, _, tags) in MODELS.items()}))
        return
    if len(sys.argv) >= 2 and sys.argv[1] == "--list":
        print(" ".join(names(sys.argv[2][2:] if len(sys.argv) > 2 else None)))
        return
    if len(sys.argv) < 3:
        sys.exit("usage: zoo_models.py OUTDIR NAME [NAME ...] | --list [--quick|--large]; names: " + ", ".join(MODELS))
    torch.set_num_threads(os.cpu_count() or 2)
    for n in sys.argv[2:]:
        if n not in MODELS:
            sys.exit(f"unknown model {n}; names: " + ", ".join(MODELS))
        export(n, sys.argv[1])


if __name__ == "__main__":
    main()
