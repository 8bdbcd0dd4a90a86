"""A warm PySpark driver: started ahead of time by the local Spark launcher's pool, it runs ONE job and exits.

``assetflow_dev.spark_pool`` starts this file as ``python _spark_worker.py`` in the jobs' environment, with
its settings (JSON) in the variable ``ASSETFLOW_WARM_DRIVER``: the pool's address and this driver's token,
the master, the Spark settings and the ``--py-files`` zip. The driver creates its SparkSession (the JVM's
output relayed into the driver's log), connects to the pool and says it is ready, then waits for one job.

A job names its entry point, its arguments (EMR's ``entryPointArguments``), its environment, its log file,
its Spark settings and its own py-files. The driver refuses a job with a setting that is not a runtime SQL
setting and not already in effect (the launcher then runs it with a cold spark-submit) and stays ready. It
accepts any other job: it sends its output and the JVM's to the job's log, applies the settings, sets
``sys.argv``, ``os.environ`` and ``sys.path`` as spark-submit would, and runs the entry point as
``__main__``. The exit status is the job's: 0 when it returns or raises ``SystemExit(0)``, else not 0.
Once the job's threads and exit hooks are done, the driver sends the pool that status and a one-line
summary, then stops its JVM (Spark's shutdown hooks clean up as after spark-submit) and ends: no state
outlives a job.

Standalone on purpose: the standard library and pyspark only, so that a job imports ``spark_jobs`` and
``assetflow_job`` from the py-files zip, as under spark-submit, and never from this process's own imports.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import json
import os
import runpy
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

#: The environment variable that carries a starting driver's settings (removed before anything runs).
SETTINGS_ENV = "ASSETFLOW_WARM_DRIVER"
#: How long the JVM may take to shut down once the job's Python code is done.
JVM_EXIT_SECONDS = 60.0
#: How long the JVM may take to run its shutdown hooks when the driver is told to stop (SIGTERM).
JVM_STOP_SECONDS = 10.0
#: Lines of an exception's text in the summary sent to the pool.
SUMMARY_LINES = 3


class _Relay:
    """Copies the JVM's output to a sink file descriptor: the driver's own log, then the job's."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        #: The driver's own log (its stderr when it started).
        self.own_fd = os.dup(2)
        self.sink = self.own_fd
        self._thread = threading.Thread(target=self._copy, name="warm-driver-jvm-output", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        with contextlib.suppress(OSError):
            while data := os.read(self.read_fd, 65536):
                view = memoryview(data)
                while view:
                    view = view[os.write(self.sink, view) :]

    def close_write_end(self) -> None:
        """Leave the pipe's write end to the JVM alone, so that its exit ends the relay."""
        os.close(self.write_fd)

    def join(self, timeout: float) -> None:
        """Wait until the JVM's last output is copied."""
        self._thread.join(timeout)


class _Channel:
    """JSON lines over the socket to the pool."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")

    def send(self, **message: Any) -> None:
        self._sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any] | None:
        line = self._reader.readline()
        if not line:
            return None
        message: dict[str, Any] = json.loads(line)
        return message


def _start_session(settings: Mapping[str, Any], output_fd: int) -> tuple[Any, Any]:
    """Create the SparkSession as spark-submit would; return it and the py4j gateway (its JVM process)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    conf = SparkConf().setMaster(settings["master"]).setAppName(settings["app_name"])
    for key, value in settings["conf"].items():
        conf.set(key, value)
    # pyspark's documented hook for where the JVM's output goes (launch_gateway has no annotations).
    gateway = launch_gateway(  # type: ignore[no-untyped-call]
        conf, popen_kwargs={"stdout": output_fd, "stderr": output_fd}
    )
    SparkContext(conf=conf, gateway=gateway, pyFiles=list(settings["py_files"]))
    spark = SparkSession.builder.getOrCreate()
    if settings["warm_up"]:
        _warm_up(spark)
    return spark, gateway


def _warm_up(spark: Any) -> None:
    """Run a first small job: a new driver's first job costs seconds (class loading, code generation, tasks).

    Like the jobs, it makes a DataFrame of Python rows (which starts Spark's Python workers), shuffles,
    and writes and reads Parquet, in this driver's folder (deleted afterwards).
    """
    folder = os.path.abspath("warm-up.parquet")  # not "_..." nor ".…": Spark skips those as hidden
    rows = spark.createDataFrame([(i, f"k{i % 4}") for i in range(64)], "id INT, key STRING")
    rows.groupBy("key").count().write.mode("overwrite").parquet(folder)
    spark.read.parquet(folder).count()
    shutil.rmtree(folder, ignore_errors=True)


def _refused_settings(spark: Any, settings: Mapping[str, str]) -> list[str]:
    """The settings this session cannot take: not runtime SQL settings, and not already so since its start.

    Spark refuses static SQL settings and its core settings at runtime; other keys it would take, with no
    effect on the driver (``spark.default.parallelism``, ``spark.hadoop.*``): those go cold too.
    """
    started_with = spark.sparkContext.getConf()
    return [
        key
        for key, value in settings.items()
        if not spark.conf.isModifiable(key) and started_with.get(key) != value
    ]


def _at_exit(gateway: Any, relay: _Relay, channel: _Channel, outcome: Mapping[str, Any]) -> None:
    """Report the job's outcome, stop the JVM and end: the last exit hook, after the job's hooks and threads.

    The job's log is complete when the pool hears of the outcome: what the driver and its JVM print while
    they shut down goes to the driver's own log. The process then ends at once: what Python would still do
    (collect py4j's objects, each a message to the JVM now gone) only makes noise.
    """
    if outcome:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(relay.own_fd, 1)
        os.dup2(relay.own_fd, 2)
        relay.sink = relay.own_fd
        with contextlib.suppress(OSError):
            channel.send(type="finished", **outcome)
    _stop_jvm(gateway, relay)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(outcome.get("status", 0)))


