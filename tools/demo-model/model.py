"""A LLaDA-architecture transformer, written the way the official modeling_llada.py computes it.

Non-causal attention, RMSNorm, RoPE in the NeoX half-split form (the GGUF export applies llama.cpp's
q/k permutation so that readers run it with interleaved pairs), SwiGLU, no biases, untied output.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Config:
    vocab: int = 1024
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 4
    mlp: int = 768
    rope_theta: float = 10000.0
    eps: float = 1e-5
    context: int = 256

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight).to(x.dtype)


def rope_tables(cfg: Config, length: int, device=None):
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device).float() / cfg.head_dim))
    angles = torch.outer(torch.arange(length, device=device).float(), inv)
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.attn_norm = RMSNorm(d, cfg.eps)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_norm = RMSNorm(d, cfg.eps)
        self.ff_proj = nn.Linear(d, cfg.mlp, bias=False)  # gate (SiLU applied)
        self.up_proj = nn.Linear(d, cfg.mlp, bias=False)
        self.ff_out = nn.Linear(cfg.mlp, d, bias=False)

    def forward(self, x, cos, sin):
        b, n, d = x.shape
        h, hd = self.cfg.n_heads, self.cfg.head_dim
        a = self.attn_norm(x)
        q = self.q_proj(a).view(b, n, h, hd).transpose(1, 2)
        k = self.k_proj(a).view(b, n, h, hd).transpose(1, 2)
        v = self.v_proj(a).view(b, n, h, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        o = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        x = x + self.attn_out(o.transpose(1, 2).reshape(b, n, d))
        f = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(f)) * self.up_proj(f))


class LLaDA(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = RMSNorm(cfg.d_model, cfg.eps)
        self.ff_out = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                scale = std / math.sqrt(2 * cfg.n_layers) if name.endswith(("attn_out.weight", "ff_out.weight")) else std
                nn.init.normal_(p, std=scale)

    def forward(self, ids):
        cos, sin = rope_tables(self.cfg, ids.shape[1], ids.device)
        x = self.wte(ids)
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.ff_out(self.ln_f(x))
