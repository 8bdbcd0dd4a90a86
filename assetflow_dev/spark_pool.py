"""Warm PySpark drivers for the local Spark launcher: SparkSessions started ahead of the jobs that use them.

A cold ``spark-submit`` spends most of a small job's time starting the JVM and the SparkSession. A
``SparkPool`` keeps ``size`` driver processes (``_spark_worker.py``) ready, each with its session created
(the master, the local Spark settings, the ``--py-files`` zip added) and waiting for one job on a loopback
socket. ``acquire`` hands out a ready driver; ``WarmDriver.offer`` gives it the job. A driver runs one job
and exits, as a spark-submit would, and the pool starts a replacement in the background; a driver that
cannot apply a job's Spark settings at runtime refuses it and stays ready (the caller runs that job cold).

Each driver is its own process group, started and reaped by a thread that lives as long as the driver (its
parent-death signal fires when that thread ends; see ``processes.spawn``). Its own output goes to
``work_dir/<name>.log`` until it takes a job, and it works in ``work_dir/<name>/`` (Spark's warehouse and
metastore files go there), so every job still has a folder of its own.

With ``idle_stop`` the pool stops its ready drivers once none was asked for in that many seconds, as EMR
Serverless stops an idle application (``autoStopConfiguration``): an idle runtime then keeps no JVM busy. The
next ``acquire`` starts them again and waits for one, as the first job after an auto-stop waits for the
application to start.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import secrets
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assetflow_dev import processes
from assetflow_dev._spark_worker import SETTINGS_ENV

logger = logging.getLogger(__name__)

#: The driver's program, started as a script: it imports nothing of assetflow.
WORKER_SCRIPT = Path(__file__).with_name("_spark_worker.py")
#: Start failures in a row after which the pool starts no more drivers (the jobs then run cold).
MAX_START_FAILURES = 3
#: How long a driver may take to answer a job offer (it only asks its JVM about the job's settings).
OFFER_TIMEOUT = 60.0
#: How long a driver that closed its connection without a report may take to exit.
EXIT_WAIT = 30.0
_ACCEPT_POLL = 0.5
#: The local runtime's default idle stop: the dev environment's EMR application stops after 5 idle minutes.
WARM_IDLE_STOP_SECONDS = 300.0


class WarmDriverError(Exception):
    """A warm driver could not take a job; the caller runs it cold."""


class WarmJobRefusedError(WarmDriverError):
    """The driver cannot apply some of the job's Spark settings at runtime; it stays ready for another job."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(keys)
        super().__init__(f"not runtime SQL settings: {', '.join(self.keys)}")


class WarmDriverLostError(WarmDriverError):
    """The driver died, or broke the protocol, before it accepted the job."""


@dataclass(frozen=True)
class WarmJob:
    """What a warm driver needs to run one job as spark-submit would."""

    entry_point: Path
    #: EMR's ``entryPointArguments`` (``sys.argv[1:]``).
    arguments: Sequence[str]
    env: Mapping[str, str]
    log_path: Path
    #: The job's own Spark settings (applied as runtime SQL settings over the pool's).
    spark_conf: Mapping[str, str]
    #: The job's own py-files, after the pool's zip.
    py_files: Sequence[str] = ()
    #: Written to the log before any output of the job.
    log_header: str = ""


@dataclass(frozen=True)
class WarmOutcome:
    """How a job on a warm driver ended: its exit status (the driver's) and a one-line summary of a failure."""

    status: int
    summary: str


