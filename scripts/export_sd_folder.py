#!/usr/bin/env python3
"""Writes a Stable Diffusion 1.5 model folder for onnx2ggml-sd, in the layout of Hugging Face's ONNX
exports of SD 1.5:

    OUT/text_encoder/model.onnx   input_ids int32 [batch, 77] -> last_hidden_state [batch, 77, 768]
    OUT/unet/model.onnx           sample [batch, 4, h, w], timestep float32 [1], encoder_hidden_states
                                  [batch, 77, 768] -> out_sample (+ external data beside it when over 2 GB)
    OUT/vae_decoder/model.onnx    latent_sample [batch, 4, h, w] -> sample [batch, 3, 8h, 8w]
                                  (decoder(post_quant_conv(z)); the pipeline divides by 0.18215 first)
    OUT/vae_encoder/model.onnx    sample [batch, 3, H, W] -> latent_parameters [batch, 8, H/8, W/8]
                                  (quant_conv(encoder(x)): mean and log-variance)
    OUT/tokenizer/                vocab.json, merges.txt (+ special_tokens_map.json)

Batch, height and width are dynamic dims: onnx2ggml specializes the graphs per size at run time.

usage:
    export_sd_folder.py OUT --config sd15|tiny --tokenizer DIR [--diffusers DIR] [--seed N]

--config sd15 is SD 1.5's architecture (860M-parameter UNet, ViT-L/14 text encoder); tiny keeps every
kind of block at a few channels (the tests' pipeline). --diffusers DIR loads a real checkpoint in
diffusers' folder layout (DIR/text_encoder, DIR/unet, DIR/vae with model.safetensors,
diffusion_pytorch_model.safetensors or the .bin files) into the sd15 classes (strict: every name and
shape must match); without it the weights are random with a fixed seed (norms and biases randomized
too, as the component tests do). The modules are tests/models/sd_models.py, whose parameter names
are diffusers' and transformers'.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
import export_sd  # noqa: E402
import sd_models as sd  # noqa: E402

CONFIGS = {
    "sd15": dict(clip=dict(dim=768, heads=12, hidden=3072, layers=12),
                 unet=dict(block_out_channels=(320, 640, 1280, 1280), layers_per_block=2, heads=8),
                 vae=dict(block_out_channels=(128, 256, 512, 512), layers_per_block=2)),
    "tiny": dict(clip=dict(dim=64, heads=4, hidden=256, layers=2),
                 unet=dict(block_out_channels=(32, 64, 64, 64), layers_per_block=1, heads=4),
                 vae=dict(block_out_channels=(32, 64, 64, 64), layers_per_block=1)),
}


class HFVaeDecoder(nn.Module):
    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, latent_sample):
        return self.vae.decoder(self.vae.post_quant_conv(latent_sample))


def build(config, vocab_size):
    """The three modules of a config (random initialization; eval mode). sd15 keeps CLIP's 49408 token
    embeddings whatever the tokenizer (a checkpoint's shape); tiny has one per token of the tokenizer."""
    c = CONFIGS[config]
    clip = sd.CLIPTextModel(vocab=49408 if config == "sd15" else vocab_size, positions=77, **c["clip"])
    unet = sd.UNet2DConditionModel(cross_attention_dim=c["clip"]["dim"], **c["unet"])
    vae = sd.AutoencoderKL(**c["vae"])
    return clip.eval(), unet.eval(), vae.eval()


def randomize(modules, seed):
    """Random weights made informative: norms' affine parameters and biases random too (the rule of the
    component tests, tests/models/export_sd.py)."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    for m in modules:
        export_sd.randomize(m, gen)


# ---- safetensors, read and written here (the package is not in Debian 12) ---------------------

_ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
              "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] not in _ST_DTYPES:
            sys.exit(f"{path}: tensor {name}: dtype {t['dtype']} is not supported")
        b, e = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(blob[b:e]), dtype=_ST_DTYPES[t["dtype"]]).reshape(t["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    names = {v: k for k, v in _ST_DTYPES.items()}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


# ---- diffusers' names -> the original (LDM) single-file layout of SD 1.x -------------------------

def _ldm_resnet(rest):
    for a, b in (("norm1.", "in_layers.0."), ("conv1.", "in_layers.2."), ("time_emb_proj.", "emb_layers.1."),
                 ("norm2.", "out_layers.0."), ("conv2.", "out_layers.3."), ("conv_shortcut.", "skip_connection.")):
        if rest.startswith(a):
            return b + rest[len(a):]
    raise KeyError(rest)


def ldm_unet_name(k):
    """SD 1.x's UNet: 4 down blocks of layers_per_block (2) resnets (+ attention), 3 up resnets per block."""
    p = k.split(".")
    fixed = {"time_embedding.linear_1": "time_embed.0", "time_embedding.linear_2": "time_embed.2",
             "conv_in": "input_blocks.0.0", "conv_norm_out": "out.0", "conv_out": "out.2"}
    for n in (1, 2):
        if ".".join(p[:n]) in fixed:
            return fixed[".".join(p[:n])] + "." + ".".join(p[n:])
    if p[0] == "down_blocks":
        i = int(p[1])
        if p[2] == "downsamplers":  # down_blocks.i.downsamplers.0.conv.*
            return f"input_blocks.{3 * (i + 1)}.0.op." + ".".join(p[5:])
        j = int(p[3])
        rest = ".".join(p[4:])
        return f"input_blocks.{3 * i + j + 1}." + ("0." + _ldm_resnet(rest) if p[2] == "resnets" else "1." + rest)
    if p[0] == "mid_block":  # mid_block.resnets.j.* / mid_block.attentions.0.*
        j = int(p[2])
        rest = ".".join(p[3:])
        return "middle_block.1." + rest if p[1] == "attentions" else f"middle_block.{2 * j}." + _ldm_resnet(rest)
    if p[0] == "up_blocks":
        i = int(p[1])
        if p[2] == "upsamplers":  # up_blocks.i.upsamplers.0.conv.*
            return f"output_blocks.{3 * i + 2}.{1 if i == 0 else 2}.conv." + ".".join(p[5:])
        j = int(p[3])
        rest = ".".join(p[4:])
        return f"output_blocks.{3 * i + j}." + ("0." + _ldm_resnet(rest) if p[2] == "resnets" else "1." + rest)
    raise KeyError(k)


def ldm_vae_name(k, t):
    """AutoencoderKL -> first_stage_model (attention projections as 1x1 convolutions)."""
    p = k.split(".")
    if p[0] in ("quant_conv", "post_quant_conv"):
        return k, t
    side, rest = p[0], p[1:]
    top = {"conv_norm_out": "norm_out"}
    if rest[0] in ("conv_in", "conv_out") or rest[0] in top:
        return side + "." + top.get(rest[0], rest[0]) + "." + ".".join(rest[1:]), t
    resnet = {"conv_shortcut": "nin_shortcut"}
    if rest[0] in ("down_blocks", "up_blocks"):
        i = int(rest[1])
        blk = f"down.{i}" if side == "encoder" else f"up.{3 - i}"
        if rest[2] in ("downsamplers", "upsamplers"):
            return f"{side}.{blk}.{'downsample' if side == 'encoder' else 'upsample'}.conv." + ".".join(rest[5:]), t
        return f"{side}.{blk}.block.{rest[3]}.{resnet.get(rest[4], rest[4])}." + ".".join(rest[5:]), t
    if rest[0] == "mid_block":
        if rest[1] == "resnets":
            return f"{side}.mid.block_{int(rest[2]) + 1}.{resnet.get(rest[3], rest[3])}." + ".".join(rest[4:]), t
        attn = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out": "proj_out"}
        name, tail = attn[rest[3]], rest[4:]
        if rest[3] == "to_out":
            tail = tail[1:]  # to_out.0.weight
        if tail[-1] == "weight" and t.dim() == 2:
            t = t[:, :, None, None]
        return f"{side}.mid.attn_1.{name}." + ".".join(tail), t
    raise KeyError(k)


def ldm_state_dict(clip, unet, vae):
    out = {}
    for k, v in clip.state_dict().items():
        if not k.endswith("position_ids"):
            out["cond_stage_model.transformer." + k] = v
    for k, v in unet.state_dict().items():
        out["model.diffusion_model." + ldm_unet_name(k)] = v
    for k, v in vae.state_dict().items():
        n, v = ldm_vae_name(k, v)
        out["first_stage_model." + n] = v
    return out


def load_component(module, folder, stems):
    for stem in stems:
        for ext in (".safetensors", ".bin"):
            p = os.path.join(folder, stem + ext)
            if os.path.exists(p):
                sdict = read_safetensors(p) if ext == ".safetensors" else torch.load(p, map_location="cpu")
                sdict = {k: v.float() if v.is_floating_point() else v for k, v in sdict.items()}
                # transformers keeps position_ids as a buffer in some versions
                sdict.pop("text_model.embeddings.position_ids", None)
                missing, unexpected = module.load_state_dict(sdict, strict=False)
                missing = [k for k in missing if not k.endswith("position_ids")]
                if missing or unexpected:
                    sys.exit(f"{p}: does not match the SD 1.5 module: missing {missing[:5]}, unexpected {unexpected[:5]}")
                print(f"loaded {p}")
                return
    sys.exit(f"{folder}: none of {', '.join(s + '.safetensors/.bin' for s in stems)}")


def export(module, args, path, input_names, output_names, dynamic_axes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for f in os.listdir(os.path.dirname(path)):
        os.remove(os.path.join(os.path.dirname(path), f))
    with torch.no_grad():
        torch.onnx.export(module, args, path, opset_version=17, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, do_constant_folding=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="sd15")
    ap.add_argument("--tokenizer", required=True, help="folder with vocab.json and merges.txt (CLIP's BPE)")
    ap.add_argument("--diffusers", help="a diffusers SD 1.5 checkpoint folder to take the weights from")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save-safetensors", action="store_true",
                    help="also write each component's state dict as OUT/weights/<part>/weights.safetensors")
    ap.add_argument("--ldm-checkpoint", metavar="FILE",
                    help="also write all weights as one .safetensors in the original SD 1.5 (LDM) layout: "
                         "model.diffusion_model., first_stage_model., cond_stage_model.transformer. (what "
                         "stable-diffusion.cpp and other SD tools load)")
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 2)

    with open(os.path.join(a.tokenizer, "vocab.json"), encoding="utf-8") as f:
        vocab_size = len(json.load(f))
    if a.diffusers and a.config != "sd15":
        sys.exit("--diffusers needs --config sd15")
    torch.manual_seed(a.seed)  # the modules' initialization too: an export is reproducible from its seed
    clip, unet, vae = build(a.config, vocab_size)
    if a.diffusers:
        load_component(clip, os.path.join(a.diffusers, "text_encoder"), ["model", "pytorch_model"])
        load_component(unet, os.path.join(a.diffusers, "unet"), ["diffusion_pytorch_model"])
        load_component(vae, os.path.join(a.diffusers, "vae"), ["diffusion_pytorch_model"])
    else:
        randomize([clip, unet, vae], a.seed)

    dim = CONFIGS[a.config]["clip"]["dim"]
    ids = torch.zeros(1, 77, dtype=torch.int32)
    export(clip, (ids,), os.path.join(a.out, "text_encoder", "model.onnx"), ["input_ids"], ["last_hidden_state"],
           {"input_ids": {0: "batch"}, "last_hidden_state": {0: "batch"}})
    lat = torch.randn(1, 4, 8, 8)
    export(unet, (lat, torch.tensor([999.0]), torch.randn(1, 77, dim)), os.path.join(a.out, "unet", "model.onnx"),
           ["sample", "timestep", "encoder_hidden_states"], ["out_sample"],
           {"sample": {0: "batch", 2: "height", 3: "width"}, "encoder_hidden_states": {0: "batch"},
            "out_sample": {0: "batch", 2: "height", 3: "width"}})
    export(HFVaeDecoder(vae), (lat,), os.path.join(a.out, "vae_decoder", "model.onnx"), ["latent_sample"], ["sample"],
           {"latent_sample": {0: "batch", 2: "height", 3: "width"}, "sample": {0: "batch", 2: "height", 3: "width"}})
    export(sd.VaeEncoder(vae), (torch.rand(1, 3, 64, 64) * 2 - 1,), os.path.join(a.out, "vae_encoder", "model.onnx"),
           ["sample"], ["latent_parameters"],
           {"sample": {0: "batch", 2: "height", 3: "width"}, "latent_parameters": {0: "batch", 2: "height", 3: "width"}})
    tok = os.path.join(a.out, "tokenizer")
    os.makedirs(tok, exist_ok=True)
    for f in ("vocab.json", "merges.txt", "special_tokens_map.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(a.tokenizer, f)):
            shutil.copy(os.path.join(a.tokenizer, f), os.path.join(tok, f))
    if a.save_safetensors:
        for part, m in (("text_encoder", clip), ("unet", unet), ("vae", vae)):
            os.makedirs(os.path.join(a.out, "weights", part), exist_ok=True)
            write_safetensors(os.path.join(a.out, "weights", part, "weights.safetensors"), m.state_dict())
    if a.ldm_checkpoint:
        write_safetensors(a.ldm_checkpoint, ldm_state_dict(clip, unet, vae))
    params = {n: sum(p.numel() for p in m.parameters()) for n, m in (("text_encoder", clip), ("unet", unet), ("vae", vae))}
    with open(os.path.join(a.out, "model_index.json"), "w") as f:
        json.dump({"config": a.config, "seed": a.seed, "weights": a.diffusers or "random", "parameters": params,
                   "scaling_factor": sd.AutoencoderKL.scaling_factor}, f, indent=1)
    print(f"wrote {a.out}: config {a.config}, " + ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in params.items()))


if __name__ == "__main__":
    main()
