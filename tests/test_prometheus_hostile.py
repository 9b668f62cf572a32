"""A hostile or broken Prometheus never hangs or misleads tune-gamma.

A loopback fake Prometheus answers the raw path's queries for a route of two engines at
γ 3 scraped every 15 s (every block: 100 drafts, 300 draft tokens, 150 accepted, 80/50/20 by
position), and each test breaks one thing: an answer that never ends, an answer of 200,000
series, repeated samples, counts no engine produces. Each refusal is one line naming the
server and the route's selector. Every test is bounded in time (pytest-timeout): a hang
shows as a failure, not a stuck run.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse

import pytest

from acceptance.prometheus import PrometheusError, PrometheusSettings, prometheus_route_window
from acceptance.prometheus_recorded import prometheus_window
from acceptance.fetch import UnreachableError

SELECTOR = '{job="x"}'
END = 1_700_003_600.0
START = END - 3600.0
SCRAPE_S = 15.0
ENGINES = [{"instance": f"10.0.0.{i}:8000", "job": "x"} for i in range(2)]
# one block's counts summed over the engines: D, T, A, A_1..A_3
BLOCK = {"drafts": 100, "draft_tokens": 300, "accepted_tokens": 150, "0": 80, "1": 50, "2": 20}

pytestmark = pytest.mark.timeout(20)


def _steps(form) -> list[float]:
    start, end, step = (float(form[k][0]) for k in ("start", "end", "step"))
    n = int((end - start) / step + 1e-9) + 1
    return [start + i * step for i in range(n)]


def _samples(repeat: int = 1) -> list[dict]:
    """The drafts counter of each engine over the last 600 s, each sample ``repeat`` times."""
    times = [END - 600 + SCRAPE_S * (i + 1) for i in range(40)]
    return [{"metric": {"__name__": "vllm:spec_decode_num_drafts_total", **e},
             "values": [[t, str(50 * i)] for i, t in enumerate(times) for _ in range(repeat)]} for e in ENGINES]


def _block_counts(form, block=None) -> list[dict]:
    block = block or BLOCK
    return [{"metric": {"position": pos}, "values": [[t, str(v)] for t in _steps(form)]} for pos, v in block.items()]


def healthy(path: str, expr: str, form) -> dict | list:
    """The result of a route that reads well (module docstring); [] for anything else."""
    if expr.startswith("vllm:spec_decode_num_drafts_total") and expr.endswith("]"):
        return _samples()
    if expr.startswith('count_values("gamma"'):
        return [{"metric": {"gamma": "3"}, "values": [[t, "2"] for t in _steps(form)]}]
    if expr.startswith("sum by (position)"):
        return _block_counts(form)
    if expr.startswith("max_over_time("):
        return [{"metric": e, "value": [float(form["time"][0]), "3"]} for e in ENGINES]
    return []


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        expr = form.get("query", [""])[0]
        self.server.seen.append((self.path, expr))
        answer = self.server.answer(self.path, expr, form)
        if callable(answer):  # the test writes the response itself
            answer(self)
            return
        if isinstance(answer, list):  # a result: wrapped in a success document
            kind = "matrix" if self.path.endswith("query_range") or (answer and "values" in answer[0]) else "vector"
            answer = json.dumps({"status": "success", "data": {"resultType": kind, "result": answer}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.seen = []
    server.answer = healthy
    server.stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.stop.set()
    server.shutdown()
    server.server_close()


def _one_line_naming(message: str, url: str) -> None:
    assert "\n" not in message
    assert url in message
    assert f"selector {SELECTOR}" in message


def _window(fake, **settings):
    return prometheus_window(PrometheusSettings(fake.url, **settings), "r", SELECTOR, START, END)


def test_the_healthy_fake_reads_as_a_route(fake):
    window = _window(fake)
    assert window.scrape_interval_s == SCRAPE_S
    (segment,) = window.segments
    assert segment.gamma == 3 and len(segment.intervals) == 80
    assert segment.total.drafts == 80 * BLOCK["drafts"]
    assert not any("repeated" in note for note in window.notes)


# ----------------------------------------------------------------------------- a deadline per query

def _trickle(head: bytes):
    """Writes ``head`` a byte at a time, then body bytes, 20 a second, until the client goes."""
    def write(handler):
        stop = handler.server.stop
        data = head + b"{" * 10**6
        for i in range(len(data)):
            if stop.is_set():
                return
            try:
                handler.wfile.write(data[i:i + 1])
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)
    return write


# a body just under the 64 MiB bound, so that only the deadline can stop its reading
HUGE_BODY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 60000000\r\n\r\n"


@pytest.mark.parametrize("where", ["body", "headers"])
def test_an_answer_that_never_ends_is_cut_off_at_the_deadline(fake, where):
    # a byte every 50 ms: each read gets one long before any per-read timeout
    head = HUGE_BODY if where == "headers" else b""
    fake.answer = lambda path, expr, form: _trickle(head) if where == "headers" else (
        lambda handler: (handler.wfile.write(HUGE_BODY), _trickle(b"")(handler)))
    began = time.monotonic()
    with pytest.raises(PrometheusError) as info:
        prometheus_window(PrometheusSettings(fake.url), "r", SELECTOR, START, END, timeout_s=0.5)
    assert time.monotonic() - began < 3.0
    message = str(info.value)
    _one_line_naming(message, fake.url)
    assert "0.5 s deadline" in message
    assert isinstance(info.value, UnreachableError)  # nothing answered: exit status 3


def test_the_deadline_is_a_source_setting_and_tune_gamma_stops_at_it(fake, tmp_path, capsys):
    from specdec.cli import tune_gamma_main

    fake.answer = lambda path, expr, form: lambda handler: (handler.wfile.write(HUGE_BODY), _trickle(b"")(handler))
    config = tmp_path / "specdec.toml"
    config.write_text(f'[source]\nkind = "prometheus"\nurl = "{fake.url}"\ntimeout = "0.4s"\n\n'
                      f"[routes.r]\nselector = '{SELECTOR}'\n")
    began = time.monotonic()
    code = tune_gamma_main(["--route", "r", "--config", str(config), "--window", "1h", "--json"])
    assert time.monotonic() - began < 3.0
    err = capsys.readouterr().err.strip()
    assert code == 3
    assert "0.4 s deadline" in err and fake.url in err and SELECTOR in err


def test_a_body_over_the_bound_is_refused_before_it_is_read(fake):
    fake.answer = lambda path, expr, form: lambda handler: handler.wfile.write(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n{")
    began = time.monotonic()
    with pytest.raises(PrometheusError, match="more than 64 MiB") as info:
        _window(fake, timeout_s=5.0)
    assert time.monotonic() - began < 2.0
    _one_line_naming(str(info.value), fake.url)


# ----------------------------------------------------------------------------- a bound on series

def _many_gammas(n: int):
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"gamma": "3", "instance": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:8000"},
         "values": [[END, "1"]]} for i in range(n)]}}).encode()

    def answer(path, expr, form):
        return body if expr.startswith('count_values("gamma"') else healthy(path, expr, form)
    return answer


def test_an_answer_of_200000_series_is_refused_unread(fake):
    fake.answer = _many_gammas(200_000)
    began = time.monotonic()
    with pytest.raises(PrometheusError) as info:
        _window(fake)
    assert time.monotonic() - began < 5.0
    message = str(info.value)
    _one_line_naming(message, fake.url)
    assert "more than 50000 series ([source] max_series)" in message
    assert len(fake.seen) <= 3  # resolutions, scrape interval, γ values: nothing after


def test_series_whose_key_is_written_with_escapes_are_counted_too(fake):
    # "\u006detric" is "metric" to a JSON reader but not to a byte count
    body = _many_gammas(60)(None, 'count_values("gamma"', None).replace(b'"metric"', b'"\\u006detric"')
    fake.answer = lambda path, expr, form: body if expr.startswith('count_values("gamma"') else healthy(path, expr, form)
    with pytest.raises(PrometheusError) as info:
        _window(fake, max_series=50)
    _one_line_naming(str(info.value), fake.url)
    assert "60 series, more than 50" in str(info.value)


@pytest.mark.parametrize("result", [[7], [{"metric": {"gamma": "3"}, "values": [[END]]}],
                                    [{"metric": {"gamma": "3"}, "values": [[END, "many"]]}]])
def test_a_malformed_series_is_one_line_naming_the_server(fake, result):
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
    fake.answer = lambda path, expr, form: body if expr.startswith('count_values("gamma"') else healthy(path, expr, form)
    with pytest.raises(PrometheusError) as info:
        _window(fake)
    _one_line_naming(str(info.value), fake.url)


def test_max_series_is_a_source_setting(fake, tmp_path, capsys):
    from specdec.cli import tune_gamma_main

    fake.answer = _many_gammas(101)
    config = tmp_path / "specdec.toml"
    config.write_text(f'[source]\nkind = "prometheus"\nurl = "{fake.url}"\nmax_series = 100\n\n'
                      f"[routes.r]\nselector = '{SELECTOR}'\n")
    code = tune_gamma_main(["--route", "r", "--config", str(config), "--window", "1h", "--json"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "more than 100 series ([source] max_series)" in err and SELECTOR in err and "\n" not in err


def test_gamma_values_that_no_route_runs_are_refused(fake):
    def answer(path, expr, form):
        if expr.startswith('count_values("gamma"'):
            return [{"metric": {"gamma": "100000000"}, "values": [[END, "1"]]}]
        return healthy(path, expr, form)
    fake.answer = answer
    with pytest.raises(PrometheusError, match="gamma '100000000'") as info:
        _window(fake)
    _one_line_naming(str(info.value), fake.url)


# ----------------------------------------------------------------------------- repeated samples

def test_repeated_samples_are_merged_once_and_said_once(fake):
    """Each scrape twice with the same value: the interval is still 15 s (not 0, which made
    the hour one block), the block counts are counted once, and one note says so."""
    def answer(path, expr, form):
        if expr.startswith("vllm:spec_decode_num_drafts_total") and expr.endswith("]"):
            return _samples(repeat=2)
        if expr.startswith("sum by (position)"):
            return _block_counts(form) + _block_counts(form)  # every series twice
        return healthy(path, expr, form)
    fake.answer = answer
    window = _window(fake)
    assert window.scrape_interval_s == SCRAPE_S
    (segment,) = window.segments
    assert len(segment.intervals) == 80
    assert segment.total.drafts == 80 * BLOCK["drafts"]
    notes = [note for note in window.notes if "repeated" in note]
    assert len(notes) == 1, window.notes
    assert fake.url in notes[0] and SELECTOR in notes[0]


@pytest.mark.parametrize("where", ["samples", "block counts"])
def test_conflicting_values_at_one_time_are_refused(fake, where):
    def answer(path, expr, form):
        if where == "samples" and expr.startswith("vllm:spec_decode_num_drafts_total") and expr.endswith("]"):
            series = _samples()
            series[0]["values"].insert(1, [series[0]["values"][0][0], "7"])
            return series
        if where == "block counts" and expr.startswith("sum by (position)"):
            # a second "drafts" series (another label set) with other values
            return _block_counts(form) + [{"metric": {"position": "drafts", "instance": "dup"},
                                           "values": [[t, "100"] for t in _steps(form)][:-1]
                                           + [[_steps(form)[-1], "250"]]}]
        return healthy(path, expr, form)
    fake.answer = answer
    with pytest.raises(PrometheusError, match="two different values") as info:
        _window(fake)
    _one_line_naming(str(info.value), fake.url)


# ----------------------------------------------------------------------------- counts no engine produces

@pytest.mark.parametrize("block, relation", [
    # a block's slack: 1,024 drafts per engine (2 here), γ times that in tokens, and 0.1%
    ({**BLOCK, "drafts": 10**6, "draft_tokens": 3_040_000}, "3.04e+06 draft tokens in 1e+06 drafts of at most 3"),
    ({**BLOCK, "0": 3000, "accepted_tokens": 3070}, "accepted at position 0 of 100 drafts"),
])
def test_counts_no_engine_produces_are_refused_naming_the_source(fake, block, relation):
    fake.answer = lambda path, expr, form: (_block_counts(form, block) if expr.startswith("sum by (position)")
                                            else healthy(path, expr, form))
    with pytest.raises(PrometheusError) as info:
        prometheus_route_window(PrometheusSettings(fake.url), SELECTOR, START, END)
    message = str(info.value)
    _one_line_naming(message, fake.url)
    assert "counts no engine produces at gamma 3" in message and relation in message


def test_tune_gamma_names_prometheus_for_impossible_counts(fake, tmp_path, capsys):
    """Mean draft length 3.04 at γ 3 was refused deep in the model naming no source. Each
    block is within its slack (400 tokens over 3 × 10,000 drafts), the window is not
    (32,000 over, in increases that telescope: the slack does not add up over blocks)."""
    from specdec.cli import tune_gamma_main

    block = {**BLOCK, "drafts": 10_000, "draft_tokens": 30_400}
    fake.answer = lambda path, expr, form: (_block_counts(form, block) if expr.startswith("sum by (position)")
                                            else healthy(path, expr, form))
    config = tmp_path / "specdec.toml"
    config.write_text(f'[source]\nkind = "prometheus"\nurl = "{fake.url}"\n\n[routes.r]\nselector = \'{SELECTOR}\'\n')
    code = tune_gamma_main(["--route", "r", "--config", str(config), "--window", "1h", "--json"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert fake.url in err and SELECTOR in err and "2.432e+06 draft tokens in 800000 drafts of at most 3" in err


@pytest.mark.parametrize("status, body", [
    (502, b"<html>bad gateway</html>"),
    (200, b"not json"),
    (200, json.dumps({"status": "error", "errorType": "timeout", "error": "query timed out"}).encode()),
])
def test_every_error_names_the_server_and_the_selector(fake, status, body):
    def respond(handler):
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    fake.answer = lambda path, expr, form: respond
    with pytest.raises(PrometheusError) as info:
        _window(fake)
    _one_line_naming(str(info.value), fake.url)


def test_source_bounds_in_the_config():
    from specdec.config import ConfigError, config_from_mapping

    source = {"kind": "prometheus", "url": "http://127.0.0.1:9"}
    defaults = config_from_mapping({"source": source}, path=None).prometheus
    assert (defaults.timeout_s, defaults.max_series) == (10.0, 50_000)
    set_ = config_from_mapping({"source": {**source, "timeout": "2.5s", "max_series": 7}}, path=None).prometheus
    assert (set_.timeout_s, set_.max_series) == (2.5, 7)
    for bad in ({"timeout": "never"}, {"timeout": 0}, {"timeout": float("inf")}, {"max_series": 0},
                {"max_series": 1.5}, {"max_series": True}):
        with pytest.raises(ConfigError, match=r"\[source\] (timeout|max_series)"):
            config_from_mapping({"source": {**source, **bad}}, path=None)
