# SPDX-License-Identifier: MIT
"""A Mamba-2 language model in plain PyTorch, with exactly the math mambacpp runs for a Hugging
Face Mamba2ForCausalLM folder (src/model/blocks/mamba2_block.cc, src/ops/mamba2_reference.cc):

  h = embed(ids); per layer h = h + mixer(rms_norm(h) * norm.weight); logits = rms_norm(h) W_emb^T
  mixer: [z | xBC | dt] = in_proj(u); xBC = silu(causal depthwise conv(xBC) + bias);
         dt = softplus(dt + dt_bias); A = -exp(A_log); y = SSD(x, dt, A, B, C) + D x;
         y = rms_norm_per_group(y * silu(z)) * norm.weight; out = out_proj(y)

The scan is the chunked matrix form of the Mamba-2 paper ("ssd_minimal"), which trains fast on a
CPU; it equals the recurrence h_t = exp(dt A) h_{t-1} + dt B_t x_t, y_t = C_t h_t.
"""

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def segsum(x):
    """[..., T] -> [..., T, T]: sum of x[j+1..i] at (i, j) for j <= i, -inf above the diagonal."""
    T = x.size(-1)
    x = x[..., None].expand(*x.shape, T)
    x = x.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=-1), 0)
    out = torch.cumsum(x, dim=-2)
    return out.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)), float("-inf"))


def ssd(x, a, b, c, chunk):
    """x [B, L, H, P] (already times dt), a [B, L, H] (dt A), b and c [B, L, N] (one group);
    L a multiple of chunk. Returns y [B, L, H, P] from a zero initial state."""
    B_, L, H, P = x.shape
    n_chunks = L // chunk
    x = x.reshape(B_, n_chunks, chunk, H, P)
    b = b.reshape(B_, n_chunks, chunk, -1)
    c = c.reshape(B_, n_chunks, chunk, -1)
    a = a.reshape(B_, n_chunks, chunk, H).permute(0, 3, 1, 2)  # [B, H, C, l]
    a_cum = torch.cumsum(a, dim=-1)
    decay = torch.exp(segsum(a))  # [B, H, C, l, s]
    cb = torch.einsum("bcln,bcsn->bcls", c, b)
    y_diag = torch.einsum("bhcls,bcshp->bclhp", decay * cb[:, None], x)
    decay_states = torch.exp(a_cum[..., -1:] - a_cum)  # [B, H, C, l]
    states = torch.einsum("bcln,bhcl,bclhp->bchpn", b, decay_states, x)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segsum(F.pad(a_cum[..., -1], (1, 0))))  # [B, H, C+1, C+1]
    states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, :-1]
    y_off = torch.einsum("bcln,bchpn,bhcl->bclhp", c, states, torch.exp(a_cum))
    return (y_diag + y_off).reshape(B_, L, H, P)


class Mixer(nn.Module):
    def __init__(self, d_model, d_state, d_conv, expand, headdim, eps):
        super().__init__()
        self.di, self.n, self.headdim, self.eps = expand * d_model, d_state, headdim, eps
        self.heads = self.di // headdim
        conv_width = self.di + 2 * d_state
        self.in_proj = nn.Linear(d_model, 2 * self.di + 2 * d_state + self.heads, bias=False)
        self.conv1d = nn.Conv1d(conv_width, conv_width, d_conv, groups=conv_width, padding=d_conv - 1)
        # mamba_ssm's initialization: dt log-uniform in [1e-3, 1e-1], A in [1, 16].
        dt = torch.exp(torch.rand(self.heads) * (torch.log(torch.tensor(0.1)) - torch.log(torch.tensor(1e-3)))
                       + torch.log(torch.tensor(1e-3)))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.heads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.heads))
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(self.di))
        self.out_proj = nn.Linear(self.di, d_model, bias=False)

    def forward(self, u, chunk):
        L = u.shape[1]
        z, xbc, dt = torch.split(self.in_proj(u), [self.di, self.di + 2 * self.n, self.heads], dim=-1)
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :L].transpose(1, 2))
        x, b, c = torch.split(xbc, [self.di, self.n, self.n], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # [B, L, H]
        a = -torch.exp(self.A_log)
        x = x.reshape(*x.shape[:2], self.heads, self.headdim)
        pad = (-L) % chunk
        args = [x * dt[..., None], dt * a, b, c]
        if pad:
            args = [F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in args]
        y = ssd(*args, chunk)[:, :L]
        y = (y + x * self.D[:, None]).reshape(*u.shape[:2], self.di)
        y = rms_norm(y * F.silu(z), self.norm.weight, self.eps)  # one group
        return self.out_proj(y)


class Layer(nn.Module):
    def __init__(self, d_model, eps, **mixer):
        super().__init__()
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(d_model))
        self.mixer = Mixer(d_model, eps=eps, **mixer)
        self.eps = eps

    def forward(self, h, chunk):
        return h + self.mixer(rms_norm(h, self.norm.weight, self.eps), chunk)


class Mamba2LM(nn.Module):
    def __init__(self, vocab, d_model, n_layer, d_state, d_conv=4, expand=2, headdim=64, eps=1e-5):
        super().__init__()
        self.hparams = dict(vocab=vocab, d_model=d_model, n_layer=n_layer, d_state=d_state, d_conv=d_conv,
                            expand=expand, headdim=headdim, eps=eps)
        self.backbone = nn.Module()
        self.backbone.embeddings = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.backbone.embeddings.weight, std=0.02)
        self.backbone.layers = nn.ModuleList(
            Layer(d_model, eps, d_state=d_state, d_conv=d_conv, expand=expand, headdim=headdim)
            for _ in range(n_layer))
        self.backbone.norm_f = nn.Module()
        self.backbone.norm_f.weight = nn.Parameter(torch.ones(d_model))
        for layer in self.backbone.layers:  # GPT-2's scaled init of the residual branch
            nn.init.normal_(layer.mixer.out_proj.weight, std=0.02 / (2 * n_layer) ** 0.5)
        self.eps = eps

    def forward(self, ids, chunk=64):
        h = self.backbone.embeddings(ids)
        for layer in self.backbone.layers:
            h = layer(h, chunk)
        h = rms_norm(h, self.backbone.norm_f.weight, self.eps)
        return h @ self.backbone.embeddings.weight.t()  # tied head

    def hf_config(self):
        p = self.hparams
        return {
            "model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "hidden_size": p["d_model"],
            "num_hidden_layers": p["n_layer"], "vocab_size": p["vocab"], "layer_norm_epsilon": p["eps"],
            "tie_word_embeddings": True, "pad_vocab_size_multiple": 8, "residual_in_fp32": True,
            "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0, "hidden_act": "silu",
            "torch_dtype": "bfloat16", "rms_norm": True, "state_size": p["d_state"], "conv_kernel": p["d_conv"],
            "expand": p["expand"], "head_dim": p["headdim"], "n_groups": 1,
            "num_heads": p["expand"] * p["d_model"] // p["headdim"], "use_bias": False, "use_conv_bias": True,
            "chunk_size": 256,
        }
