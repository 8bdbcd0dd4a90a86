"""The local runtime's reconciliation schedule: the sweep function every ``interval``, as the stack's rule runs it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

#: Locally the sweep runs every 30 s (5 minutes on AWS): a local run's lost state change is repaired soon.
LOCAL_SWEEP_SECONDS = 30.0


class Sweeper:
    """Invokes the reconcile function with ``{}`` every ``interval`` seconds on a daemon thread."""

    def __init__(
        self,
        invoke: Callable[[dict[str, Any]], Any],
        *,
        interval: float = LOCAL_SWEEP_SECONDS,
        observe: Callable[[str], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("the sweep interval must be positive")
        self._invoke = invoke
        self.interval = interval
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
        while not self._stop.wait(self.interval):
            try:
                self.sweep_once()
            except Exception:
                logger.exception("sweep failed; the next one tries again")
