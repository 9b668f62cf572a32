"""Offline replay: survival from per-position acceptance, and `specdec replay`."""

import json
import struct

import numpy as np
import pytest

from acceptance.definitions import equivalent_p
from kernels.logits_io import float32_to_bf16_bits, load_logits, LogitsFileError
from kernels.replay import ReplayError, replay_from_acceptance, replay_logits
from specdec.cli import main as specdec_main


def logits_with_agreement(agree, vocab=6, seed=0):
    """[L, V] target/draft logits whose argmaxes agree exactly where agree[t] is 1."""
    rng = np.random.default_rng(seed)
    length = len(agree)
    target = rng.normal(size=(length, vocab)).astype(np.float32)
    draft = rng.normal(size=(length, vocab)).astype(np.float32)
    for t, a in enumerate(agree):
        top = t % vocab
        target[t, top] = 10.0
        draft[t, top if a else (top + 1) % vocab] = 10.0
        if not a:
            draft[t, top] = -10.0
    return target, draft


def brute_force_greedy(agree_per_sequence, gamma):
    """Walk every draft: accepted length = tokens before the first disagreement."""
    drafts, accepted_at_least = 0, [0] * gamma
    for agree in agree_per_sequence:
        for start in range(len(agree) - gamma + 1):
            drafts += 1
            n = 0
            while n < gamma and agree[start + n]:
                n += 1
            for k in range(n):
                accepted_at_least[k] += 1
    return drafts, accepted_at_least


def test_greedy_survival_is_exact_on_a_constructed_case():
    agree = [1, 1, 0, 1, 1, 1, 0, 1]
    target, draft = logits_with_agreement(agree)
    result = replay_logits(target, draft, temperature=1.0, gamma=3, backend="numpy")
    g = result.greedy.as_dict()
    # by hand: starts 0..5 accept 2, 1, 0, 3, 2, 1 tokens
    assert g["drafts"] == 6
    assert g["draft_tokens"] == 18
    assert g["accepted_per_position"] == [5, 3, 1]
    assert g["accepted_tokens"] == 9
    assert g["survival"] == pytest.approx([5 / 6, 3 / 6, 1 / 6])
    assert g["conditional"] == pytest.approx([5 / 6, 3 / 5, 1 / 3])
    assert g["mean_acceptance_length"] == pytest.approx(1 + 9 / 6)
    assert g["draft_acceptance_rate"] == pytest.approx(9 / 18)
    assert g["equivalent_p"] == pytest.approx(equivalent_p(2.5, 3))
    assert g["exact"] is True
    assert result.greedy_agreement == pytest.approx(6 / 8)


def test_greedy_matches_brute_force_over_several_sequences():
    rng = np.random.default_rng(7)
    sequences = [rng.integers(0, 2, size=n) for n in (3, 12, 40, 1)]
    for gamma in (1, 2, 4):
        summary = replay_from_acceptance(sequences, gamma, mode="greedy")
        drafts, accepted = brute_force_greedy(sequences, gamma)
        assert summary.counts.drafts == drafts
        assert list(summary.counts.accepted_per_position) == accepted
        assert summary.sequences == 4
        assert summary.positions == 56


def test_drafts_never_cross_a_sequence_end():
    # each sequence alone accepts everything, but gluing them would create new drafts
    a, b = np.ones(4), np.ones(4)
    per_sequence = replay_from_acceptance([a, b], 3, mode="greedy")
    glued = replay_from_acceptance([np.concatenate([a, b])], 3, mode="greedy")
    assert per_sequence.counts.drafts == 4
    assert glued.counts.drafts == 6
    # a [S, L, V] logits array is S separate sequences
    target, draft = logits_with_agreement([1, 1, 1, 0, 1, 1, 1, 0])
    stacked = replay_logits(target.reshape(2, 4, -1), draft.reshape(2, 4, -1), gamma=3, backend="numpy")
    assert stacked.greedy.counts.drafts == 4
    # per sequence [1, 1, 1, 0]: start 0 accepts 3, start 1 accepts 2 → A = (2, 2, 1) each
    assert stacked.greedy.counts.accepted_per_position == (4, 4, 2)
    # glued, starts 2 and 3 would add drafts crossing the boundary
    glued_logits = replay_logits(target, draft, gamma=3, backend="numpy")
    assert glued_logits.greedy.counts.drafts == 6


def test_sampling_counts_are_products_of_acceptance():
    e = np.array([0.9, 0.5, 0.8, 0.2, 0.7])
    s = replay_from_acceptance(e, 2, mode="sampling", temperature=1.0)
    naive = [sum(np.prod(e[t:t + k]) for t in range(4)) for k in (1, 2)]
    assert s.counts.accepted_per_position == pytest.approx(naive)
    assert s.exact is False
    assert "approximate" in s.note
    assert s.survival == pytest.approx(np.array(naive) / 4)


def test_sampling_replay_from_logits_uses_expected_acceptance():
    rng = np.random.default_rng(2)
    target = rng.normal(size=(2, 20, 50)).astype(np.float32)
    draft = target + rng.normal(size=target.shape).astype(np.float32)
    from kernels.acceptance import acceptance_per_row

    rows = acceptance_per_row(target.reshape(40, 50), draft.reshape(40, 50), 0.7, backend="numpy")
    result = replay_logits(target, draft, temperature=0.7, gamma=2, backend="numpy")
    e = rows.expected.reshape(2, 20)
    a1 = sum(e[s, t] for s in range(2) for t in range(19))
    assert result.sampling.counts.accepted_per_position[0] == pytest.approx(a1)
    assert result.sampling.temperature == 0.7


