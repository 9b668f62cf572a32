"""benchmarks/gpu_checks.py on a CPU: the whole script at tiny sizes (the dry run), the
loader's argument check against freshly compiled cubins, the verify step's attention
against a plain implementation, the measured-table CSV, and the roofline comparison and
refit on tables whose answer is known."""

import ctypes
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import dense_target  # noqa: E402
import gpu_checks  # noqa: E402
import kernel_gpu  # noqa: E402
import roofline_check  # noqa: E402
from model.figures import GPUS, MODELS  # noqa: E402
from model.profiles import load_table  # noqa: E402
from support import require_cutlass  # noqa: E402

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cubins(tmp_path_factory):
    require_cutlass()
    folder = tmp_path_factory.mktemp("cubins")
    kernel_gpu.emit_cubins(folder, dtypes=("bf16",), archs=("sm_90a",))
    return folder


# ---------------------------------------------------------------------------------------
# the whole script, dry run


def test_dry_run_of_the_whole_script(cubins, tmp_path):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_checks.py"), "--dry-run", "--out", str(out),
                          "--cubin", str(cubins)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "all checks passed" in run.stdout
    report = json.loads((out / "gpu_checks.json").read_text())
    assert report["dry_run"] is True
    assert report["cubin_layout"]["param_sizes"] == [32, 32, 16, 16, 16, 16, 4]
    assert report["cubin_layout"]["block_threads"] == 256
    kernel = report["kernel"]
    assert kernel["checks"] == {"agreement": True, "bandwidth": None, "speed": None}
    assert kernel["max_abs_error"] < 1e-6
    assert kernel["argmax_mismatches"] == 0
    # the table: specdec's measured-table CSV, every cell, read back by load_table
    table = out / "tiny-llama-cpu.csv"
    lines = table.read_text().splitlines()
    assert lines[0].startswith("# tiny-llama")
    assert lines[1] == "batch_size,tokens_per_request,path,seconds"
    profile = load_table(table)
    assert sorted(profile.rows) == [("stock", 1), ("stock", 2), ("stock", 3)]
    assert list(profile.rows[("stock", 1)][0]) == [1, 2, 4]
    cells = report["verify_table"]["cells"]
    assert len(cells) == 9
    assert not report["verify_table"]["skipped"]
    for c in cells:
        assert float(profile.step_time_s(c["batch_size"], c["tokens_per_request"])) == pytest.approx(c["seconds"], rel=1e-6)
    # the comparison covers every cell, anchored on T(1, 1)
    roof = report["roofline"]
    assert len(roof["cells"]) == 9
    anchor = [c for c in roof["cells"] if c["role"] == "anchor"]
    assert len(anchor) == 1
    assert anchor[0]["error"] == pytest.approx(0.0, abs=1e-12)
    assert report["checks"]["roofline"] is None  # a CPU's times do not judge a GPU roofline
    assert "3. roofline vs table" in run.stdout
    assert "B   q  measured ms" in run.stdout


