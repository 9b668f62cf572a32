"""The CuTe DSL kernel compiles to PTX/cubin for Hopper and Blackwell without a GPU, and
the PTX has the instructions the design relies on; launched on a GPU it agrees with the
reference (GPU tests skip only when no GPU is present).

In CI (environment variable CI set) a missing nvidia-cutlass-dsl FAILS these tests rather
than skipping them, so a broken install cannot pass silently.
"""

import re

import numpy as np
import pytest

from kernels.acceptance import cuda_gpu_present
from support import require_cutlass


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    require_cutlass()
    from kernels import compile_kernel_ptx

    cache = {}

    def get(arch, dtype):
        if (arch, dtype) not in cache:
            cache[arch, dtype] = compile_kernel_ptx(arch, dtype, tmp_path_factory.mktemp(f"{arch}-{dtype}"))
        return cache[arch, dtype]

    return get


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_kernel_compiles_to_ptx_and_cubin(compiled, arch, dtype):
    kernel = compiled(arch, dtype)
    ptx = kernel.ptx
    assert re.search(rf"^\.target {arch}\b", ptx, re.M), "PTX targets the requested architecture"
    assert ".entry kernel_cutlass_acceptance_rows_kernel" in ptx
    # pass 2: min(p, q) in fp32
    assert re.search(r"\bmin(\.ftz)?\.f32\b", ptx)
    # pass 1: NaN-propagating max, so the status needs no per-element test
    assert re.search(r"\bmax\.NaN\.f32\b", ptx)
    # exp via one ex2 per element
    assert "ex2.approx" in ptx
    # warp reductions by butterfly shuffles: 5 rounds × (m, s, value, index) × 2 rows
    # per row-state merge (twice: per warp and across warps) + the sum reductions
    assert len(re.findall(r"shfl\.sync\.bfly\.b32", ptx)) >= 2 * 2 * 5 * 4 + 2 * 5
    # cross-warp merge through shared memory with CTA barriers
    assert "bar.sync" in ptx
    assert "st.shared" in ptx
    assert "ld.shared" in ptx
    # 16-byte vector loads of the logits
    assert "ld.global.v4" in ptx
    assert kernel.cubin[:4] == b"\x7fELF"
    assert kernel.vec == (8 if dtype == "bf16" else 4)


def test_scalar_variant_compiles_for_odd_vocab(tmp_path):
    require_cutlass()
    from kernels.acceptance_kernel import compile_kernel

    kernel = compile_kernel("sm_90a", "bf16", tmp_path, vec=1)
    assert "ld.global.v4" not in kernel.ptx
    assert re.search(r"ld\.global(\.nc)?\.b16", kernel.ptx)
    assert kernel.cubin[:4] == b"\x7fELF"


def test_compile_rejects_unknown_inputs(tmp_path):
    require_cutlass()
    from kernels.acceptance_kernel import compile_kernel_ptx

    with pytest.raises(ValueError, match="unknown logits dtype 'int8'"):
        compile_kernel_ptx("sm_90a", "int8", tmp_path)
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        compile_kernel_ptx("hopper", "bf16", tmp_path)


def test_missing_dump_dir_is_created(tmp_path):
    require_cutlass()
    from kernels.acceptance_kernel import compile_kernel_ptx

    kernel = compile_kernel_ptx("sm_90a", "fp32", tmp_path / "a" / "b")
    assert kernel.ptx.lstrip().startswith("//") or ".version" in kernel.ptx
    assert list((tmp_path / "a" / "b").glob("*.cubin"))


# ---------------------------------------------------------------------------------------
# on a GPU


gpu = pytest.mark.skipif(not cuda_gpu_present(), reason="no CUDA GPU present")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("vocab", [1000, 32768, 163840, 1001])
def test_cute_kernel_matches_reference_on_gpu(dtype, vocab):
    require_cutlass()
    import torch

    from kernels.acceptance import acceptance_per_row

    torch.manual_seed(vocab)
    target = torch.randn(64, vocab, device="cuda") * 3
    draft = target + torch.randn_like(target)
    target[0, : vocab // 2] = -torch.inf  # masking
    target[1, 7] = target[1, 3] = target[1].max() + 1  # a tie: lowest index wins
    draft[1, 3] = draft[1].max() + 1
    if dtype == "bf16":
        target, draft = target.bfloat16(), draft.bfloat16()
    for temperature in (0.3, 1.0, 2.0):
        kernel = acceptance_per_row(target, draft, temperature, backend="cute")
        reference = acceptance_per_row(target, draft, temperature, backend="torch")
        assert kernel.backend == "cute"
        np.testing.assert_allclose(kernel.expected, reference.expected, atol=1e-3)
        np.testing.assert_array_equal(kernel.target_argmax, reference.target_argmax)
        np.testing.assert_array_equal(kernel.draft_argmax, reference.draft_argmax)


@pytest.mark.gpu
@gpu
def test_cute_kernel_reports_bad_rows_on_gpu():
    require_cutlass()
    import torch

    from kernels.acceptance import acceptance_per_row
    from kernels.rows import LogitsError

    target = torch.randn(4, 256, device="cuda")
    draft = torch.randn(4, 256, device="cuda")
    bad = target.clone()
    bad[2, 5] = torch.nan
    with pytest.raises(LogitsError, match="target logits: row 2 has a NaN"):
        acceptance_per_row(bad, draft, 1.0, backend="cute")
    masked = draft.clone()
    masked[3] = -torch.inf
    with pytest.raises(LogitsError, match="draft logits: row 3 is all -inf"):
        acceptance_per_row(target, masked, 1.0, backend="cute")


def test_missing_cutlass_fails_in_ci_and_skips_elsewhere(monkeypatch):
    import support

    monkeypatch.setattr(support, "cutlass_available", lambda: False)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="not importable in CI"):
        require_cutlass()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        require_cutlass()
