"""Stable Diffusion 1.5 components written in plain PyTorch (Debian's torch 1.13; the diffusers and
transformers packages are not available here).

The module trees and parameter names follow diffusers' AutoencoderKL and UNet2DConditionModel and
transformers' CLIPTextModel, so that the state dict of a real SD 1.5 checkpoint loads into these
classes with load_state_dict (strict). The forward passes compute what those classes compute in
eval mode; attention is written as matmul -> scale -> (mask) -> softmax -> matmul, the form the
ONNX exporter of torch 1.13 sees in every SD export.

Sizes are parameters so that the tests can build reduced-depth variants from the same classes.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- shared blocks (diffusers.models.resnet / attention_processor) -----------------------------

class ResnetBlock2D(nn.Module):
    def __init__(self, in_channels, out_channels, temb_channels=None, eps=1e-6, groups=32, output_scale_factor=1.0):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=eps, affine=True)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=1, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels) if temb_channels else None
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps, affine=True)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1)
        self.nonlinearity = nn.SiLU()
        self.output_scale_factor = output_scale_factor
        self.conv_shortcut = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x, temb=None):
        h = self.conv1(self.nonlinearity(self.norm1(x)))
        if self.time_emb_proj is not None:
            h = h + self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
        h = self.conv2(self.dropout(self.nonlinearity(self.norm2(h))))
        if self.conv_shortcut is not None:
            x = self.conv_shortcut(x)
        return (x + h) / self.output_scale_factor


class Downsample2D(nn.Module):
    def __init__(self, channels, padding=1):
        super().__init__()
        self.padding = padding
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=padding)

    def forward(self, x):
        if self.padding == 0:  # the VAE encoder pads right/bottom only
            x = F.pad(x, (0, 1, 0, 1), mode="constant", value=0)
        return self.conv(x)


class Upsample2D(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class Attention(nn.Module):
    """diffusers' Attention with the default processor: optional group norm (VAE), multi-head
    scaled dot-product attention, output projection, optional residual."""

    def __init__(self, query_dim, cross_attention_dim=None, heads=8, dim_head=64, bias=False, norm_num_groups=None,
                 eps=1e-5, residual_connection=False):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.residual_connection = residual_connection
        self.group_norm = nn.GroupNorm(norm_num_groups, query_dim, eps=eps, affine=True) if norm_num_groups else None
        kv_dim = cross_attention_dim or query_dim
        self.to_q = nn.Linear(query_dim, inner, bias=bias)
        self.to_k = nn.Linear(kv_dim, inner, bias=bias)
        self.to_v = nn.Linear(kv_dim, inner, bias=bias)
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim, bias=True), nn.Dropout(0.0)])

    def head_to_batch_dim(self, t):
        b, s, d = t.shape
        return t.reshape(b, s, self.heads, d // self.heads).permute(0, 2, 1, 3).reshape(b * self.heads, s, d // self.heads)

    def batch_to_head_dim(self, t):
        bh, s, d = t.shape
        return t.reshape(bh // self.heads, self.heads, s, d).permute(0, 2, 1, 3).reshape(bh // self.heads, s, d * self.heads)

    def forward(self, x, context=None):
        residual = x
        four_d = x.ndim == 4
        if four_d:
            b, c, h, w = x.shape
            x = x.view(b, c, h * w).transpose(1, 2)
        if self.group_norm is not None:
            x = self.group_norm(x.transpose(1, 2)).transpose(1, 2)
        ctx = x if context is None else context
        q = self.head_to_batch_dim(self.to_q(x))
        k = self.head_to_batch_dim(self.to_k(ctx))
        v = self.head_to_batch_dim(self.to_v(ctx))
        probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        x = self.batch_to_head_dim(torch.bmm(probs, v))
        x = self.to_out[1](self.to_out[0](x))
        if four_d:
            x = x.transpose(-1, -2).reshape(b, c, h, w)
        if self.residual_connection:
            x = x + residual
        return x


# ---- AutoencoderKL (diffusers.models.autoencoders) -------------------------------------------

class UNetMidBlock2D(nn.Module):
    def __init__(self, channels, eps=1e-6, groups=32):
        super().__init__()
        self.attentions = nn.ModuleList([Attention(channels, heads=1, dim_head=channels, bias=True, norm_num_groups=groups,
                                                   eps=eps, residual_connection=True)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, eps=eps, groups=groups) for _ in range(2)])

    def forward(self, x):
        x = self.resnets[0](x)
        return self.resnets[1](self.attentions[0](x))


class DownEncoderBlock2D(nn.Module):
    def __init__(self, cin, cout, layers, add_downsample, groups):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, groups=groups) for i in range(layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout, padding=0)]) if add_downsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
        return x


class UpDecoderBlock2D(nn.Module):
    def __init__(self, cin, cout, layers, add_upsample, groups):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, groups=groups) for i in range(layers)])
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, x):
        for r in self.resnets:
            x = r(x)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


class Encoder(nn.Module):
    def __init__(self, in_channels=3, latent_channels=4, block_out_channels=(128, 256, 512, 512), layers_per_block=2, groups=32):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, block_out_channels[0], 3, padding=1)
        self.down_blocks = nn.ModuleList()
        cout = block_out_channels[0]
        for i, c in enumerate(block_out_channels):
            cin, cout = cout, c
            self.down_blocks.append(DownEncoderBlock2D(cin, cout, layers_per_block, i != len(block_out_channels) - 1, groups))
        self.mid_block = UNetMidBlock2D(block_out_channels[-1], groups=groups)
        self.conv_norm_out = nn.GroupNorm(groups, block_out_channels[-1], eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[-1], 2 * latent_channels, 3, padding=1)

    def forward(self, x):
        x = self.conv_in(x)
        for b in self.down_blocks:
            x = b(x)
        x = self.mid_block(x)
        return self.conv_out(self.conv_act(self.conv_norm_out(x)))


class Decoder(nn.Module):
    def __init__(self, latent_channels=4, out_channels=3, block_out_channels=(128, 256, 512, 512), layers_per_block=2, groups=32):
        super().__init__()
        rev = list(reversed(block_out_channels))
        self.conv_in = nn.Conv2d(latent_channels, rev[0], 3, padding=1)
        self.mid_block = UNetMidBlock2D(rev[0], groups=groups)
        self.up_blocks = nn.ModuleList()
        cout = rev[0]
        for i, c in enumerate(rev):
            cin, cout = cout, c
            self.up_blocks.append(UpDecoderBlock2D(cin, cout, layers_per_block + 1, i != len(rev) - 1, groups))
        self.conv_norm_out = nn.GroupNorm(groups, block_out_channels[0], eps=1e-6)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(block_out_channels[0], out_channels, 3, padding=1)

    def forward(self, z):
        x = self.mid_block(self.conv_in(z))
        for b in self.up_blocks:
            x = b(x)
        return self.conv_out(self.conv_act(self.conv_norm_out(x)))


class AutoencoderKL(nn.Module):
    scaling_factor = 0.18215

    def __init__(self, block_out_channels=(128, 256, 512, 512), latent_channels=4, layers_per_block=2, groups=32):
        super().__init__()
        self.encoder = Encoder(3, latent_channels, block_out_channels, layers_per_block, groups)
        self.decoder = Decoder(latent_channels, 3, block_out_channels, layers_per_block, groups)
        self.quant_conv = nn.Conv2d(2 * latent_channels, 2 * latent_channels, 1)
        self.post_quant_conv = nn.Conv2d(latent_channels, latent_channels, 1)

    def encode_moments(self, image):
        """The latent distribution's parameters (mean, logvar) stacked on channels, as diffusers' encode."""
        return self.quant_conv(self.encoder(image))

    def decode_latents(self, latents):
        """What a pipeline does with the UNet's final latents: unscale, then decode."""
        return self.decoder(self.post_quant_conv(latents / self.scaling_factor))


