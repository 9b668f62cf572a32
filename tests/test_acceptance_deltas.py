"""acceptance.store.deltas: every rule of a counter's increase, and its events, without SQLite."""

from __future__ import annotations

import numpy as np
import pytest

from acceptance.store.deltas import (CLOCK_SLACK_S, SpecSample, counter_increase, itl_increase, spec_increase,
                                     spec_off_event)


def v(*x):
    return np.array(x, dtype=float)


def step(prev_gamma, prev_created, prev_value, gamma, created, value, *, first_sighting=False, times=(10.0, 25.0)):
    """spec_increase from a sample at times[0] to one at times[1] (None: a first sighting)."""
    prev = None if first_sighting else SpecSample(times[0], prev_gamma, prev_created, prev_value)
    return spec_increase(prev, SpecSample(times[1], gamma, created, value))


PREV = v(100, 300, 200, 90, 70, 40)  # D, T, A, A_1..A_3 at γ 3


def test_the_first_sighting_is_a_baseline_only():
    inc = step(None, None, None, 3, 5.0, PREV, first_sighting=True)
    assert inc.delta is None
    assert inc.new_segment
    assert not inc.restart
    assert inc.events == ()


def test_an_ordinary_interval_is_new_minus_previous():
    inc = step(3, 5.0, PREV, 3, 5.0, PREV + v(10, 30, 20, 9, 7, 4))
    np.testing.assert_array_equal(inc.delta, v(10, 30, 20, 9, 7, 4))
    assert not inc.new_segment
    assert not inc.restart
    assert inc.events == ()


def test_columns_the_previous_sample_lacked_are_unknown():
    with_drafts = np.concatenate([PREV + 5, v(100, 95, 90)])  # drafts per position appear
    inc = step(3, None, PREV, 3, None, with_drafts)
    np.testing.assert_array_equal(inc.delta[:6], np.full(6, 5.0))
    assert np.isnan(inc.delta[6:]).all()


def test_a_changed_created_is_a_restart_and_the_new_value_counts_whole():
    new = PREV + 1  # counters even went up: _created alone says it restarted
    inc = step(3, 5.0, PREV, 3, 6.0, new)
    np.testing.assert_array_equal(inc.delta, new)
    assert inc.restart
    assert not inc.new_segment
    assert inc.events == (("restart", "restarted: its _created time changed"),)


def test_a_counter_that_went_down_is_a_restart():
    new = v(5, 15, 10, 4, 3, 3)
    inc = step(3, None, PREV, 3, None, new)  # multiprocess: no _created
    np.testing.assert_array_equal(inc.delta, new)
    assert inc.restart
    assert inc.events == (("restart", "restarted: a counter went down"),)
    # one position going down is enough
    one = PREV.copy()
    one[5] -= 1
    assert step(3, None, PREV, 3, None, one).restart


def test_a_gamma_change_is_a_restart_and_a_new_segment_even_when_nothing_went_down():
    new = v(150, 700, 400, 130, 110, 80, 60, 50)  # γ 5, every common counter higher
    inc = step(3, None, PREV, 5, None, new)
    np.testing.assert_array_equal(inc.delta, new)
    assert inc.restart
    assert inc.new_segment
    assert inc.events == (("restart", "restarted: its gamma changed"), ("gamma_change", "gamma 3 -> 5"))
    # a γ change with a drop says why first: the drop
    down = step(3, None, PREV, 2, None, v(1, 2, 1, 1, 0))
    assert [k for k, _ in down.events] == ["restart", "gamma_change"]
    assert "went down" in down.events[0][1]


def test_speculation_switched_off_and_back_on():
    assert spec_off_event()[0] == "spec_off"
    back = v(3, 9, 6, 3, 2, 1)
    inc = step(0, None, None, 3, None, back)  # the previous sample had none
    np.testing.assert_array_equal(inc.delta, back)
    assert inc.new_segment
    assert not inc.restart
    assert inc.events == (("spec_on", "speculation on, gamma 3"),)


@pytest.mark.parametrize("prev,new,restart,expected", [
    (v(1, 2), v(3, 5), False, v(2, 3)),       # new − previous
    (v(1, 2), v(3, 5), True, v(3, 5)),        # the engine restarted: whole
    (v(4, 2), v(3, 5), False, v(3, 5)),       # its own drop: whole
    (None, v(3, 5), False, None),             # nothing to compare with
    (None, v(3, 5), True, v(3, 5)),           # restarted, nothing before: whole
])
def test_counter_increase(prev, new, restart, expected):
    got = counter_increase(prev, new, restart)
    if expected is None:
        assert got is None
    else:
        np.testing.assert_array_equal(got, expected)


def test_itl_increase_needs_both_samples_unless_restarted():
    assert itl_increase(1.0, 10, 1.5, 14, False, seen_before=True) == (0.5, 4.0)
    assert itl_increase(1.0, 10, 0.2, 2, False, seen_before=True) == (0.2, 2.0)  # reset
    assert itl_increase(None, None, 1.5, 14, False, seen_before=True) == (None, None)
    assert itl_increase(None, None, 1.5, 14, True, seen_before=True) == (1.5, 14.0)
    assert itl_increase(1.0, 10, 1.5, 14, False, seen_before=False) == (None, None)  # a first sighting
    assert itl_increase(1.0, 10, None, 14, False, seen_before=True) == (None, None)  # no ITL on the page


def test_a_bulk_history_takes_the_ordinary_rule_and_refuses_a_restart():
    from acceptance.store.deltas import history_increase

    cum = np.array([PREV, PREV + 2, PREV + 5])
    np.testing.assert_array_equal(history_increase(cum), [np.full(6, 2.0), np.full(6, 3.0)])
    for prev, new in zip(cum[:-1], cum[1:]):  # the same as the write path's rule, sample by sample
        np.testing.assert_array_equal(step(3, None, prev, 3, None, new).delta,
                                      new - prev)
    with pytest.raises(ValueError, match="restart"):
        history_increase(np.array([PREV, PREV - 1]))


def test_a_created_that_went_back_is_another_life_not_a_restart():
    """A new life cannot begin before the old one: counters that kept rising under an older
    _created are refused, not counted whole again (drafts 21,000 stored against 12,000 true)."""
    new = PREV + v(10, 30, 20, 9, 7, 4)
    inc = step(3, 1000.0, PREV, 3, 900.0, new, times=(2000.0, 2015.0))
    assert inc.refused and inc.other_life and inc.delta is None and not inc.restart
    assert "went back" in inc.refused and "more than one engine" in inc.refused


def test_a_created_after_the_old_one_but_before_its_last_scrape_is_another_life():
    """The life was running while the other answered at the previous scrape: not a restart;
    within the clocks' slack it is one."""
    new = PREV + 1
    inc = step(3, 1000.0, PREV, 3, 1500.0, new, times=(2000.0, 2015.0))
    assert inc.other_life and "before the previous scrape" in inc.refused
    restart = step(3, 1000.0, PREV, 3, 2000.0 - CLOCK_SLACK_S / 2, new, times=(2000.0, 2015.0))
    assert restart.restart and not restart.refused