class WarmDriver:
    """One driver process of a ``SparkPool``, from its start until it exits."""

    def __init__(self, pool: SparkPool, name: str) -> None:
        self.pool = pool
        self.name = name
        self.folder = pool.work_dir / name
        self.log_path = pool.work_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        #: starting, idle, reserved (handed out by acquire), busy (running a job), stopping (the pool stopped
        #: it after its idle time) or exited.
        self.state = "starting"
        self.ready_at: float | None = None
        self._sock: socket.socket | None = None
        self._reader: Any = None
        self._exited = threading.Event()

    @property
    def pid(self) -> int:
        """The driver's process id (its process group's too)."""
        if self.process is None:
            raise RuntimeError(f"warm driver {self.name} was never started")
        return self.process.pid

    def offer(self, job: WarmJob, timeout: float = OFFER_TIMEOUT) -> None:
        """Give the driver a job; from here on the job runs, and the pool starts a replacement driver.

        Raises:
            WarmJobRefusedError: some of the job's settings are not runtime SQL settings; the driver is
                back in the pool.
            WarmDriverLostError: the driver died or did not answer; it is stopped.
        """
        message = {
            "type": "job",
            "entry_point": str(job.entry_point),
            "argv": list(job.arguments),
            "env": dict(job.env),
            "log_path": str(job.log_path),
            "spark_conf": dict(job.spark_conf),
            "py_files": list(job.py_files),
            "log_header": job.log_header,
        }
        try:
            self._send(message)
            answer = self._receive(timeout)
        except (OSError, ValueError) as exc:
            self.kill()
            raise WarmDriverLostError(f"warm driver {self.name} lost: {exc}") from exc
        kind = answer.get("type") if answer is not None else None
        if kind == "refused" and answer is not None:
            keys = [str(key) for key in answer.get("keys", [])]
            self.pool._refused(self, {key: str(job.spark_conf.get(key)) for key in keys})
            raise WarmJobRefusedError(keys)
        if kind != "accepted":
            self.kill()
            raise WarmDriverLostError(f"warm driver {self.name} answered {answer!r} to a job offer")
        self.pool._consumed(self)

    def result(self, timeout: float) -> WarmOutcome | None:
        """Wait for the outcome of the job the driver accepted; None when ``timeout`` seconds passed first.

        The driver reports once the job's code, threads and exit hooks are done, before its JVM shuts down.
        A driver that ends without a report (killed, or ``os._exit``) has its exit status as the outcome.
        """
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                try:
                    message = self._receive(remaining)
                except TimeoutError:
                    return None
                except (OSError, ValueError):
                    message = None
                if message is None:
                    self._exited.wait(min(remaining, EXIT_WAIT))
                    status = self.process.returncode if self.process is not None else None
                    return WarmOutcome(status=-1 if status is None else int(status), summary="")
                if message.get("type") == "finished":
                    return WarmOutcome(
                        status=int(message["status"]), summary=str(message.get("summary") or "")
                    )
        finally:
            self._disconnect()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the driver process (its JVM stopped) has exited; return whether it has."""
        return self._exited.wait(timeout)

    def kill(self, timeout: float = 5.0) -> None:
        """Stop the driver's process group (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        if self.process is not None:
            processes.terminate(self.process, timeout=timeout)

    # ---- the protocol ------------------------------------------------------------------------------

    def _attach(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")

    def _send(self, message: Mapping[str, Any]) -> None:
        if self._sock is None:
            raise OSError("not connected")
        self._sock.settimeout(OFFER_TIMEOUT)
        self._sock.sendall(json.dumps(message).encode() + b"\n")

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        if self._sock is None:
            raise OSError("not connected")
        self._sock.settimeout(timeout)
        line = self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError(f"not a message: {line[:200]!r}")
        return message

    def _disconnect(self) -> None:
        for closable in (self._reader, self._sock):
            if closable is not None:
                with contextlib.suppress(OSError):
                    closable.close()


class SparkPool:
    """Keeps ``size`` warm PySpark drivers ready; each runs one job, then a replacement starts.

    ``python`` runs ``_spark_worker.py`` with ``env`` (the jobs' environment) in a folder of ``work_dir``;
    the driver's session gets ``master``, ``spark_conf`` and ``py_files`` as spark-submit would give them.
    With ``warm_up`` a driver runs a small job before it says it is ready (a driver's first job costs
    seconds more than the next ones). A driver that is not ready within ``start_timeout`` seconds is
    stopped; after ``MAX_START_FAILURES`` failed starts in a row the pool starts no more (``acquire`` then
    returns None). With ``idle_stop`` (seconds), ready drivers that nobody asked for in that long are stopped
    until the next ``acquire`` (see the module's docstring).
    """

    def __init__(
        self,
        *,
        size: int,
        python: str,
        master: str,
        spark_conf: Mapping[str, str],
        py_files: Sequence[str],
        env: Mapping[str, str],
        work_dir: Path,
        app_name: str = "assetflow-warm-driver",
        start_timeout: float = 300.0,
        warm_up: bool = True,
        idle_stop: float | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"a Spark pool needs at least one driver, got {size}")
        if idle_stop is not None and idle_stop <= 0:
            raise ValueError(f"idle_stop must be a positive number of seconds or None, got {idle_stop}")
        self.size = size
        self.python = python
        self.master = master
        self.spark_conf = dict(spark_conf)
        self.py_files = [str(path) for path in py_files]
        self.env = dict(env)
        self.work_dir = Path(work_dir)
        self.app_name = app_name
        self.start_timeout = start_timeout
        self.warm_up = warm_up
        self.idle_stop = idle_stop
        self._cond = threading.Condition()
        #: The drivers were stopped for being idle: none starts until the next acquire.
        self._stopped_idle = False
        #: When a driver was last asked for or a job last ended (what the idle stop counts from).
        self._last_used = time.monotonic()
        self._closed = False
        self._failures = 0
        self._drivers: list[WarmDriver] = []
        self._idle: list[WarmDriver] = []
        self._threads: list[threading.Thread] = []
        #: Callers of acquire waiting for a driver.
        self._waiting = 0
        self._names = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        #: Settings (key, value) some driver refused: jobs with them go cold without asking a driver again.
        self._refused_settings: set[tuple[str, str]] = set()
        with self._cond:
            self._fill()
        self._idle_watch: threading.Thread | None = None
        if idle_stop is not None:
            self._idle_watch = threading.Thread(
                target=self._stop_when_idle, args=(idle_stop,), name="warm-idle-stop", daemon=True
            )
            self._idle_watch.start()

    # ---- for the launcher --------------------------------------------------------------------------

    def acquire(self) -> WarmDriver | None:
        """A ready driver, reserved for the caller; None when no driver is ready or coming for this caller.

        With no driver ready, the caller waits for a starting driver (or a reserved one, which either comes
        back or makes way for a replacement) that no earlier caller waits for; when there is none, it gets
        None at once (its job had better run cold than wait for a driver another job will take). The caller
        must ``offer`` the driver a job (which either consumes it or puts it back) or ``release`` it.
        """
        with self._cond:
            if self._closed:
                return None
            self._last_used = time.monotonic()
            if self._stopped_idle:
                logger.info("warm drivers starting again after their idle stop", extra={"drivers": self.size})
                self._stopped_idle = False
                self._fill()
                self._cond.notify_all()
            if self._idle:
                return self._reserve()
            if self._waiting >= self._coming():
                return None
            self._waiting += 1
            try:
                while True:
                    self._cond.wait()
                    if self._closed:
                        return None
                    if self._idle:
                        return self._reserve()
                    if self._waiting > self._coming():
                        return None
            finally:
                self._waiting -= 1

    def release(self, driver: WarmDriver) -> None:
        """Put a reserved driver back among the ready ones."""
        with self._cond:
            if driver.state == "reserved":
                driver.state = "idle"
                self._idle.append(driver)
                self._cond.notify_all()

    def refused_settings(self, spark_conf: Mapping[str, str]) -> list[str]:
        """The keys of the settings among ``spark_conf`` that a driver already refused (such a job goes cold)."""
        with self._cond:
            return sorted(key for key, value in spark_conf.items() if (key, value) in self._refused_settings)

    def counts(self) -> dict[str, int]:
        """How many drivers are starting, idle (ready), reserved and busy (running a job)."""
        counts = {"starting": 0, "idle": 0, "reserved": 0, "busy": 0}
        with self._cond:
            for driver in self._drivers:
                if driver.state in counts:  # a stopping driver is on its way out
                    counts[driver.state] += 1
        return counts

    def wait_ready(self, count: int | None = None, timeout: float | None = None) -> bool:
        """Wait until ``count`` drivers (default: the pool's size) are ready; False on timeout or when closed."""
        wanted = self.size if count is None else count
        with self._cond:
            self._cond.wait_for(lambda: self._closed or len(self._idle) >= wanted, timeout)
            return not self._closed and len(self._idle) >= wanted

    def close(self, timeout: float = 10.0) -> None:
        """Start no more drivers and stop every driver still running (busy ones too); idempotent."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            drivers = list(self._drivers)
            self._idle.clear()
            self._cond.notify_all()
        for driver in drivers:
            driver.kill(timeout=max(0.1, deadline - time.monotonic()))
        for thread in [*self._threads, *([self._idle_watch] if self._idle_watch else [])]:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    # ---- internals ---------------------------------------------------------------------------------

    def _reserve(self) -> WarmDriver:
        driver = self._idle.pop(0)
        driver.state = "reserved"
        return driver

    def _coming(self) -> int:
        """Drivers that are not ready but will be, or will make way for one that will."""
        return sum(1 for d in self._drivers if d.state in ("starting", "reserved"))

    def _refused(self, driver: WarmDriver, settings: Mapping[str, str]) -> None:
        with self._cond:
            self._refused_settings.update(settings.items())
        self.release(driver)

    def _consumed(self, driver: WarmDriver) -> None:
        with self._cond:
            driver.state = "busy"
            self._fill()

    def _fill(self) -> None:
        """Start drivers until ``size`` are starting or ready (under the lock)."""
        if self._closed or self._stopped_idle or self._failures >= MAX_START_FAILURES:
            return
        waiting = sum(1 for d in self._drivers if d.state in ("starting", "idle", "reserved"))
        for _ in range(self.size - waiting):
            driver = WarmDriver(self, f"driver-{self._prefix}-{next(self._names):03d}")
            self._drivers.append(driver)
            # One thread per driver, for its whole life: the driver's parent-death signal is tied to it.
            thread = threading.Thread(
                target=self._life, args=(driver,), name=f"warm-{driver.name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _stop_when_idle(self, idle_stop: float) -> None:
        """Stop the ready drivers once none was asked for in ``idle_stop`` seconds (the pool's watch thread).

        It sleeps until then, or until the drivers change (a job starts or ends); none is stopped while one is
        starting, reserved or busy, and none starts again before the next ``acquire``.
        """
        while True:
            with self._cond:
                if self._closed:
                    return
                due = self._last_used + idle_stop - time.monotonic()
                settled = bool(self._drivers) and all(d.state == "idle" for d in self._drivers)
                if self._stopped_idle or not settled:
                    self._cond.wait()  # a driver's change or an acquire wakes it
                    continue
                if due > 0:
                    self._cond.wait(due)
                    continue
                stopping = list(self._idle)
                self._idle.clear()
                for driver in stopping:
                    driver.state = "stopping"
                self._stopped_idle = True
            logger.info(
                "warm drivers stopped after their idle time; the next run starts one",
                extra={"drivers": len(stopping), "idle_seconds": idle_stop},
            )
            for driver in stopping:
                driver.kill()

    def _life(self, driver: WarmDriver) -> None:
        try:
            ready = self._bring_up(driver)
        except Exception:  # a driver that cannot start must not take the pool down
            logger.exception("warm driver start crashed", extra={"driver": driver.name})
            ready = False
        if driver.process is not None:
            driver.process.wait()
            processes.terminate(driver.process, timeout=1.0)  # what is left of its group; unregisters it
        if driver.state != "busy":  # a busy driver's connection is its job's, closed by result()
            driver._disconnect()
        with self._cond:
            was = driver.state
            if was == "busy":
                self._last_used = time.monotonic()  # a job just ended: the idle time counts from here
            driver.state = "exited"
            driver._exited.set()
            if driver in self._idle:
                self._idle.remove(driver)
            self._drivers.remove(driver)
            self._threads = [t for t in self._threads if t is not threading.current_thread()]
            failed = not ready and not self._closed
            if failed:
                self._failures += 1
                logger.warning(
                    "warm driver failed to start",
                    extra={
                        "driver": driver.name,
                        "log": str(driver.log_path),
                        "failures": self._failures,
                        "output": processes.log_tail(driver.log_path, 5),
                    },
                )
                if self._failures >= MAX_START_FAILURES:
                    logger.error("warm drivers keep failing to start: jobs run cold", extra=self._counts())
            elif was in ("idle", "reserved") and not self._closed:
                logger.warning("warm driver exited while idle", extra={"driver": driver.name})
            self._fill()
            self._cond.notify_all()
        if was != "busy":
            # A driver that never ran a job leaves nothing worth keeping, unless it failed to start.
            shutil.rmtree(driver.folder, ignore_errors=True)
            if not failed:
                driver.log_path.unlink(missing_ok=True)

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for driver in self._drivers:
            counts[driver.state] = counts.get(driver.state, 0) + 1
        return counts

    def _bring_up(self, driver: WarmDriver) -> bool:
        """Start the driver and wait until it says it is ready; return whether it did."""
        token = secrets.token_hex(16)
        driver.folder.mkdir(parents=True, exist_ok=True)
        with socket.create_server((processes.LOOPBACK, 0)) as listener:
            listener.settimeout(_ACCEPT_POLL)
            settings = {
                "address": [processes.LOOPBACK, listener.getsockname()[1]],
                "token": token,
                "master": self.master,
                "conf": self.spark_conf,
                "py_files": self.py_files,
                "app_name": self.app_name,
                "warm_up": self.warm_up,
            }
            began = time.monotonic()
            with self._cond:
                if self._closed:
                    return False
                driver.process = processes.spawn(
                    [self.python, str(WORKER_SCRIPT)],
                    log_path=driver.log_path,
                    env=self.env | {SETTINGS_ENV: json.dumps(settings)},
                    cwd=driver.folder,
                )
            while True:
                if self._closed or driver.process.poll() is not None:
                    return False
                if time.monotonic() - began > self.start_timeout:
                    logger.warning(
                        "warm driver not ready in time, stopping it",
                        extra={"driver": driver.name, "timeout": self.start_timeout},
                    )
                    driver.kill()
                    return False
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                if self._greeted(driver, sock, token):
                    break
        with self._cond:
            if self._closed:
                return False
            driver.state = "idle"
            driver.ready_at = time.monotonic()
            self._idle.append(driver)
            self._failures = 0
            self._cond.notify_all()
        logger.info(
            "warm driver ready",
            extra={"driver": driver.name, "pid": driver.pid, "seconds": round(time.monotonic() - began, 1)},
        )
        return True

    @staticmethod
    def _greeted(driver: WarmDriver, sock: socket.socket, token: str) -> bool:
        """Whether the connection is the driver's own ready message (anything else is dropped)."""
        driver._attach(sock)
        try:
            hello = driver._receive(10.0)
        except (OSError, ValueError):
            hello = None
        if (
            hello is not None
            and hello.get("type") == "ready"
            and secrets.compare_digest(str(hello.get("token")), token)
        ):
            return True
        driver._disconnect()
        driver._sock = driver._reader = None
        return False


__all__ = [
    "MAX_START_FAILURES",
    "SparkPool",
    "WarmDriver",
    "WarmDriverError",
    "WarmDriverLostError",
    "WarmJob",
    "WarmJobRefusedError",
    "WarmOutcome",
]