def _on_sigterm(gateway: Any, signum: int, frame: Any) -> None:
    """Stop as spark-submit stops: wait while the JVM (in this process group, so signalled too) shuts down.

    Its shutdown hooks delete Spark's temporary folders before the launcher kills what is left.
    """
    with contextlib.suppress(Exception):
        gateway.proc.wait(timeout=JVM_STOP_SECONDS)
    os._exit(128 + signum)


def _stop_jvm(gateway: Any, relay: _Relay) -> None:
    """Close the JVM's stdin (it then exits, running Spark's shutdown hooks) and wait for its last output."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        # Stopped from Python first, so that the JVM's exit finds no Python server still talking to it.
        with contextlib.suppress(Exception):
            context.stop()
    process = gateway.proc
    with contextlib.suppress(OSError):
        process.stdin.close()
    try:
        process.wait(timeout=JVM_EXIT_SECONDS)
    except Exception:  # a JVM that hangs at exit must not keep the driver alive
        process.kill()
        process.wait()
    relay.join(5.0)


def _summary(exc: BaseException) -> str:
    """The exception's own lines (no stack frames, Python's or Java's), on one line."""
    text = "".join(traceback.format_exception_only(type(exc), exc))
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("at ", "..."))]
    return " | ".join(lines[:SUMMARY_LINES])


def _print_traceback(exc: BaseException, entry_point: str) -> None:
    """Print the traceback as Python would for the entry point run as a script (without this file's frames)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != entry_point:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)


def _exit_status(exc: SystemExit) -> int:
    """The status Python exits with for an uncaught SystemExit (printing a message code, as Python does)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _run_job(job: Mapping[str, Any], spark: Any, relay: _Relay, zip_files: list[str]) -> tuple[int, str]:
    """Run one job in this process as spark-submit would run it; return its exit status and a summary."""
    entry_point = str(job["entry_point"])
    log_fd = os.open(job["log_path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(log_fd, str(job["log_header"]).encode())
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    relay.sink = log_fd
    status, summary = 0, ""
    try:
        for key, value in job["spark_conf"].items():
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
        own_py_files = [str(path) for path in job["py_files"]]
        for path in own_py_files:
            spark.sparkContext.addPyFile(path)
        # As spark-submit: the entry point's folder, then --py-files, then the rest.
        first = [os.path.dirname(entry_point), *zip_files, *own_py_files]
        sys.path[:] = list(dict.fromkeys([*first, *sys.path]))
        importlib.invalidate_caches()
        sys.argv = [entry_point, *job["argv"]]
        os.environ.update(job["env"])
        runpy.run_path(entry_point, run_name="__main__")
    except SystemExit as exc:
        status = _exit_status(exc)
        summary = "" if status == 0 else f"SystemExit: {exc.code}"
    except BaseException as exc:  # whatever the job raises is its failure, as under spark-submit
        _print_traceback(exc, entry_point)
        status, summary = 1, _summary(exc)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return status, summary


def main() -> int:
    """Start the session, wait for one job, run it; return the job's exit status (0 when the pool closed)."""
    settings = json.loads(os.environ.pop(SETTINGS_ENV))
    # Python put this file's folder first on sys.path: a job must not import the launcher's modules.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    began = time.monotonic()
    relay = _Relay()
    spark, gateway = _start_session(settings, relay.write_fd)
    relay.close_write_end()
    signal.signal(signal.SIGTERM, functools.partial(_on_sigterm, gateway))
    host, port = settings["address"]
    channel = _Channel(socket.create_connection((host, port)))
    outcome: dict[str, Any] = {}
    # Registered before the job runs, so that it runs after the job's own exit hooks.
    atexit.register(_at_exit, gateway, relay, channel, outcome)
    channel.send(type="ready", token=settings["token"], pid=os.getpid(), seconds=time.monotonic() - began)
    while True:
        job = channel.receive()
        if job is None:
            return 0
        refused = _refused_settings(spark, job["spark_conf"])
        if not refused:
            break
        channel.send(type="refused", keys=refused)
    channel.send(type="accepted")
    outcome.update(status=1, summary="the warm Spark driver could not start the job")  # until it runs
    status, summary = _run_job(job, spark, relay, list(settings["py_files"]))
    outcome.update(status=status, summary=summary)
    return status


if __name__ == "__main__":
    sys.exit(main())
