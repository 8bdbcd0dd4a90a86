"""The local runtime's reconciliation schedule: the sweep function every ``interval``, as the stack's rule runs it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: Locally the sweep runs every 30 s (5 minutes on AWS): a local run's lost state change is repaired soon.
LOCAL_SWEEP_SECONDS = 30.0
#: While nothing happens (no function ran, the last sweep found nothing), the interval is the stack's own
#: cadence: an idle runtime does not read every run index twice a minute.
IDLE_SWEEP_SECONDS = 300.0


def next_interval(current: float, *, base: float, idle: float, quiet: bool) -> float:
    """The wait before the next sweep: ``base`` after any activity, ``idle`` (the stack's cadence) once quiet.

    Quiet: no function ran since the last sweep, which found nothing to repair and nothing in flight. Then
    nothing the sweep reads changed but through writers outside the runtime, which the stack's sweep would
    not see sooner either.
    """
    return max(idle, base) if quiet else base


def found_nothing(report: dict[str, Any] | None) -> bool:
    """Whether a sweep's report shows nothing to repair, nothing in flight and no error."""
    return (
        report is not None
        and not report.get("repaired")
        and not report.get("in_flight")
        and not report.get("errors")
    )


class Sweeper:
    """Invokes the reconcile function with ``{}`` every ``interval`` seconds on a daemon thread.

    ``activity`` (a count of the runtime's function invocations): once it stays the same and a sweep finds
    nothing, the interval is ``idle_interval`` until a function runs again (see ``next_interval``).
    """

    def __init__(
        self,
        invoke: Callable[[dict[str, Any]], Any],
        *,
        interval: float = LOCAL_SWEEP_SECONDS,
        idle_interval: float = IDLE_SWEEP_SECONDS,
        activity: Callable[[], int] | None = None,
        observe: Callable[[str], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("the sweep interval must be positive")
        self._invoke = invoke
        self.interval = interval
        self.idle_interval = idle_interval
        self._activity = activity
        self._observe = observe or (lambda line: None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sweeps = 0
        self.repaired = 0

    def start(self) -> None:
        """Sweep every interval until ``stop``."""
        self._thread = threading.Thread(target=self._loop, name="sweeper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop sweeping (a sweep in progress finishes); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def sweep_once(self) -> dict[str, Any] | None:
        """One sweep now; its report (None when the invocation failed, kept by its on-failure queue)."""
        report = self._invoke({})
        self.sweeps += 1
        if isinstance(report, dict):
            repaired = int(report.get("repaired") or 0)
            self.repaired += repaired
            if repaired:
                what = ", ".join(
                    f"{len(v)} {k.replace('_', ' ')}" for k, v in sorted((report.get("runs") or {}).items())
                )
                self._observe(f"reconcile: repaired {repaired} run(s) ({what})")
            return report
        return None

    def _loop(self) -> None:
        wait = self.interval
        seen = self._activity() if self._activity else None
        while not self._stop.wait(wait):
            report = None
            try:
                report = self.sweep_once()
            except Exception:
                logger.exception("sweep failed; the next one tries again")
            now = self._activity() if self._activity else None
            quiet = seen is not None and now == seen and found_nothing(report)
            seen = now
            wait = next_interval(wait, base=self.interval, idle=self.idle_interval, quiet=quiet)
