"""notebooks/what_if.ipynb: committed without outputs, generated from build_what_if.py, and
executed top to bottom (any error fails) with the seeds' numbers in its outputs.

The kernel is this interpreter: a kernelspec written to a temporary JUPYTER_PATH, so a
fresh `make test` venv needs nothing installed beyond ipykernel/nbclient (the dev extra),
and no other Python's "python3" kernelspec on the machine can be picked up instead.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK = NOTEBOOKS / "what_if.ipynb"
SAMPLE = NOTEBOOKS / "sample_route.json"
KERNEL_NAME = "specdec-what-if-test"

# docs/MODEL.md, Cost model: the seeds' table (γ = 7, r = 0.10, 118 tok/s) and inversions.
SEED_LINES = [
    "p 0.95 → 6.12× 722.1 tok/s",
    "p 0.90 → 5.18× 611.0 tok/s",
    "p 0.80 → 3.78× 446.4 tok/s",
    "p 0.70 → 2.86× 337.0 tok/s",
    "p 0.60 → 2.23× 263.7 tok/s",
    "p 0.50 → 1.81× 213.7 tok/s",
]
INVERSION_PATTERNS = [r"370 tok/s = [\d.]+× → p 0\.7347 \(E 3\.45\)", r"464 tok/s = [\d.]+× → p 0\.8129 \(E 4\.33\)"]


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_what_if", NOTEBOOKS / "build_what_if.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec running this interpreter, on a JUPYTER_PATH of its own."""
    path = tmp_path_factory.mktemp("jupyter")
    spec_dir = path / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "specdec test", "language": "python",
    }))
    return path


