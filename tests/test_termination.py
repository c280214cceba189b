"""runner/termination.py: SIGTERM raises Interrupted outside the measuring loop, only sets the event inside it, and
leaves the last upload what remains of its budget."""

from __future__ import annotations

import signal

import pytest

from runner import termination
from runner.termination import Interrupted, Termination


def test_sigterm_outside_the_loop_raises_and_inside_only_sets_the_event():
    t = Termination()
    with t.flagging() as stop:
        t._handle(signal.SIGTERM, None)  # inside: no exception, the loop sees the event
        assert stop.is_set()
    with pytest.raises(Interrupted):
        t._handle(signal.SIGTERM, None)  # outside again: raises
    assert not isinstance(Interrupted(), Exception)  # so no `except Exception` on the way swallows it


def test_the_upload_gets_what_is_left_of_its_budget_and_at_least_a_second(monkeypatch):
    t, now = Termination(), [100.0]
    monkeypatch.setattr(termination.time, "monotonic", lambda: now[0])
    assert t.left() == termination.SIGTERM_UPLOAD_S  # no SIGTERM yet
    with t.flagging():
        t._handle(signal.SIGTERM, None)
    now[0] += 2.5
    with t.flagging():
        t._handle(signal.SIGTERM, None)  # a second SIGTERM does not restart the clock
    assert t.left() == pytest.approx(termination.SIGTERM_UPLOAD_S - 2.5)
    now[0] += 60
    assert t.left() == 1.0