def test_budget_spent_reports_the_cells_it_skipped(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_checks.py"), "--dry-run", "--out", str(out),
                          "--budget-s", "0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads((out / "gpu_checks.json").read_text())
    assert report["checks"]["verify_table_complete"] is False
    assert len(report["verify_table"]["skipped"]) == 9 - len(report["verify_table"]["cells"])
    assert "FAILED: verify_table_complete" in run.stdout


def test_no_gpu_is_one_line_exit_2(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_checks.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0
    assert "no CUDA GPU present" in run.stderr


# ---------------------------------------------------------------------------------------
# the loader's argument check


def test_cubin_layout_matches_what_the_loader_packs(cubins):
    layout = kernel_gpu.check_cubin_layout(cubins / "acceptance_sm_90a_bf16.cubin")
    assert layout.entry.startswith("kernel_cutlass_acceptance_rows_kernel")
    assert layout.param_sizes == (32, 32, 16, 16, 16, 16, 4)
    assert layout.block_threads == 256
    # the kernel reads the pointer and the row stride of each logits tensor
    assert 0 in layout.read_offsets[0]
    assert 24 in layout.read_offsets[0]
    fake = kernel_gpu._FakeTensor((4, 64))
    packed = kernel_gpu.launch_arguments(fake, fake, [kernel_gpu._FakeTensor((4,))] * 4, 0.5)
    assert [ctypes.sizeof(p) for p in packed] == list(layout.param_sizes)
    assert list(packed[0]) == [0, 4, 64, 64]  # {ptr, N, V, row stride}
    assert packed[-1].value == 0.5


def _copy_with_ptx(cubins: Path, tmp_path: Path, edit) -> Path:
    cubin = tmp_path / "acceptance_sm_90a_bf16.cubin"
    cubin.write_bytes((cubins / cubin.name).read_bytes())
    cubin.with_suffix(".ptx").write_text(edit((cubins / cubin.name).with_suffix(".ptx").read_text()))
    return cubin


def test_layout_mismatches_are_refused_in_one_line(cubins, tmp_path):
    wider = _copy_with_ptx(cubins, tmp_path, lambda ptx: ptx.replace("_param_2[16]", "_param_2[24]", 1))
    with pytest.raises(kernel_gpu.KernelCheckError, match=r"kernel parameters \[32, 32, 24, 16, 16, 16, 4\] differ"):
        kernel_gpu.check_cubin_layout(wider)
    other = tmp_path / "other"
    other.mkdir()
    renamed = _copy_with_ptx(cubins, other, lambda ptx: ptx.replace("kernel_cutlass_acceptance_rows", "kernel_other_rows"))
    with pytest.raises(kernel_gpu.KernelCheckError, match="is not in the cubin"):
        kernel_gpu.check_cubin_layout(renamed)
    free = tmp_path / "free"
    free.mkdir()
    no_block = _copy_with_ptx(cubins, free, lambda ptx: ptx.replace(".reqntid 256, 1, 1", ""))
    with pytest.raises(kernel_gpu.KernelCheckError, match="no .reqntid"):
        kernel_gpu.check_cubin_layout(no_block)
    with pytest.raises(kernel_gpu.KernelCheckError, match="missing"):
        kernel_gpu.check_cubin_layout(tmp_path / "acceptance_sm_100a_bf16.cubin")


def test_reads_past_a_parameter_are_refused():
    ptx = (".visible .entry k(\n .param .align 8 .b8 k_param_0[16],\n .param .f32 k_param_1\n)\n.reqntid 128\n"
           "{\n ld.param.b64 %rd1, [k_param_0+16];\n ld.param.b32 %r1, [k_param_1];\n}\n")
    layout = kernel_gpu.ptx_layout(ptx)
    assert layout.param_sizes == (16, 4)
    assert layout.read_offsets == ((16,), (0,))
    assert layout.block_threads == 128


# ---------------------------------------------------------------------------------------
# the verify step


def _plain_step(target: dense_target.DenseTarget, tokens, q: int):
    """The same step with K/V expanded per query head and an explicit causal mask."""
    s, ctx, b = target.shape, target.context, tokens.shape[0]
    group = s.heads // s.kv_heads
    x = target.embedding[tokens]
    keys_seen = torch.arange(ctx + q)[None, :] <= (ctx + torch.arange(q))[:, None]
    for i, w in enumerate(target.layers):
        h = target._rms_norm(x, w["attn_norm"])
        qs, ks, vs = (h @ w["qkv"]).split([s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        qs = target._rotary(qs.view(b, q, s.heads, s.head_dim).transpose(1, 2), q)
        ks = target._rotary(ks.view(b, q, s.kv_heads, s.head_dim).transpose(1, 2), q)
        vs = vs.view(b, q, s.kv_heads, s.head_dim).transpose(1, 2)
        k_all = torch.cat([target.k_cache[i][:b, :, :ctx], ks], dim=2).repeat_interleave(group, dim=1)
        v_all = torch.cat([target.v_cache[i][:b, :, :ctx], vs], dim=2).repeat_interleave(group, dim=1)
        scores = (qs @ k_all.transpose(-1, -2)) / np.sqrt(s.head_dim)
        scores = scores.masked_fill(~keys_seen, -torch.inf)
        attn = (scores.softmax(-1) @ v_all).transpose(1, 2).reshape(b, q, -1)
        x = x + attn @ w["out"]
        h = target._rms_norm(x, w["mlp_norm"])
        gate, up = (h @ w["gate_up"]).chunk(2, -1)
        x = x + (torch.nn.functional.silu(gate) * up) @ w["down"]
    return target._rms_norm(x, target.final_norm) @ target.lm_head


@pytest.mark.parametrize("q", [1, 3])
def test_verify_step_equals_plain_attention(q):
    target = dense_target.DenseTarget(dense_target.TINY, max_batch=3, context=12, max_q=4,
                                      device=torch.device("cpu"), dtype=torch.float64)
    step, tokens = target.step_fn(3, q)
    expected = _plain_step(target, tokens, q)  # before the step writes the new K/V
    got = step()
    assert got.shape == (3, q, dense_target.TINY.vocab)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_llama_shape_matches_the_roofline_figures():
    shape, figures = dense_target.LLAMA_31_8B, MODELS["llama-3.1-8b"]
    assert shape.params == pytest.approx(figures.total_params.value, rel=0.005)
    assert shape.kv_bytes_per_token == figures.kv_bytes_per_token.value


def test_measure_verify_costs_eager_cells_in_order():
    target = dense_target.DenseTarget(dense_target.TINY, max_batch=2, context=8, max_q=2,
                                      device=torch.device("cpu"), dtype=torch.float32)
    seen = []
    cells = dense_target.measure_verify_costs(target, [2, 1], [2, 1], cuda_graphs=False, repeats=3, warmup=1,
                                              progress=seen.append)
    assert [(c.batch_size, c.tokens_per_request) for c in cells] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(c.seconds > 0 and c.repeats == 3 for c in cells)
    assert len(seen) == 4


# ---------------------------------------------------------------------------------------
# the roofline against a table


GRID = [(b, q) for b in (1, 2, 4, 8, 16, 32, 64) for q in (1, 2, 3, 4, 6, 8)]


def _table_from(hbm_fraction: float, flops_fraction: float, context: int = 1024):
    """Cells that an anchored roofline at the given fractions produces exactly."""
    model, gpu = MODELS["llama-3.1-8b"], GPUS["H200"]
    truth_gpu = roofline_check.scaled_gpu(gpu, hbm_fraction, flops_fraction, "truth")
    seed = [roofline_check.Cell(1, 1, 0.0075)]
    profile = roofline_check.anchored_profile(model, truth_gpu, seed, context)
    return [roofline_check.Cell(b, q, float(profile.step_time_s(b, q))) for b, q in GRID]


def test_checkerboard_split_halves_the_grid_with_the_anchor_fitting():
    cells = _table_from(1.0, 1.0)
    fit, held_out = roofline_check.checkerboard_split(cells)
    assert len(fit) == len(held_out) == 21
    assert any(c.batch_size == 1 and c.tokens_per_request == 1 for c in fit)
    assert not {(c.batch_size, c.tokens_per_request) for c in fit} & {(c.batch_size, c.tokens_per_request) for c in held_out}


def test_datasheet_table_needs_no_refit():
    model, gpu = MODELS["llama-3.1-8b"], GPUS["H200"]
    comparison = roofline_check.compare_roofline(model, gpu, _table_from(1.0, 1.0), 1024, "synthetic")
    assert comparison.within_tolerance
    assert comparison.refit is None
    assert comparison.max_abs_error < 1e-9


def test_a_slower_gpu_is_flagged_and_the_refit_finds_it_on_held_out_cells():
    model, gpu = MODELS["llama-3.1-8b"], GPUS["H200"]
    cells = _table_from(0.7, 0.55)
    comparison = roofline_check.compare_roofline(model, gpu, cells, 1024, "synthetic")
    assert not comparison.within_tolerance
    assert comparison.max_abs_error > 0.15
    refit = comparison.refit
    assert refit.flops_fraction == pytest.approx(0.55, rel=0.03)
    assert refit.max_abs_error_held_out < 0.02
    roles = [e.role for e in refit.cells]
    assert roles.count("anchor") == 1
    assert roles.count("held-out") == 21
    doc = roofline_check.comparison_to_dict(comparison)
    assert doc["refit"]["within_tolerance_held_out"] is True
    assert len(doc["refit"]["cells"]) == len(GRID)


def test_context_of_the_table_is_the_one_modelled():
    model, gpu = MODELS["llama-3.1-8b"], GPUS["H200"]
    cells = [roofline_check.Cell(1, 1, 0.0075)]
    short = roofline_check.anchored_profile(model, gpu, cells, 1024)
    long = roofline_check.anchored_profile(model, gpu, cells, 8192)
    assert short.model.context_tokens.value == 1024
    # more context: more KV bytes per added request, so a larger increment at batch 16
    assert float(long.step_time_s(16, 1)) > float(short.step_time_s(16, 1))
    with pytest.raises(ValueError, match="no cell at batch 1, q 1"):
        roofline_check.anchored_profile(model, gpu, [roofline_check.Cell(2, 1, 0.01)], 1024)


def test_refit_needs_something_to_hold_out():
    model, gpu = MODELS["llama-3.1-8b"], replace(GPUS["H200"])
    with pytest.raises(ValueError, match="nothing would be held out"):
        roofline_check.refit(model, gpu, [roofline_check.Cell(1, 1, 0.0075)], 1024, "one cell")


def test_the_gpu_run_prices_llama_through_its_config_json_with_the_builtin_figures():
    model, gpu = gpu_checks.figures_for(gpu_checks.GPU_PLAN, dry_run=False)
    builtin = MODELS["llama-3.1-8b"]
    assert "config.json" in model.kv_bytes_per_token.source or "llama-3.1-8b.json" in model.kv_bytes_per_token.source
    for name in ("total_params", "active_params", "kv_bytes_per_token", "bytes_per_weight", "hidden_size",
                 "state_bytes_per_request", "experts"):
        assert getattr(model, name).value == pytest.approx(getattr(builtin, name).value, rel=1e-3), name
    assert model.compute_precision == builtin.compute_precision and gpu is GPUS["H200"]
