"""A dense Llama-shaped target with random weights, and the time of one verify step.

One step verifies q tokens for each of B requests against a KV cache of ``context``
tokens, as a vLLM target does when every request carries a draft of q − 1 tokens
(q = 1 is plain decode): embed, then per layer RMSNorm → fused QKV → rotary → write the q
new K/V into the cache → attention of the q queries over context + q keys (causal among
the q) → output projection → RMSNorm → fused gate/up → SiLU·up → down; then the final norm
and the LM head over all B·q positions (verification needs every position's logits).
Grouped-query attention packs each KV head's query heads into one attention row block,
as decode kernels do, so K/V are never expanded.

Weights are random (no download): the time of a step depends on the shapes, not on the
values. ``measure_verify_costs`` captures one CUDA graph per (B, q) cell (vLLM decodes
under CUDA graphs), replays it, and takes the median of the timed replays; on a CPU (the
dry run) it times the same step eagerly with the wall clock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class DenseShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float

    @property
    def params(self) -> int:
        """Weights, embeddings and LM head included (untied)."""
        attention = self.hidden * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attention + mlp + 2 * self.hidden
        return self.layers * per_layer + 2 * self.vocab * self.hidden + self.hidden

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over all layers, at 2 bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


# Llama-3.1-8B's config.json (meta-llama/Llama-3.1-8B): the shapes only.
LLAMA_31_8B = DenseShape("llama-3.1-8b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128,
                         intermediate=14336, vocab=128256, rope_theta=500000.0)
# The dry run's: the same structure at a size a CPU steps through in milliseconds.
TINY = DenseShape("tiny-llama", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16,
                  intermediate=128, vocab=512, rope_theta=10000.0)


@dataclass(frozen=True)
class VerifyCost:
    """One measured cell: the median seconds of one step of B requests × q tokens."""

    batch_size: int
    tokens_per_request: int
    seconds: float
    repeats: int
    spread: float  # (p90 − p10) / median of the timed replays


class DenseTarget:
    """Random bf16 (or fp32) weights and a KV cache for up to ``max_batch`` requests of
    ``context`` + ``max_q`` positions, on ``device``."""

    def __init__(self, shape: DenseShape, *, max_batch: int, context: int, max_q: int, device, dtype, seed: int = 0):
        import torch

        self.shape, self.context, self.device, self.dtype = shape, context, device, dtype
        generator = torch.Generator(device=device).manual_seed(seed)
        std = 0.02

        def weight(*dims):
            return (torch.randn(*dims, device=device, generator=generator, dtype=torch.float32) * std).to(dtype)

        s = shape
        qkv = (s.heads + 2 * s.kv_heads) * s.head_dim
        self.embedding = weight(s.vocab, s.hidden)
        self.layers = [
            {
                "attn_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "qkv": weight(s.hidden, qkv),
                "out": weight(s.heads * s.head_dim, s.hidden),
                "mlp_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "gate_up": weight(s.hidden, 2 * s.intermediate),
                "down": weight(s.intermediate, s.hidden),
            }
            for _ in range(s.layers)
        ]
        self.final_norm = torch.ones(s.hidden, device=device, dtype=dtype)
        self.lm_head = weight(s.hidden, s.vocab)
        positions = context + max_q
        self.k_cache = [torch.zeros(max_batch, s.kv_heads, positions, s.head_dim, device=device, dtype=dtype)
                        for _ in range(s.layers)]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        for k, v in zip(self.k_cache, self.v_cache):  # a filled context, not zeros
            k[:, :, :context].normal_(generator=generator)
            v[:, :, :context].normal_(generator=generator)
        inv_freq = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, device=device, dtype=torch.float32) / s.head_dim))
        angles = torch.arange(positions, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)

    @staticmethod
    def _rms_norm(x, weight, eps: float = 1e-5):
        import torch

        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * weight

    def _rotary(self, x, q: int):
        """Rotate the halves of each head by the angles of positions context..context+q−1."""
        import torch

        cos = self.cos[self.context:self.context + q][None, None]
        sin = self.sin[self.context:self.context + q][None, None]
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def _verify_mask(self, q: int):
        """The q queries see the whole context and the new tokens up to their own; with
        GQA packing, each KV head's ``group`` query heads are rows of one block."""
        import torch

        if q == 1:
            return None
        keys = torch.arange(self.context + q, device=self.device)
        rows = self.context + torch.arange(q, device=self.device)
        allowed = keys[None, :] <= rows[:, None]  # [q, context + q]
        group = self.shape.heads // self.shape.kv_heads
        return allowed.repeat(group, 1)  # [group · q, context + q], head-major as packed below

    def step_fn(self, batch_size: int, q: int) -> tuple[Callable[[], object], object]:
        """(step, tokens): a closure that runs one verify step over the static ``tokens``
        [B, q] and returns the logits [B, q, V]; fit for CUDA-graph capture (fixed shapes,
        cache writes to fixed slots)."""
        import torch
        import torch.nn.functional as F

        s, b, ctx = self.shape, batch_size, self.context
        group = s.heads // s.kv_heads
        tokens = torch.randint(0, s.vocab, (b, q), device=self.device)
        mask = self._verify_mask(q)
        q_width, kv_width = s.heads * s.head_dim, s.kv_heads * s.head_dim

        def attention(layer_index: int, h):
            w = self.layers[layer_index]
            qkv = h @ w["qkv"]
            queries, keys, values = qkv.split([q_width, kv_width, kv_width], dim=-1)
            queries = self._rotary(queries.view(b, q, s.heads, s.head_dim).transpose(1, 2), q)
            keys = self._rotary(keys.view(b, q, s.kv_heads, s.head_dim).transpose(1, 2), q)
            k_cache, v_cache = self.k_cache[layer_index], self.v_cache[layer_index]
            k_cache[:b, :, ctx:ctx + q].copy_(keys)
            v_cache[:b, :, ctx:ctx + q].copy_(values.view(b, q, s.kv_heads, s.head_dim).transpose(1, 2))
            # [B, heads, q, d] → [B, kv_heads, group·q, d]: query heads of one KV head together
            packed = queries.reshape(b, s.kv_heads, group * q, s.head_dim)
            out = F.scaled_dot_product_attention(packed, k_cache[:b, :, :ctx + q], v_cache[:b, :, :ctx + q],
                                                 attn_mask=mask)
            out = out.reshape(b, s.heads, q, s.head_dim).transpose(1, 2).reshape(b, q, q_width)
            return out @ w["out"]

        def mlp(layer_index: int, h):
            w = self.layers[layer_index]
            gate, up = (h @ w["gate_up"]).chunk(2, dim=-1)
            return (F.silu(gate) * up) @ w["down"]

        def step():
            x = self.embedding[tokens]
            for i, w in enumerate(self.layers):
                x = x + attention(i, self._rms_norm(x, w["attn_norm"]))
                x = x + mlp(i, self._rms_norm(x, w["mlp_norm"]))
            return self._rms_norm(x, self.final_norm) @ self.lm_head

        return step, tokens


