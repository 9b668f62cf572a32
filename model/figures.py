"""Model and GPU figures for the roofline profile, each with its source.

Sources are honest: "docs/MODEL.md" for the figures docs/MODEL.md states, a vendor
datasheet or model config by name (quoted from memory — check before relying on a
digit), or "assumed" where the figure is our assumption. Only the increments of a step
over the anchor are computed from these (docs/MODEL.md, Cost model), so a figure off by tens
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
    # an untied input embedding table: a decode step reads one row of it a token, not the table,
    # and multiplies nothing by it (tied, the table is the lm_head's and read whole: 0 here);
    # not in active_params, which holds the weights a step reads whole and multiplies by
    input_embedding_params: Figure = Figure(0, "tied or not counted apart")

    @property
    def expert_params_all_layers(self) -> float:
        """Params of one routed-expert slot summed over MoE layers: (total − active − the
        untied input embedding) / (E − k)."""
        e, k = self.experts.value, self.experts_per_token.value
        if e <= 0:
            return 0.0
        return (self.total_params.value - self.active_params.value - self.input_embedding_params.value) / (e - k)

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
        """Dense FLOP/s at ``precision``, else at the next slower precision the GPU has (without
        FP4 tensor cores, FP4 weights run at FP8; without FP8, at BF16) — never a faster one."""
        slower = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16")}.get(precision, (precision, "bf16"))
        for p in slower:
            if p in self.dense_flops:
                return self.dense_flops[p]
        raise KeyError(precision)


_MXFP4 = Figure(4.25 / 8, "OCP MX spec: 4-bit elements + one 8-bit E8M0 scale per 32 (docs/MODEL.md, Cost model: MXFP4)")

MODELS: dict[str, ModelFigures] = {
    "kimi-k3": ModelFigures(
        name="kimi-k3",
        total_params=Figure(2.8e12, "docs/MODEL.md"),
        active_params=Figure(104e9, "docs/MODEL.md"),
        experts=Figure(896, "docs/MODEL.md; vLLM 0.33 kimi_k3 specialized_decode checks num_experts 896"),
        experts_per_token=Figure(16, "docs/MODEL.md; vLLM 0.33 kimi_k3 specialized_decode checks top-16"),
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
        active_params=Figure(8.03e9 - 128256 * 4096, "Meta Llama-3.1-8B model card (dense), less its untied input "
                                                     "embedding table"),
        input_embedding_params=Figure(128256 * 4096, "Llama-3.1-8B config.json: vocab_size 128256 × hidden_size "
                                                     "4096, tie_word_embeddings false (a step reads one row a token)"),
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

def _gpu(name: str, hbm_tb_s: float, tflops: dict[str, float], source: str, note: str = "") -> GpuFigures:
    """A GPU's figures (TB/s, dense TFLOPS per precision) carrying one source, per GPU."""
    where = f"{source}{'; ' + note if note else ''}"
    return GpuFigures(name, Figure(float(round(hbm_tb_s * 1e12)), f"{name} memory bandwidth: {where}"),
                      {p: Figure(float(round(t * 1e12)), f"{name} dense {p.upper()}: {where}") for p, t in tflops.items()})