class VaeDecoder(nn.Module):
    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, latents):
        return self.vae.decode_latents(latents)


class VaeEncoder(nn.Module):
    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, image):
        return self.vae.encode_moments(image)


# ---- CLIP ViT-L/14 text encoder (transformers.models.clip) ------------------------------------

class CLIPAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.num_heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim ** -0.5
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def _shape(self, t, seq, bsz):
        return t.view(bsz, seq, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, x, causal_mask):
        bsz, tgt, dim = x.shape
        q = self._shape(self.q_proj(x) * self.scale, tgt, bsz).view(bsz * self.num_heads, -1, self.head_dim)
        k = self._shape(self.k_proj(x), -1, bsz).view(bsz * self.num_heads, -1, self.head_dim)
        v = self._shape(self.v_proj(x), -1, bsz).view(bsz * self.num_heads, -1, self.head_dim)
        w = torch.bmm(q, k.transpose(1, 2))
        w = w.view(bsz, self.num_heads, tgt, tgt) + causal_mask
        w = torch.softmax(w.view(bsz * self.num_heads, tgt, tgt), dim=-1)
        o = torch.bmm(w, v).view(bsz, self.num_heads, tgt, self.head_dim).transpose(1, 2).reshape(bsz, tgt, dim)
        return self.out_proj(o)


class CLIPMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        x = self.fc1(x)
        return self.fc2(x * torch.sigmoid(1.702 * x))  # quick_gelu


class CLIPEncoderLayer(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.self_attn = CLIPAttention(dim, heads)
        self.layer_norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.mlp = CLIPMLP(dim, hidden)
        self.layer_norm2 = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x, mask):
        x = x + self.self_attn(self.layer_norm1(x), mask)
        return x + self.mlp(self.layer_norm2(x))


class CLIPEncoder(nn.Module):
    def __init__(self, dim, heads, hidden, layers):
        super().__init__()
        self.layers = nn.ModuleList([CLIPEncoderLayer(dim, heads, hidden) for _ in range(layers)])


class CLIPTextEmbeddings(nn.Module):
    def __init__(self, vocab, dim, positions):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Embedding(positions, dim)
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))

    def forward(self, ids):
        return self.token_embedding(ids) + self.position_embedding(self.position_ids[:, : ids.shape[-1]])


class CLIPTextTransformer(nn.Module):
    def __init__(self, vocab, dim, positions, heads, hidden, layers):
        super().__init__()
        self.embeddings = CLIPTextEmbeddings(vocab, dim, positions)
        self.encoder = CLIPEncoder(dim, heads, hidden, layers)
        self.final_layer_norm = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, ids):
        bsz, seq = ids.shape
        x = self.embeddings(ids)
        mask = torch.empty(bsz, seq, seq, dtype=x.dtype)
        mask.fill_(torch.tensor(torch.finfo(x.dtype).min))
        mask = mask.triu_(1).unsqueeze(1)
        for layer in self.encoder.layers:
            x = layer(x, mask)
        return self.final_layer_norm(x)


class CLIPTextModel(nn.Module):
    """ViT-L/14 text tower: vocab 49408, 77 positions, width 768, 12 layers, 12 heads. Returns
    last_hidden_state, the conditioning SD feeds to the UNet's cross-attention."""

    def __init__(self, vocab=49408, dim=768, positions=77, heads=12, hidden=3072, layers=12):
        super().__init__()
        self.text_model = CLIPTextTransformer(vocab, dim, positions, heads, hidden, layers)

    def forward(self, input_ids):
        return self.text_model(input_ids)


# ---- UNet2DConditionModel (diffusers.models.unets) --------------------------------------------

class Timesteps(nn.Module):
    def __init__(self, channels, flip_sin_to_cos=True, downscale_freq_shift=0.0):
        super().__init__()
        self.channels, self.flip, self.shift = channels, flip_sin_to_cos, downscale_freq_shift

    def forward(self, t):
        half = self.channels // 2
        exponent = -math.log(10000) * torch.arange(0, half, dtype=torch.float32) / (half - self.shift)
        emb = t[:, None].float() * torch.exp(exponent)[None, :]
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
        if self.flip:
            emb = torch.cat([emb[:, half:], emb[:, :half]], dim=-1)
        return emb