def _spread(times: Sequence[float]) -> float:
    ordered = sorted(times)
    at = lambda f: ordered[min(len(ordered) - 1, int(round(f * (len(ordered) - 1))))]  # noqa: E731
    median = ordered[len(ordered) // 2]
    return (at(0.9) - at(0.1)) / median if median > 0 else math.nan


def _time_cuda_graph(step, repeats: int, warmup: int) -> list[float]:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph (the caching allocator, cuBLAS handles)
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del graph
    return times


def _time_eager(step, repeats: int, warmup: int) -> list[float]:
    import torch

    with torch.inference_mode():
        for _ in range(warmup):
            step()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    return times


def measure_verify_costs(target: DenseTarget, batch_sizes: Sequence[int], tokens_per_request: Sequence[int], *,
                         cuda_graphs: bool, repeats: int = 30, warmup: int = 5,
                         progress: Callable[[str], None] | None = None) -> list[VerifyCost]:
    """The median step time of every (B, q) cell, B ascending then q ascending."""
    import torch

    cells = []
    for b in sorted(batch_sizes):
        for q in sorted(tokens_per_request):
            step, _ = target.step_fn(b, q)
            with torch.inference_mode():
                logits = step()
                if not bool(torch.isfinite(logits.float()).all()):
                    raise RuntimeError(f"verify step B={b} q={q}: non-finite logits")
                del logits
                times = (_time_cuda_graph if cuda_graphs else _time_eager)(step, repeats, warmup)
            ordered = sorted(times)
            cells.append(VerifyCost(b, q, ordered[len(ordered) // 2], len(times), _spread(times)))
            if progress:
                progress(f"B={b:>3} q={q}: {cells[-1].seconds * 1e3:8.3f} ms (spread {cells[-1].spread:.1%})")
    return cells
