"""Model and GPU figures for the roofline profile, each with its source.

Sources are honest: "docs/DESIGN.md" for the figures the design doc states, a vendor
datasheet or model config by name (quoted from memory — check before relying on a
digit), or "assumed" where the figure is our assumption. Only the increments of a step
over the anchor are computed from these (docs/DESIGN.md, Cost model), so a figure off by tens
of percent moves the verify cost, not the anchored step time.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    value: float
    source: str


@dataclass(frozen=True)
class ModelFigures:
    name: str
    total_params: Figure
    active_params: Figure
    experts: Figure  # routed experts per MoE layer (0: dense model)
    experts_per_token: Figure
    bytes_per_weight: Figure
    hidden_size: Figure
    kv_bytes_per_token: Figure  # KV cache bytes per context token, all layers
    state_bytes_per_request: Figure  # recurrent (linear-attention) state per request, all layers
    context_tokens: Figure  # typical context length whose KV a decode step reads
    compute_precision: str  # which GPU FLOP/s figure applies

    @property
    def expert_params_all_layers(self) -> float:
        """Params of one routed-expert slot summed over MoE layers: (total − active) / (E − k)."""
        e, k = self.experts.value, self.experts_per_token.value
        if e <= 0:
            return 0.0
        return (self.total_params.value - self.active_params.value) / (e - k)

    @property
    def non_expert_params(self) -> float:
        """Params read on every step whatever the routing: active − k·expert."""
        return self.active_params.value - self.experts_per_token.value * self.expert_params_all_layers


@dataclass(frozen=True)
class GpuFigures:
    name: str
    hbm_bytes_per_s: Figure
    dense_flops: dict[str, Figure]  # precision → dense (non-sparse) FLOP/s

    def flops(self, precision: str) -> Figure:
        """Dense FLOP/s at ``precision``; without FP4 tensor cores, FP4 weights run at FP8."""
        for p in (precision, "fp8", "bf16"):
            if p in self.dense_flops:
                return self.dense_flops[p]
        raise KeyError(precision)


_MXFP4 = Figure(4.25 / 8, "OCP MX spec: 4-bit elements + one 8-bit E8M0 scale per 32 (docs/DESIGN.md, Cost model: MXFP4)")

MODELS: dict[str, ModelFigures] = {
    "kimi-k3": ModelFigures(
        name="kimi-k3",
        total_params=Figure(2.8e12, "docs/DESIGN.md"),
        active_params=Figure(104e9, "docs/DESIGN.md"),
        experts=Figure(896, "docs/DESIGN.md; vLLM 0.33 kimi_k3 specialized_decode checks num_experts 896"),
        experts_per_token=Figure(16, "docs/DESIGN.md; vLLM 0.33 kimi_k3 specialized_decode checks top-16"),
        bytes_per_weight=Figure(_MXFP4.value, "assumed: every weight MXFP4 (" + _MXFP4.source + ")"),
        hidden_size=Figure(7168, "vLLM 0.33 kimi_k3 specialized_decode buffers (64, 7168)"),
        kv_bytes_per_token=Figure(
            576 * 16, "assumed: MLA 512+64 FP8 bytes per token per layer × 16 full-attention layers"
        ),
        state_bytes_per_request=Figure(
            16e6, "assumed: order of magnitude of the KDA recurrent state per request (not published)"
        ),
        context_tokens=Figure(8192, "assumed: the 8K-in/1K-out workload of the seeds"),
        compute_precision="fp4",
    ),
    "llama-3.1-8b": ModelFigures(
        name="llama-3.1-8b",
        total_params=Figure(8.03e9, "Meta Llama-3.1-8B model card"),
        active_params=Figure(8.03e9, "Meta Llama-3.1-8B model card (dense)"),
        experts=Figure(0, "dense model"),
        experts_per_token=Figure(0, "dense model"),
        bytes_per_weight=Figure(2.0, "assumed: BF16 weights"),
        hidden_size=Figure(4096, "Llama-3.1-8B config.json"),
        kv_bytes_per_token=Figure(
            2 * 32 * 8 * 128 * 2, "Llama-3.1-8B config.json: 32 layers × 8 KV heads × 128 × K,V × BF16"
        ),
        state_bytes_per_request=Figure(0, "no recurrent state (full attention only)"),
        context_tokens=Figure(8192, "assumed"),
        compute_precision="bf16",
    ),
}

GPUS: dict[str, GpuFigures] = {
    "GB300": GpuFigures(
        "GB300",
        Figure(8.0e12, "NVIDIA GB300 NVL72 datasheet, per GPU (576 TB/s / 72), quoted from memory"),
        {
            "fp4": Figure(15e15, "NVIDIA GB300 NVL72 datasheet, dense FP4 per GPU, quoted from memory"),
            "fp8": Figure(5e15, "NVIDIA GB300 NVL72 datasheet, dense FP8 per GPU, quoted from memory"),
            "bf16": Figure(2.5e15, "NVIDIA GB300 NVL72 datasheet, dense BF16 per GPU, quoted from memory"),
        },
    ),
    "B300": GpuFigures(
        "B300",
        Figure(7.7e12, "NVIDIA HGX B300 datasheet, per GPU, quoted from memory"),
        {
            "fp4": Figure(13.5e15, "NVIDIA HGX B300 datasheet, dense FP4 per GPU, quoted from memory"),
            "fp8": Figure(4.5e15, "NVIDIA HGX B300 datasheet, dense FP8 per GPU, quoted from memory"),
            "bf16": Figure(2.25e15, "NVIDIA HGX B300 datasheet, dense BF16 per GPU, quoted from memory"),
        },
    ),
    "H200": GpuFigures(
        "H200",
        Figure(4.8e12, "NVIDIA H200 datasheet (SXM), quoted from memory"),
        {
            # No FP4 tensor cores: MXFP4 weights are dequantised and run at FP8.
            "fp8": Figure(1.979e15, "NVIDIA H200 datasheet, dense FP8 (half the sparse figure)"),
            "bf16": Figure(0.989e15, "NVIDIA H200 datasheet, dense BF16 (half the sparse figure)"),
        },
    ),
    "H100": GpuFigures(
        "H100",
        Figure(3.35e12, "NVIDIA H100 datasheet (SXM), quoted from memory"),
        {
            "fp8": Figure(1.979e15, "NVIDIA H100 datasheet (SXM), dense FP8"),
            "bf16": Figure(0.989e15, "NVIDIA H100 datasheet (SXM), dense BF16"),
        },
    ),
}