@pytest.mark.parametrize(
    "per_position, gamma, fragment",
    [([np.ones(2)], 3, "no sequence is long enough"),
     ([np.ones(5)], 0, "gamma must be an integer"),
     ([np.array([0.5, 1.5])], 1, "must lie in [0, 1]"),
     ([], 1, "at least one sequence")],
)
def test_replay_bad_inputs(per_position, gamma, fragment):
    with pytest.raises(ReplayError) as info:
        replay_from_acceptance(per_position, gamma, mode="sampling")
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------------------
# files and the command


def write_safetensors(path, arrays: dict):
    """A minimal safetensors writer (header JSON + raw little-endian data)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in arrays.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "np"}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_cli(capsys, *argv):
    """`specdec replay ...` through the console script's own entry point."""
    try:
        code = specdec_main(["replay", *map(str, argv)])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def logit_files(tmp_path):
    target, draft = logits_with_agreement([1, 1, 0, 1, 1, 1, 0, 1], vocab=16)
    np.save(tmp_path / "t.npy", target)
    np.save(tmp_path / "d.npy", draft)
    return tmp_path, target, draft


def test_cli_json_npy(capsys, logit_files):
    tmp, _, _ = logit_files
    code, out, err = run_cli(capsys, "--target-logits", tmp / "t.npy", "--draft-logits", tmp / "d.npy",
                             "--gamma", 3, "--temperature", 0.5, "--backend", "numpy", "--json")
    assert code == 0
    assert err == ""
    doc = json.loads(out)
    assert doc["schema_version"] == 2
    assert doc["backend"] == "numpy"
    assert doc["greedy"]["accepted_per_position"] == [5, 3, 1]
    assert doc["sampling"]["temperature"] == 0.5
    assert doc["sampling"]["exact"] is False
    assert set(doc["greedy"]) >= {"drafts", "draft_tokens", "accepted_tokens", "accepted_per_position",
                                  "survival", "conditional", "mean_acceptance_length",
                                  "draft_acceptance_rate", "equivalent_p"}


def test_cli_table(capsys, logit_files):
    tmp, _, _ = logit_files
    code, out, _ = run_cli(capsys, "--target-logits", tmp / "t.npy", "--draft-logits", tmp / "d.npy",
                           "--backend", "numpy")
    assert code == 0
    assert "survival a_3" in out
    assert "0.167" in out
    assert "greedy (exact)" in out


def test_cli_safetensors_bf16_and_npz(capsys, logit_files):
    tmp, target, draft = logit_files
    write_safetensors(tmp / "t.safetensors", {"logits": ("BF16", float32_to_bf16_bits(target)),
                                              "extra": ("F32", np.zeros(2, np.float32))})
    write_safetensors(tmp / "d.safetensors", {"x": ("F32", draft)})
    np.savez(tmp / "d.npz", logits=draft, other=np.zeros(3))
    loaded = load_logits(tmp / "t.safetensors")
    assert loaded.dtype == np.float32
    assert loaded.shape == target.shape
    np.testing.assert_allclose(loaded, target, rtol=2**-8)
    np.testing.assert_array_equal(load_logits(tmp / "d.npz"), draft)
    for d in ("d.safetensors", "d.npz"):
        code, out, _ = run_cli(capsys, "--target-logits", tmp / "t.safetensors", "--draft-logits", tmp / d,
                               "--backend", "numpy", "--json")
        assert code == 0
        assert json.loads(out)["greedy"]["accepted_per_position"] == [5, 3, 1]


def _bad_cases(tmp, target, draft):
    np.save(tmp / "short.npy", draft[:5])
    nan = draft.copy()
    nan[3, 2] = np.nan
    np.save(tmp / "nan.npy", nan)
    (tmp / "empty.npy").write_bytes(b"")
    (tmp / "d.txt").write_text("1 2 3")
    (tmp / "garbage.safetensors").write_bytes(b"\xff" * 20)
    np.savez(tmp / "two.npz", a=draft, b=draft)
    return [
        ("short.npy", [], "does not match", "short.npy"),
        ("nan.npy", [], "row 3 has a NaN", "nan.npy"),
        ("empty.npy", [], "empty file", "empty.npy"),
        ("d.txt", [], "unknown format", "d.txt"),
        ("missing.npy", [], "no such file", "missing.npy"),
        ("garbage.safetensors", [], "safetensors", "garbage.safetensors"),
        ("two.npz", [], "name the logits 'logits'", "two.npz"),
        ("d.npy", ["--temperature", "0"], "temperature", None),
        ("d.npy", ["--temperature", "-1"], "temperature", None),
        ("d.npy", ["--gamma", "20"], "no sequence is long enough", None),
    ]


def test_cli_bad_inputs_exit_2_with_one_line(capsys, logit_files):
    tmp, target, draft = logit_files
    for draft_name, extra, fragment, named in _bad_cases(tmp, target, draft):
        code, out, err = run_cli(capsys, "--target-logits", tmp / "t.npy", "--draft-logits", tmp / draft_name,
                                 "--backend", "numpy", *extra)
        assert code == 2, draft_name
        assert out == ""
        assert err.count("\n") == 1, err
        assert fragment in err, err
        if named:
            assert named in err
    # the inputs are untouched
    np.testing.assert_array_equal(np.load(tmp / "t.npy"), target)


def test_load_logits_rejects_wrong_rank(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(5, np.float32))
    with pytest.raises(LogitsFileError, match="x.npy: expected"):
        load_logits(tmp_path / "x.npy")
    np.save(tmp_path / "i.npy", np.zeros((2, 3), np.int32))
    with pytest.raises(LogitsFileError, match="floating-point"):
        load_logits(tmp_path / "i.npy")