class TimestepEmbedding(nn.Module):
    def __init__(self, cin, dim):
        super().__init__()
        self.linear_1 = nn.Linear(cin, dim)
        self.act = nn.SiLU()
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, x):
        return self.linear_2(self.act(self.linear_1(x)))


class GEGLU(nn.Module):
    def __init__(self, dim, out):
        super().__init__()
        self.proj = nn.Linear(dim, out * 2)

    def forward(self, x):
        h, gate = self.proj(x).chunk(2, dim=-1)
        return h * F.gelu(gate)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.net = nn.ModuleList([GEGLU(dim, dim * mult), nn.Dropout(0.0), nn.Linear(dim * mult, dim)])

    def forward(self, x):
        for m in self.net:
            x = m(x)
        return x


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim, heads, dim_head, cross_attention_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads=heads, dim_head=dim_head)
        self.norm2 = nn.LayerNorm(dim)
        self.attn2 = Attention(dim, cross_attention_dim=cross_attention_dim, heads=heads, dim_head=dim_head)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(self, x, context):
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context) + x
        return self.ff(self.norm3(x)) + x


class Transformer2DModel(nn.Module):
    def __init__(self, heads, dim_head, channels, cross_attention_dim, groups=32):
        super().__init__()
        inner = heads * dim_head
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6, affine=True)
        self.proj_in = nn.Conv2d(channels, inner, 1)
        self.transformer_blocks = nn.ModuleList([BasicTransformerBlock(inner, heads, dim_head, cross_attention_dim)])
        self.proj_out = nn.Conv2d(inner, channels, 1)

    def forward(self, x, context):
        b, c, h, w = x.shape
        residual = x
        x = self.proj_in(self.norm(x))
        inner = x.shape[1]
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, inner)
        for blk in self.transformer_blocks:
            x = blk(x, context)
        x = x.reshape(b, h, w, inner).permute(0, 3, 1, 2).contiguous()
        return self.proj_out(x) + residual


class CrossAttnDownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, layers, heads, cross, add_downsample, eps, groups):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, temb, eps, groups) for i in range(layers)])
        self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups) for _ in range(layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout, padding=1)]) if add_downsample else None

    def forward(self, x, temb, context):
        out = ()
        for r, a in zip(self.resnets, self.attentions):
            x = a(r(x, temb), context)
            out += (x,)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
            out += (x,)
        return x, out


class DownBlock2D(nn.Module):
    def __init__(self, cin, cout, temb, layers, add_downsample, eps, groups):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(cin if i == 0 else cout, cout, temb, eps, groups) for i in range(layers)])
        self.downsamplers = nn.ModuleList([Downsample2D(cout, padding=1)]) if add_downsample else None

    def forward(self, x, temb, context=None):
        out = ()
        for r in self.resnets:
            x = r(x, temb)
            out += (x,)
        if self.downsamplers is not None:
            x = self.downsamplers[0](x)
            out += (x,)
        return x, out