def _execute(kernel_env: Path, monkeypatch, data: str) -> nbformat.NotebookNode:
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_env))
    monkeypatch.setenv("SPECDEC_WHATIF_DATA", data)
    # Plain JSON outputs: the CDN-connected HTML renderer adds nothing a test can read.
    monkeypatch.setenv("SPECDEC_PLOTLY_RENDERER", "plotly_mimetype")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, allow_errors=False,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _text(nb) -> str:
    """Everything the code cells printed or displayed as text."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out and "text/plain" in out["data"]:
                parts.append(out["data"]["text/plain"])
    return "\n".join(parts)


def _figures(nb) -> list[dict]:
    return [out["data"]["application/vnd.plotly.v1+json"]
            for cell in nb.cells for out in cell.get("outputs", [])
            if "application/vnd.plotly.v1+json" in out.get("data", {})]


@pytest.fixture(scope="module")
def executed_with_sample(kernel_env):
    mp = pytest.MonkeyPatch()
    try:
        yield _execute(kernel_env, mp, "sample")
    finally:
        mp.undo()


def test_committed_notebook_is_generated_and_has_no_outputs():
    # Compared cell by cell rather than byte for byte, so another nbformat release's
    # serialisation does not fail the suite; `build_what_if.py --check` is the strict one.
    generated = _load_builder().build_notebook()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in generated.cells], \
        "what_if.ipynb differs from build_what_if.py: run python notebooks/build_what_if.py"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert NOTEBOOK.stat().st_size < 100_000


def test_notebook_reproduces_the_seeds(executed_with_sample):
    text = _text(executed_with_sample)
    for line in SEED_LINES:
        assert line in text
    for pattern in INVERSION_PATTERNS:
        assert re.search(pattern, text), pattern


def test_notebook_shows_every_section(executed_with_sample):
    nb = executed_with_sample
    headings = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert [h.split(".")[0] for h in headings] == [f"## {i}" for i in range(1, 8)]
    text = _text(nb)
    # Section 2: a dearer drafter needs more acceptance for the same tokens/s.
    for tps in ("370", "464"):
        line = re.search(rf"^{tps} tok/s implies (.*)$", text, re.M).group(1)
        implied = [(float(r), float(p)) for p, r in re.findall(r"p ([\d.]+) at r ([\d.]+)", line)]
        assert [r for r, _ in implied] == [0.05, 0.10, 0.20]
        assert implied[0][1] < implied[1][1] < implied[2][1]
    # Section 6 and 7 name their axis and the route they loaded.
    assert "optimised for interactivity: γ =" in text
    assert "optimised for throughput: γ =" in text
    assert "route 'open' from the bundled sample" in text
    assert "deployed γ 7 → recommended γ" in text
    assert "benchmarks only" in text
    assert len(_figures(nb)) >= 9


def _store_from_sample(folder: Path) -> None:
    """A config and store holding the sample route's counts, as `specdec collect` would
    leave them (one engine, cumulative counters scraped at the interval ends)."""
    from acceptance.store import Store

    doc = json.loads(SAMPLE.read_text(encoding="utf-8"))
    counts = np.array(doc["counts"], dtype=float)
    times = np.concatenate([[doc["start"][0]], doc["end"]])
    cumulative = np.vstack([np.zeros(counts.shape[1]), np.cumsum(counts, axis=0)])
    target = "http://sample-route.invalid/metrics"
    with Store.open(folder / "specdec.db") as store:
        store.bulk_load_history(target, "kimi-k3", "0", times, cumulative)
    deployment = "\n".join(f"{k} = {json.dumps(v)}" for k, v in doc["deployment"].items())
    (folder / "specdec.toml").write_text(
        f'[store]\npath = "specdec.db"\n\n[deployment]\n{deployment}\n\n'
        f'[routes.{doc["route"]}]\ntargets = ["{target}"]\n', encoding="utf-8")


def _acceptance_line(text: str) -> str:
    return re.search(r"^AL [\d.]+ \[[\d.]+, [\d.]+\] at 90%; equivalent p [\d.]+$", text, re.M).group(0)


def test_notebook_reads_a_store(kernel_env, tmp_path, monkeypatch, executed_with_sample):
    """Section 7 on a store: the same counts give the same acceptance as the bundled sample."""
    _store_from_sample(tmp_path)
    text = _text(_execute(kernel_env, monkeypatch, str(tmp_path)))
    assert f"route 'open' from the store of {tmp_path / 'specdec.toml'}" in text
    assert _acceptance_line(text) == _acceptance_line(_text(executed_with_sample))
    assert "deployed γ 7 → recommended γ" in text


def test_sample_is_a_valid_small_route():
    from acceptance.counts import IntervalCounts
    from acceptance.estimates import estimate_acceptance

    assert SAMPLE.stat().st_size < 100_000
    doc = json.loads(SAMPLE.read_text(encoding="utf-8"))
    counts = np.array(doc["counts"], dtype=float)
    iv = IntervalCounts(doc["gamma"], np.array(doc["start"]), np.array(doc["end"]), counts)
    assert len(doc["columns"]) == counts.shape[1] == 3 + doc["gamma"]
    assert np.all(np.diff(iv.end) > 0)
    assert np.all(iv.end > iv.start)
    # Per row: A_k non-increasing in k, A = Σ A_k, T = γ·D (full drafts) — vLLM's counters.
    per_pos = counts[:, 3:]
    assert np.all(np.diff(per_pos, axis=1) <= 0)
    assert np.array_equal(counts[:, 2], per_pos.sum(axis=1))
    assert np.array_equal(counts[:, 1], doc["gamma"] * counts[:, 0])
    est = estimate_acceptance(iv)
    assert est.has_interval
    assert 1.0 < est.mean_acceptance_length.value < 1 + doc["gamma"]


# --- the route is named in the notebook; one colour per series -------------

ROUTE_LINE = "ROUTE = None"


def _route_cell_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "tune_route(" in c.source)


def _execute_route_cell(kernel_env: Path, monkeypatch, data: str, route: str) -> nbformat.NotebookNode:
    """The imports cell and section 7's loading cell only, with ROUTE set as a user would."""
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_env))
    monkeypatch.setenv("SPECDEC_WHATIF_DATA", data)
    monkeypatch.delenv("SPECDEC_WHATIF_ROUTE", raising=False)
    monkeypatch.setenv("SPECDEC_PLOTLY_RENDERER", "plotly_mimetype")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    load = nb.cells[_route_cell_index(nb)]
    assert ROUTE_LINE in load.source, "section 7 should let the user name the route: a ROUTE = None line"
    load.source = load.source.replace(ROUTE_LINE, f"ROUTE = {route!r}", 1)
    nb.cells = [next(c for c in nb.cells if c.cell_type == "code"), load]
    client = nbclient.NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120, allow_errors=False,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    return nb