# Dense (non-sparse) tensor FLOP/s per GPU: NVIDIA's Hopper and Blackwell pages print BF16, FP8
# and (Blackwell) FP4 with 2:4 sparsity, so their dense figure is half (Blackwell Ultra's
# dense FP4 is not: 14 and 15 PF against 18 and 20 sparse); AMD's CDNA3 tables print dense.
# GPUs without FP8 (A100) or FP4 tensor cores (Ampere, Hopper, Ada, CDNA3) run those weights
# at the next precision they have (GpuFigures.flops); their bytes stay the weights' own.
_AIC = "NVIDIA ai-dynamo/aiconfigurator systems/{}.yaml (commit 095f58a, 2026-08-21)"
_GPU_LIST = [
    _gpu("A100-40GB", 1.555, {"bf16": 312}, "NVIDIA A100 datasheet (r4), via glennklockwood.com/garden/processors/A100",
         "datasheet BF16 624 with sparsity, halved; no FP8"),
    _gpu("A100-80GB", 2.039, {"bf16": 312}, "NVIDIA A100 datasheet (r4), via glennklockwood.com/garden/processors/A100; "
         + _AIC.format("a100_sxm"), "SXM; no FP8"),
    _gpu("H100", 3.35, {"bf16": 989.4, "fp8": 1978.9}, "NVIDIA H100 datasheet (SXM), via "
         "glennklockwood.com/garden/processors/h100; " + _AIC.format("h100_sxm"), "sparse figures halved"),
    _gpu("H100-PCIE", 2.0, {"bf16": 756.5, "fp8": 1513}, _AIC.format("h100_pcie"),
         "its comment: 'dense; NVIDIA specs list 1513 TFLOPS with sparsity'"),
    _gpu("H20", 4.0, {"bf16": 148, "fp8": 296}, _AIC.format("h20_sxm") + "; willitrunai.com/gpus/h20-96gb", "96 GB part"),
    _gpu("H200", 4.8, {"bf16": 989.4, "fp8": 1978.9}, "NVIDIA H200 datasheet (SXM), FP8 3,958 with sparsity; "
         + _AIC.format("h200_sxm"), "sparse figures halved"),
    _gpu("B200", 7.7, {"bf16": 2250, "fp8": 4500, "fp4": 9000}, "NVIDIA HGX B200 table (blackwell-datasheet-3384703): "
         "18 PF FP4, 9 PF FP8, 4.5 PF BF16 with sparsity, 180 GB, 7.7 TB/s; " + _AIC.format("b200_sxm"),
         "sparse figures halved"),
    _gpu("GB200", 8.0, {"bf16": 2500, "fp8": 5000, "fp4": 10000}, "NVIDIA GB200 NVL72 per GPU: 20 PF FP4, 10 PF FP8, "
         "5 PF BF16 with sparsity, 186 GB, 8 TB/s; " + _AIC.format("gb200"), "sparse figures halved"),
    _gpu("B300", 7.7, {"bf16": 2250, "fp8": 4500, "fp4": 14000}, "NVIDIA Blackwell Ultra datasheet: FP4 14 PF dense "
         "(18 sparse), via " + _AIC.format("b300_sxm") + " and verda.com/blog/gb300-nvl72-architecture"),
    _gpu("GB300", 8.0, {"bf16": 2500, "fp8": 5000, "fp4": 15000}, "NVIDIA GB300 NVL72 per GPU (576 TB/s / 72; FP4 15 PF "
         "dense), via verda.com/blog/gb300-nvl72-architecture; " + _AIC.format("gb300")),
    _gpu("MI300X", 5.3, {"bf16": 1307.4, "fp8": 2614.9}, "AMD ROCm docs, conceptual/gpu-arch/mi300.md (dense figures)",
         "no FP4; FP8 is CDNA3's FNUZ variant"),
    _gpu("MI325X", 6.0, {"bf16": 1307.4, "fp8": 2614.9}, "awesomeagents.ai/hardware/amd-mi325x; docs.vultr.com ROCm "
         "hardware requirements (256 GB, 6.0 TB/s)", "CDNA3 compute as MI300X; no FP4"),
    _gpu("MI355X", 8.0, {"bf16": 2516, "fp8": 5033, "fp4": 10066}, "288 GB, 8 TB/s: tomshardware.com (MI355X at "
         "1,400 W); FP8 = 8,192 FLOP/clk/CU (ISSCC) × 256 CUs (ROCm gpu-specs) × 2.4 GHz",
         "BF16 = FP8 / 2 and MXFP4 = 2 × FP8 are CDNA4's ratios, not read from an AMD page"),
    _gpu("L40S", 0.864, {"bf16": 362.05, "fp8": 733}, _AIC.format("l40s"), "GDDR6; no FP4"),
    _gpu("RTX-PRO-6000", 1.792, {"bf16": 467.8, "fp8": 935.6, "fp4": 1871.2}, _AIC.format("rtx_pro_6000_server")
         + " (dense, scaled to 2,430 MHz)", "1.792 TB/s is the Workstation Edition's; the Server Edition's "
         "datasheet may say about 1.6"),
]
GPUS: dict[str, GpuFigures] = {g.name: g for g in _GPU_LIST}
# Other names users write for these parts (after upper-casing and '_'/' ' → '-').
GPU_ALIASES = {"H100-SXM": "H100", "H200-SXM": "H200", "RTX-PRO-6000-BLACKWELL": "RTX-PRO-6000",
               "A100-SXM-80GB": "A100-80GB", "A100-SXM-40GB": "A100-40GB"}
# A name that is two parts: refused with both.
GPU_AMBIGUOUS = {"A100": ("A100-40GB", "A100-80GB")}


def gpu_key(name: str) -> str:
    """The GPUS key a user's name means (upper case, '_' and ' ' as '-', aliases), or the
    normalised name when it is none of them."""
    key = name.strip().upper().replace("_", "-").replace(" ", "-")
    return GPU_ALIASES.get(key, key)


PRECISIONS = ("bf16", "fp8", "fp4")


def gpu_figures(name: str, hbm_bytes_per_s: float | None = None,
                dense_flops: float | tuple[tuple[str, float], ...] | None = None) -> GpuFigures:
    """The GPU's figures: a known one (GPUS, by ``gpu_key``), with ``hbm_bytes_per_s`` and
    ``dense_flops`` ([deployment] gpu_hbm_bytes_per_s, gpu_dense_flops) over its own where
    given; any other name needs both. ``dense_flops``: one figure for every precision, or
    (precision, FLOP/s) pairs. Raises ValueError (one line) for a name it cannot price."""
    known = GPUS.get(gpu_key(name))
    if known is None and (hbm_bytes_per_s is None or dense_flops is None):
        key = gpu_key(name)
        if key in GPU_AMBIGUOUS:
            raise ValueError(f"{name} is {' or '.join(GPU_AMBIGUOUS[key])}: say which")
        missing = [k for k, v in (("gpu_hbm_bytes_per_s", hbm_bytes_per_s), ("gpu_dense_flops", dense_flops))
                   if v is None]
        raise ValueError(f"no roofline figures for this GPU (known: {', '.join(GPUS)}); or give its figures: "
                         f"gpu_hbm_bytes_per_s and gpu_dense_flops (FLOP/s, or a table by bf16/fp8/fp4) — "
                         f"{' and '.join(missing)} not set")
    label = name if known is None else known.name
    hbm = known.hbm_bytes_per_s if known is not None else None
    if hbm_bytes_per_s is not None:
        hbm = Figure(float(hbm_bytes_per_s), "[deployment] gpu_hbm_bytes_per_s")
    flops = dict(known.dense_flops) if known is not None else {}
    if dense_flops is not None:
        pairs = dense_flops if isinstance(dense_flops, tuple) else tuple((p, dense_flops) for p in PRECISIONS)
        flops = {**flops, **{p: Figure(float(v), "[deployment] gpu_dense_flops") for p, v in pairs}}
    assert hbm is not None  # a GPU it does not know came with both figures (refused above otherwise)
    return GpuFigures(label, hbm, flops)
