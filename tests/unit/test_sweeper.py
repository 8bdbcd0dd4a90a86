"""The local runtime's sweep schedule: every 30 s after activity, backing off to the stack's 5 minutes when idle."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from assetflow_dev.sweeper import Sweeper, found_nothing, next_interval


def test_a_quiet_sweep_sets_the_idle_cadence_and_activity_resets_it() -> None:
    waits = [30.0]
    for _ in range(3):
        waits.append(next_interval(waits[-1], base=30, idle=300, quiet=True))
    assert waits == [30, 300, 300, 300]
    assert next_interval(300, base=30, idle=300, quiet=False) == 30


def test_a_sweep_that_repaired_saw_in_flight_runs_erred_or_failed_is_not_quiet() -> None:
    clean = {"repaired": 0, "in_flight": 0, "errors": []}
    assert found_nothing(clean)
    assert not found_nothing({**clean, "repaired": 1})
    assert not found_nothing({**clean, "in_flight": 2})
    assert not found_nothing({**clean, "errors": ["run r: boom"]})
    assert not found_nothing(None)  # the invocation failed


def test_an_idle_runtime_is_swept_less_often_and_activity_brings_the_pace_back() -> None:
    # Given a sweeper every 20 ms, backing off to 160 ms, whose runtime does nothing at first
    sweeps: list[float] = []
    activity = {"n": 0}

    def sweep(_: dict[str, Any]) -> dict[str, Any]:
        sweeps.append(time.monotonic())
        return {"repaired": 0, "in_flight": 0, "errors": []}

    sweeper = Sweeper(sweep, interval=0.02, idle_interval=0.16, activity=lambda: activity["n"])
    sweeper.start()
    try:
        time.sleep(0.9)
        idle = len(sweeps)
        gaps = [b - a for a, b in itertools.pairwise(sweeps)]
        # Then the gaps grew to the idle cadence: far fewer sweeps than 0.9 s / 20 ms
        assert 3 <= idle <= 12, sweeps
        assert max(gaps) >= 0.15
        # When a function runs, the next sweeps come at the base pace again
        stop = threading.Event()

        def busy() -> None:
            while not stop.is_set():
                activity["n"] += 1
                time.sleep(0.005)

        worker = threading.Thread(target=busy)
        worker.start()
        time.sleep(0.6)
        stop.set()
        worker.join()
        assert len(sweeps) - idle >= 6, sweeps
    finally:
        sweeper.stop()