class UNetMidBlock2DCrossAttn(nn.Module):
    def __init__(self, channels, temb, heads, cross, eps, groups):
        super().__init__()
        self.attentions = nn.ModuleList([Transformer2DModel(heads, channels // heads, channels, cross, groups)])
        self.resnets = nn.ModuleList([ResnetBlock2D(channels, channels, temb, eps, groups) for _ in range(2)])

    def forward(self, x, temb, context):
        x = self.resnets[0](x, temb)
        return self.resnets[1](self.attentions[0](x, context), temb)


class _UpBlock(nn.Module):
    def __init__(self, cin, cout, prev, temb, layers, add_upsample, eps, groups, attn=None):
        super().__init__()
        self.resnets = nn.ModuleList()
        for i in range(layers):
            skip = cin if i == layers - 1 else cout
            self.resnets.append(ResnetBlock2D((prev if i == 0 else cout) + skip, cout, temb, eps, groups))
        if attn is not None:
            heads, cross = attn
            self.attentions = nn.ModuleList([Transformer2DModel(heads, cout // heads, cout, cross, groups) for _ in range(layers)])
        else:
            self.attentions = None
        self.upsamplers = nn.ModuleList([Upsample2D(cout)]) if add_upsample else None

    def forward(self, x, skips, temb, context):
        for i, r in enumerate(self.resnets):
            x = r(torch.cat([x, skips[-1 - i]], dim=1), temb)
            if self.attentions is not None:
                x = self.attentions[i](x, context)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x)
        return x


class UpBlock2D(_UpBlock):
    def __init__(self, cin, cout, prev, temb, layers, add_upsample, eps, groups):
        super().__init__(cin, cout, prev, temb, layers, add_upsample, eps, groups)


class CrossAttnUpBlock2D(_UpBlock):
    def __init__(self, cin, cout, prev, temb, layers, heads, cross, add_upsample, eps, groups):
        super().__init__(cin, cout, prev, temb, layers, add_upsample, eps, groups, attn=(heads, cross))


class UNet2DConditionModel(nn.Module):
    """SD 1.5: block_out_channels 320/640/1280/1280, 2 layers per block, 8 heads, cross-attention to
    77x768, CrossAttnDown x3 + Down, mid with cross-attention, Up + CrossAttnUp x3."""

    def __init__(self, block_out_channels=(320, 640, 1280, 1280), layers_per_block=2, heads=8, cross_attention_dim=768,
                 in_channels=4, out_channels=4, groups=32, eps=1e-5):
        super().__init__()
        boc = list(block_out_channels)
        temb = boc[0] * 4
        self.conv_in = nn.Conv2d(in_channels, boc[0], 3, padding=1)
        self.time_proj = Timesteps(boc[0], True, 0)
        self.time_embedding = TimestepEmbedding(boc[0], temb)
        self.down_blocks = nn.ModuleList()
        cout = boc[0]
        for i, c in enumerate(boc):
            cin, cout = cout, c
            final = i == len(boc) - 1
            if final:
                self.down_blocks.append(DownBlock2D(cin, cout, temb, layers_per_block, not final, eps, groups))
            else:
                self.down_blocks.append(CrossAttnDownBlock2D(cin, cout, temb, layers_per_block, heads, cross_attention_dim,
                                                             not final, eps, groups))
        self.mid_block = UNetMidBlock2DCrossAttn(boc[-1], temb, heads, cross_attention_dim, eps, groups)
        rev = list(reversed(boc))
        self.up_blocks = nn.ModuleList()
        cout = rev[0]
        for i in range(len(rev)):
            prev, cout = cout, rev[i]
            cin = rev[min(i + 1, len(rev) - 1)]
            final = i == len(rev) - 1
            if i == 0:
                self.up_blocks.append(UpBlock2D(cin, cout, prev, temb, layers_per_block + 1, not final, eps, groups))
            else:
                self.up_blocks.append(CrossAttnUpBlock2D(cin, cout, prev, temb, layers_per_block + 1, heads,
                                                         cross_attention_dim, not final, eps, groups))
        self.conv_norm_out = nn.GroupNorm(groups, boc[0], eps=eps)
        self.conv_act = nn.SiLU()
        self.conv_out = nn.Conv2d(boc[0], out_channels, 3, padding=1)

    def forward(self, sample, timestep, encoder_hidden_states):
        emb = self.time_embedding(self.time_proj(timestep.expand(sample.shape[0])))
        x = self.conv_in(sample)
        skips = (x,)
        for b in self.down_blocks:
            x, res = b(x, emb, encoder_hidden_states)
            skips += res
        x = self.mid_block(x, emb, encoder_hidden_states)
        for b in self.up_blocks:
            n = len(b.resnets)
            res, skips = skips[-n:], skips[:-n]
            x = b(x, res, emb, encoder_hidden_states)
        return self.conv_out(self.conv_act(self.conv_norm_out(x)))
