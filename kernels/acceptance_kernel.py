"""CuTe DSL kernel: per-row expected acceptance and greedy agreement of two logit rows.

For row n of target logits t and draft logits d (length V) at temperature T:
    p = softmax(t / T),  q = softmax(d / T)
    expected[n] = Σ_v min(p_v, q_v) = 1 − TV(p, q)
    target_argmax[n], draft_argmax[n]: argmax with ties to the lowest index (torch.argmax)

Design (one CTA of ``THREADS`` threads per row, no cluster):
  pass 1 — each thread walks chunks of ``vec`` contiguous logits (16-byte loads when the
           row length allows), keeping an online softmax state (running max m, Σ exp((x−m)/T))
           for both rows and both argmaxes; the states are merged across the warp with
           ``shfl.sync.bfly`` and across warps through shared memory;
  pass 2 — the same walk again, accumulating min(exp((t−mt)/T)/St, exp((d−md)/T)/Sd),
           reduced the same way.
The row max is taken NaN-propagating, so ``status`` needs no per-element test: a row whose
max is NaN or +inf holds a NaN/+inf logit, a row whose max is −inf is all −inf (no
probability anywhere); ``kernels.acceptance`` turns those into one-line errors.

The max is taken on the raw logits (dividing by T > 0 keeps the order) and only the
differences x − m are scaled, so finite logits never overflow.

Compiling needs only ``nvidia-cutlass-dsl`` (no GPU, no CUDA toolkit): see
``compile_kernel_ptx``. Launching needs a CUDA GPU; ``kernels.acceptance`` does that.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.cute.runtime import make_fake_compact_tensor

from acceptance.errors import InputError

THREADS = 256  # 8 warps per row: enough loads in flight per SM for V ~ 1e5 rows
WARPS = THREADS // 32
LOG2E = 1.4426950408889634  # exp(x) = exp2(x · log2 e): ex2.approx is one instruction

# status bits per row (kernel output, decoded in kernels.acceptance)
STATUS_TARGET_NONFINITE = 1  # a NaN or +inf target logit
STATUS_DRAFT_NONFINITE = 2
STATUS_TARGET_ALL_MASKED = 4  # every target logit is −inf
STATUS_DRAFT_ALL_MASKED = 8

DTYPES = {"bf16": cutlass.BFloat16, "fp32": Float32, "fp16": cutlass.Float16}
BYTES_PER_LOAD = 16  # one 128-bit global load per chunk


def vector_width(dtype: str) -> int:
    """Logits per 16-byte chunk: 8 for bf16/fp16, 4 for fp32."""
    return BYTES_PER_LOAD * 8 // DTYPES[dtype].width


# ---------------------------------------------------------------------------------------
# device helpers


@cute.jit
def _merge_softmax_state(m1: Float32, s1: Float32, m2: Float32, s2: Float32, scale: Float32):
    """(m, s) with m = max(m1, m2), s = s1·e^{(m1−m)/T} + s2·e^{(m2−m)/T}; NaN propagates."""
    m = cute.arch.fmax(m1, m2, nan=True)
    s = Float32(0.0)
    # an empty side (m = −inf, s = 0) contributes nothing; guarding avoids 0 · e^{NaN}
    if m1 > -math.inf:
        s = s + s1 * cute.math.exp2((m1 - m) * scale, fastmath=True)
    if m2 > -math.inf:
        s = s + s2 * cute.math.exp2((m2 - m) * scale, fastmath=True)
    if m != m:
        s = m
    return m, s


@cute.jit
def _merge_argmax(v1: Float32, i1: Int32, v2: Float32, i2: Int32):
    """Larger value wins; on a tie the lower index (torch.argmax's rule)."""
    v = v1
    i = i1
    if v2 > v1:
        v = v2
        i = i2
    elif v2 == v1:
        if i2 < i1:
            i = i2
    return v, i


@cute.jit
def _warp_merge_row_state(m: Float32, s: Float32, bv: Float32, bi: Int32, scale: Float32):
    """Butterfly merge of one row's (softmax, argmax) state across the 32 lanes of a warp."""
    for step in cutlass.range_constexpr(5):
        offset = 16 >> step
        m_other = cute.arch.shuffle_sync_bfly(m, offset=offset)
        s_other = cute.arch.shuffle_sync_bfly(s, offset=offset)
        bv_other = cute.arch.shuffle_sync_bfly(bv, offset=offset)
        bi_other = cute.arch.shuffle_sync_bfly(bi, offset=offset)
        m, s = _merge_softmax_state(m, s, m_other, s_other, scale)
        bv, bi = _merge_argmax(bv, bi, bv_other, bi_other)
    return m, s, bv, bi


@cute.jit
def _block_merge_row_state(
    m: Float32, s: Float32, bv: Float32, bi: Int32, scale: Float32,
    smem_f: cute.Tensor, smem_i: cute.Tensor, slot: cutlass.Constexpr[int],
):
    """Merge across the CTA: warp butterflies, then lane 0 of each warp posts to shared
    memory, and every warp re-merges the WARPS posted states (so all threads end with the
    row's state, no broadcast round needed)."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    m, s, bv, bi = _warp_merge_row_state(m, s, bv, bi, scale)
    if lane == 0:
        smem_f[slot * 3 + 0, warp] = m
        smem_f[slot * 3 + 1, warp] = s
        smem_f[slot * 3 + 2, warp] = bv
        smem_i[slot, warp] = bi
    cute.arch.barrier()
    m = Float32(-math.inf)
    s = Float32(0.0)
    bv = Float32(-math.inf)
    bi = Int32(2**31 - 1)
    if lane < WARPS:
        m = smem_f[slot * 3 + 0, lane]
        s = smem_f[slot * 3 + 1, lane]
        bv = smem_f[slot * 3 + 2, lane]
        bi = smem_i[slot, lane]
    m, s, bv, bi = _warp_merge_row_state(m, s, bv, bi, scale)
    return m, s, bv, bi


@cute.jit
def _block_sum(x: Float32, smem_sum: cute.Tensor):
    """Σ over the CTA: warp butterfly sum, per-warp partials through shared memory."""
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    x = cute.arch.warp_reduction_sum(x)
    if lane == 0:
        smem_sum[warp] = x
    cute.arch.barrier()
    total = Float32(0.0)
    if lane < WARPS:
        total = smem_sum[lane]
    return cute.arch.warp_reduction_sum(total)


@cute.jit
def _online_chunk(
    x: cute.TensorSSA, base: Int32, vec: cutlass.Constexpr[int],
    m: Float32, s: Float32, bv: Float32, bi: Int32, scale: Float32,
):
    """Fold one chunk of ``vec`` logits (indices base..base+vec−1) into a thread's state."""
    chunk_max = x[0]
    for i in cutlass.range_constexpr(1, vec):
        chunk_max = cute.arch.fmax(chunk_max, x[i], nan=True)
    # strict > walking upwards keeps the lowest index among equal maxima
    for i in cutlass.range_constexpr(vec):
        if x[i] > bv:
            bv = x[i]
            bi = base + i
    m_new = cute.arch.fmax(m, chunk_max, nan=True)
    if m_new > -math.inf:
        s = s * cute.math.exp2((m - m_new) * scale, fastmath=True)
        for i in cutlass.range_constexpr(vec):
            s = s + cute.math.exp2((x[i] - m_new) * scale, fastmath=True)
    else:
        # all −inf so far (s stays 0) or NaN: keep NaN visible
        if m_new != m_new:
            s = m_new
    return m_new, s, bv, bi


# ---------------------------------------------------------------------------------------
# kernel


@cute.kernel
def acceptance_rows_kernel(
    target: cute.Tensor,  # (N, V) logits
    draft: cute.Tensor,  # (N, V) logits
    expected: cute.Tensor,  # (N,) f32 out: Σ_v min(p_v, q_v)
    target_argmax: cute.Tensor,  # (N,) i32 out
    draft_argmax: cute.Tensor,  # (N,) i32 out
    status: cute.Tensor,  # (N,) i32 out: STATUS_* bits
    inv_temperature: Float32,
    vec: cutlass.Constexpr[int],
):
    tid, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    scale = inv_temperature * LOG2E

    # (vec, V / vec) view of each row: chunk c is column c, one vector load
    target_chunks = cute.zipped_divide(target[row, None], (vec,))
    draft_chunks = cute.zipped_divide(draft[row, None], (vec,))
    n_chunks = cute.size(target_chunks, mode=[1])

    smem_layout = cute.make_layout((6, WARPS), stride=(WARPS, 1))
    smem_f = cute.make_tensor(cute.arch.alloc_smem(Float32, 6 * WARPS), smem_layout)
    smem_i = cute.make_tensor(
        cute.arch.alloc_smem(Int32, 2 * WARPS), cute.make_layout((2, WARPS), stride=(WARPS, 1))
    )
    smem_sum = cute.make_tensor(cute.arch.alloc_smem(Float32, WARPS), cute.make_layout(WARPS))

    # ---- pass 1: online softmax state and argmax of both rows
    mt = Float32(-math.inf)
    st = Float32(0.0)
    tv = Float32(-math.inf)
    ti = Int32(2**31 - 1)
    md = Float32(-math.inf)
    sd = Float32(0.0)
    dv = Float32(-math.inf)
    di = Int32(2**31 - 1)
    for c in cutlass.range(tid, n_chunks, THREADS):
        base = Int32(c * vec)
        t = target_chunks[None, c].load().to(Float32)
        d = draft_chunks[None, c].load().to(Float32)
        mt, st, tv, ti = _online_chunk(t, base, vec, mt, st, tv, ti, scale)
        md, sd, dv, di = _online_chunk(d, base, vec, md, sd, dv, di, scale)

    mt, st, tv, ti = _block_merge_row_state(mt, st, tv, ti, scale, smem_f, smem_i, 0)
    md, sd, dv, di = _block_merge_row_state(md, sd, dv, di, scale, smem_f, smem_i, 1)

    # ---- pass 2: Σ min(p, q) with p = e^{(t−mt)/T} / St, q = e^{(d−md)/T} / Sd
    inv_st = Float32(1.0) / st
    inv_sd = Float32(1.0) / sd
    overlap = Float32(0.0)
    for c in cutlass.range(tid, n_chunks, THREADS):
        t = target_chunks[None, c].load().to(Float32)
        d = draft_chunks[None, c].load().to(Float32)
        for i in cutlass.range_constexpr(vec):
            p = cute.math.exp2((t[i] - mt) * scale, fastmath=True) * inv_st
            q = cute.math.exp2((d[i] - md) * scale, fastmath=True) * inv_sd
            overlap = overlap + cute.arch.fmin(p, q)
    overlap = _block_sum(overlap, smem_sum)

    if tid == 0:
        flags = Int32(0)
        if not (mt < math.inf):  # NaN or +inf
            flags = flags | STATUS_TARGET_NONFINITE
        if not (md < math.inf):
            flags = flags | STATUS_DRAFT_NONFINITE
        if mt == -math.inf:
            flags = flags | STATUS_TARGET_ALL_MASKED
        if md == -math.inf:
            flags = flags | STATUS_DRAFT_ALL_MASKED
        expected[row] = overlap
        target_argmax[row] = ti
        draft_argmax[row] = di
        status[row] = flags


@cute.jit
def launch_acceptance_rows(
    target: cute.Tensor,
    draft: cute.Tensor,
    expected: cute.Tensor,
    target_argmax: cute.Tensor,
    draft_argmax: cute.Tensor,
    status: cute.Tensor,
    inv_temperature: Float32,
    vec: cutlass.Constexpr[int],
):
    """Host side: one CTA of THREADS threads per row."""
    acceptance_rows_kernel(
        target, draft, expected, target_argmax, draft_argmax, status, inv_temperature, vec
    ).launch(grid=[target.shape[0], 1, 1], block=[THREADS, 1, 1])


# ---------------------------------------------------------------------------------------
# compiling


@dataclass(frozen=True)
class CompiledKernel:
    """PTX text and cubin (ELF) of ``acceptance_rows_kernel`` for one architecture/dtype."""

    arch: str
    dtype: str
    vec: int
    ptx: str
    cubin: bytes
    compiled: object = None  # the cute.compile result (callable on a GPU)


def fake_arguments(dtype: str, vec: int):
    """Fake tensors of symbolic size N × V (V a multiple of ``vec``; rows 16-byte aligned
    when vec > 1) matching ``launch_acceptance_rows``'s signature."""
    if dtype not in DTYPES:
        raise InputError(f"unknown logits dtype {dtype!r}: expected one of {sorted(DTYPES)}")
    n = cute.sym_int64(symbol="N")
    v = cute.sym_int64(divisibility=vec, symbol="V")
    align = BYTES_PER_LOAD if vec > 1 else DTYPES[dtype].width // 8
    logits = [
        make_fake_compact_tensor(DTYPES[dtype], (n, v), stride_order=(1, 0), assumed_align=align)
        for _ in range(2)
    ]
    outputs = [
        make_fake_compact_tensor(Float32, (n,)),
        make_fake_compact_tensor(Int32, (n,)),
        make_fake_compact_tensor(Int32, (n,)),
        make_fake_compact_tensor(Int32, (n,)),
    ]
    return (*logits, *outputs, Float32(1.0))


def compile_kernel(arch: str, dtype: str, dump_dir, vec: int | None = None) -> CompiledKernel:
    """Compile for ``arch`` (e.g. "sm_90a", "sm_100a") and logits ``dtype`` ("bf16", "fp32",
    "fp16"); ``vec`` logits per load (default the 16-byte width; 1 for rows whose length is
    not a multiple of it). Works without a GPU."""
    if dtype not in DTYPES:
        raise InputError(f"unknown logits dtype {dtype!r}: expected one of {sorted(DTYPES)}")
    if not (arch.startswith("sm_") and arch[3:].rstrip("af").isdigit()):
        raise InputError(f"unknown GPU architecture {arch!r}: expected e.g. sm_90a")
    vec = vector_width(dtype) if vec is None else int(vec)
    if vec < 1 or vec > vector_width(dtype):
        raise InputError(f"vector width {vec} out of range 1..{vector_width(dtype)} for {dtype}")
    dump_dir = Path(dump_dir)
    # the DSL silently writes nothing when the dump folder is missing
    dump_dir.mkdir(parents=True, exist_ok=True)
    compiled = cute.compile(
        launch_acceptance_rows,
        *fake_arguments(dtype, vec),
        vec,
        options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump_dir}",
    )
    ptx = compiled.__ptx__
    if not isinstance(ptx, str) or ".target" not in ptx:
        raise RuntimeError(f"CuTe DSL produced no PTX for {arch} in {dump_dir}")
    cubins = sorted(dump_dir.glob(f"*.{arch}.cubin"), key=os.path.getmtime)
    cubin = compiled.__cubin__ if isinstance(getattr(compiled, "__cubin__", None), bytes) else None
    if cubin is None:
        if not cubins:
            raise RuntimeError(f"CuTe DSL wrote no cubin for {arch} in {dump_dir}")
        cubin = cubins[-1].read_bytes()
    return CompiledKernel(arch=arch, dtype=dtype, vec=vec, ptx=ptx, cubin=cubin, compiled=compiled)


def compile_kernel_ptx(arch: str, dtype: str, dump_dir=None) -> CompiledKernel:
    """PTX and cubin of the kernel for ``arch`` and ``dtype`` (the entry tests and CI use;
    CI keeps the cubin so a GPU machine without the DSL can load it, see
    benchmarks/kernel_gpu.py). ``dump_dir`` None → a fresh temporary folder."""
    if dump_dir is None:
        dump_dir = tempfile.mkdtemp(prefix="specdec-kernel-")
    return compile_kernel(arch, dtype, dump_dir)
