"""Cost profiles: experts touched, measured tables and their errors."""

import numpy as np
import pytest

from model.deployment import Deployment, ModelInputError
from model.profiles import FlatProfile, experts_touched, load_table, make_profile


def test_experts_touched_under_uniform_routing():
    assert experts_touched(1, 896, 16) == pytest.approx(16)
    assert experts_touched(8, 896, 16) == pytest.approx(896 * (1 - (1 - 16 / 896) ** 8))
    assert 16 < experts_touched(2, 896, 16) < 32  # overlaps
    assert experts_touched(10_000, 896, 16) == pytest.approx(896)
    assert experts_touched(5, 0, 0) == 0


def test_flat_profile():
    prof = make_profile(Deployment(cost_profile="flat"))
    assert isinstance(prof, FlatProfile)
    assert prof.absolute
    assert float(prof.step_time_s(4, 8)) == pytest.approx(1 / 118)
    assert float(prof.step_time_s(4, 8, "specialized")) == pytest.approx(1 / 118 / 1.75)
    rel = make_profile(Deployment(cost_profile="flat", baseline_tokens_per_second=None))
    assert not rel.absolute
    assert float(rel.stock_pass_s(3)) == 1.0
    with pytest.raises(ModelInputError):
        prof.step_time_s(1, 1, "turbo")


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_measured_table_interpolates_between_batch_sizes(tmp_path):
    p = _write(tmp_path, "t.csv", "batch_size,tokens_per_request,path,seconds\n"
               "1,1,stock,0.010\n8,1,stock,0.017\n1,8,stock,0.012\n8,8,stock,0.030\n1,8,specialized,0.007\n")
    prof = load_table(p)
    assert prof.name == f"table:{p}"
    assert float(prof.step_time_s(4, 1)) == pytest.approx(0.010 + 3 / 7 * 0.007)
    assert float(prof.step_time_s(1, 8, "specialized")) == pytest.approx(0.007)
    # q between measured ones: linear in q.
    assert float(prof.step_time_s(1, 4)) == pytest.approx(0.010 + 3 / 7 * 0.002)
    # No specialized rows at q = 1: stock / specialized speedup.
    fast = prof.with_specialized_speedup(2.0)
    assert float(fast.step_time_s(8, 1, "specialized")) == pytest.approx(0.017 / 2)
    # Past the last measured batch: extended linearly.
    assert float(prof.step_time_s(15, 1)) == pytest.approx(0.024)
    # Array arguments broadcast.
    assert np.asarray(prof.step_time_s(np.array([1, 8]), 1)).shape == (2,)


def test_measured_table_json_lines(tmp_path):
    p = _write(tmp_path, "t.jsonl", '{"batch_size": 1, "tokens_per_request": 1, "path": "stock", "seconds": 0.01}\n'
               '{"batch_size": 4, "tokens_per_request": 1, "path": "stock", "seconds": 0.02}\n')
    assert float(load_table(p).step_time_s(2, 1)) == pytest.approx(0.01 + 0.01 / 3)


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("a.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n2,1,stock,fast\n", "line 3"),
        ("b.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n2,1,turbo,0.02\n", "line 3"),
        ("c.csv", "batch,seconds\n1,0.01\n", "line 1"),
        ("d.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n0,1,stock,0.02\n", "line 3"),
        ("e.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock,0.01\n1,1,stock,0.02\n", "line 3"),
        ("f.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock,-0.01\n", "line 2"),
        ("g.csv", "batch_size,tokens_per_request,path,seconds\n2,2,stock,0.01\n", "tokens_per_request 1"),
        ("h.jsonl", '{"batch_size": 1, "tokens_per_request": 1, "seconds": 0.01}\n{oops\n', "line 2"),
        ("i.csv", "batch_size,tokens_per_request,path,seconds\n1,1,stock\n", "line 2"),
    ],
)
def test_malformed_table_names_file_and_line(tmp_path, name, text, line):
    p = _write(tmp_path, name, text)
    with pytest.raises(ModelInputError) as e:
        load_table(p)
    msg = str(e.value)
    assert str(p) in msg
    assert line in msg
    assert "\n" not in msg


def test_missing_table_is_a_one_line_error(tmp_path):
    with pytest.raises(ModelInputError, match="cannot read"):
        make_profile(Deployment(cost_profile=str(tmp_path / "nope.csv")))


def test_the_engines_reported_step_cost_scales_the_rooflines_terms():
    from dataclasses import replace

    from model.deployment import Deployment
    from model.profiles import make_profile

    dep = Deployment(model="llama-3.1-8b", gpu="H100", tensor_parallel_size=1, baseline_tokens_per_second=100.0)
    plain = make_profile(dep)
    scaled = make_profile(replace(dep, engine_cost_scale={"read_bytes": 1.5, "flops": 1.0}))
    assert (scaled.bytes_scale, scaled.flops_scale) == (1.5, 1.0)
    # at batch 1 the step reads its weights: memory-bound, so 1.5x the bytes is 1.5x the roof
    assert float(scaled.roof_s(1, 1)) == pytest.approx(1.5 * float(plain.roof_s(1, 1)))
    # the anchored step at batch 1 stays the anchor; what grows with the batch grows 1.5x as fast
    assert float(scaled.step_time_s(1, 1)) == pytest.approx(0.01)
    assert float(scaled.step_time_s(8, 4) - scaled.step_time_s(1, 1)) == pytest.approx(
        1.5 * float(plain.step_time_s(8, 4) - plain.step_time_s(1, 1)))