def _store_with_two_routes(folder: Path) -> None:
    """The sample's store, with a second route 'chat' (first in the config) on the same target."""
    _store_from_sample(folder)
    config = folder / "specdec.toml"
    text = config.read_text(encoding="utf-8")
    target = re.search(r'targets = \["([^"]+)"\]', text).group(1)
    config.write_text(text.replace("[routes.open]", f'[routes.chat]\ntargets = ["{target}"]\n\n[routes.open]'),
                      encoding="utf-8")


def test_notebook_route_is_chosen_by_name(kernel_env, tmp_path, monkeypatch):
    _store_with_two_routes(tmp_path)
    monkeypatch.setenv("SPECDEC_WHATIF_WINDOW", "2h")  # a duration, as every window option takes
    nb = nbformat.read(NOTEBOOK, as_version=4)
    intro = nb.cells[_route_cell_index(nb) - 1]
    assert intro.cell_type == "markdown"
    assert "ROUTE" in intro.source
    text = _text(_execute_route_cell(kernel_env, monkeypatch, str(tmp_path), "open"))
    assert "routes: chat, open" in text  # the ones there are to choose from
    # 'open' is not the first route: it was loaded because it was named.
    assert f"route 'open' from the store of {tmp_path / 'specdec.toml'}" in text


def test_notebook_unknown_route_names_the_routes(kernel_env, tmp_path, monkeypatch):
    _store_with_two_routes(tmp_path)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as err:
        _execute_route_cell(kernel_env, monkeypatch, str(tmp_path), "nope")
    message = str(err.value)
    assert "unknown route 'nope'" in message
    assert "chat, open" in message


def _trace_colour(fig: dict, i: int) -> str:
    """The colour plotly.js draws trace i with: its own, else the colourway's i-th."""
    trace = fig["data"][i]
    line = (trace.get("line") or {}).get("color")
    marker = (trace.get("marker") or {}).get("color")
    if isinstance(line, str) and isinstance(marker, str):
        assert line == marker, f"trace {trace.get('name')!r}: line {line} but markers {marker}"
    if isinstance(line, str) or isinstance(marker, str):
        return line if isinstance(line, str) else marker
    layout = fig.get("layout", {})
    colorway = layout.get("colorway") or layout["template"]["layout"]["colorway"]
    return colorway[i % len(colorway)]


def test_notebook_same_al_figure_legend_colours_match_both_panels(executed_with_sample):
    fig = next(f for f in _figures(executed_with_sample)
               if f["layout"].get("title", {}).get("text", "").startswith("Same AL at γ = 7"))
    by_axis: dict[str, dict[str, str]] = {}
    legend: dict[str, str] = {}
    for i, trace in enumerate(fig["data"]):
        colour = _trace_colour(fig, i)
        by_axis.setdefault(trace.get("xaxis", "x"), {})[trace["name"]] = colour
        if trace.get("showlegend", True):
            assert trace["name"] not in legend, f"{trace['name']!r} is in the legend twice"
            legend[trace["name"]] = colour
    assert sorted(by_axis) == ["x", "x2"]
    assert len(legend) == 2
    assert len(set(legend.values())) == len(legend), "two series share a colour"
    for axis, series in by_axis.items():
        assert series == legend, f"panel {axis}: lines {series}, legend {legend}"
