"""Idle cost of the local runtime: CPU used by ``assetflow dev up`` (and every process it started) doing nothing.

Starts ``assetflow dev up`` as a user does (the example pipelines: SQS and Kafka watchers, a schedule), waits
for ``.assetflow/dev.json``, lets it settle, then reads the CPU time of the runtime's process tree from
``/proc`` over a window with no traffic: the runtime itself (pollers, API server, ticker, launcher), DynamoDB
Local (Java), moto's server and the Kafka broker, each apart. Reported as a percentage of one core.

Three ways: ``emr-api`` (no Spark), ``spark`` (local Spark with its warm driver ready, as in the first minutes
after ``dev up`` or after a run) and ``spark-stopped`` (local Spark once the warm driver stopped for being idle,
as EMR Serverless stops an idle application: ``--warm-idle-stop`` shortened to ``STOP_SECONDS`` so that the
window starts after it).

Run: ``.venv/bin/python -m benchmarks.idle [--quick] [--runs N] [--seconds S]
[--launchers emr-api spark spark-stopped]``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    check,
    parser,
    print_table,
    process_stat,
    progress,
    require_root_cwd,
    runs_of,
    summarize,
    write_result,
)

NAME = "idle"
WINDOW_SECONDS = {"full": 120.0, "quick": 10.0}
SETTLE_SECONDS = {"full": 30.0, "quick": 15.0}
READY_TIMEOUT_SECONDS = 240.0
#: ``spark-stopped``: the warm driver's idle stop, and how long the driver may take to start and stop.
STOP_SECONDS = 10.0
STOPPED_TIMEOUT_SECONDS = 240.0
#: How each way runs ``assetflow dev up``.
LAUNCHER_ARGS: dict[str, tuple[str, ...]] = {
    "emr-api": ("--launcher", "emr-api"),
    "spark": ("--launcher", "spark"),
    "spark-stopped": ("--launcher", "spark", "--warm-idle-stop", f"{STOP_SECONDS:g}"),
}
#: The target of issue 13, item 6: the idle runtime under 1 % of a core.
TARGET_PERCENT = 1.0


def tree(root: int) -> dict[int, tuple[float, str]]:
    """CPU seconds and command name of ``root`` and every process under it."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = process_stat(int(entry.name))
            if found is not None:
                stats[int(entry.name)] = found
    members = {root}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _, _) in stats.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return {pid: (stats[pid][1], stats[pid][2]) for pid in members if pid in stats}


def kind(pid: int, root: int, name: str) -> str:
    """Which part of the runtime a process is."""
    if pid == root:
        return "runtime (pollers, API, ticker, launcher)"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        command = name
    if "DynamoDBLocal" in command:
        return "DynamoDB Local"
    if "moto" in command:
        return "moto server"
    if "tansu" in command or "tansu" in name:
        return "Kafka broker (Tansu)"
    if "spark" in command.lower() or "java" in name:
        return "Spark (warm driver)"
    return name


def _wait_for_spark(root: int, *, started: bool) -> None:
    """Wait until the runtime has a warm Spark driver (``started``) or has none any more."""
    began = time.monotonic()
    while True:
        spark = any(kind(pid, root, name) == "Spark (warm driver)" for pid, (_, name) in tree(root).items())
        if spark == started:
            return
        check(
            time.monotonic() - began < STOPPED_TIMEOUT_SECONDS,
            f"the warm Spark driver did not {'start' if started else 'stop'}",
        )
        time.sleep(1.0)


def measure(launcher: str, *, window: float, settle: float, work: Path) -> dict[str, Any]:
    """Start ``assetflow dev up``, wait for it to be ready and settle, then time its CPU over ``window``.

    Raises:
        BenchmarkCheckError: the runtime did not become ready, or died.
    """
    dev_json = work / ".assetflow" / "dev.json"
    log = (work / "dev-up.log").open("w")
    command = [
        str(Path(sys.executable).parent / "assetflow"),
        "dev",
        "up",
        *LAUNCHER_ARGS[launcher],
        "--pipelines",
        str(ROOT / "pipelines"),
    ]
    began = time.monotonic()
    process = subprocess.Popen(
        command, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        while not dev_json.exists():
            check(process.poll() is None, f"dev up exited with {process.returncode}: see {log.name}")
            check(time.monotonic() - began < READY_TIMEOUT_SECONDS, "dev up did not get ready")
            time.sleep(0.2)
        ready = time.monotonic() - began
        if launcher == "spark-stopped":  # the driver starts after ready, then stops for being idle
            _wait_for_spark(process.pid, started=True)
            _wait_for_spark(process.pid, started=False)
        time.sleep(settle)
        before = tree(process.pid)
        start = time.monotonic()
        time.sleep(window)
        after = tree(process.pid)
        elapsed = time.monotonic() - start
        check(process.poll() is None, "dev up died while idle")
        labels = {pid: kind(pid, process.pid, name) for pid, (_, name) in after.items()}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
    parts: dict[str, float] = {}
    for pid, (seconds, name) in after.items():
        used = seconds - before.get(pid, (0.0, name))[0]
        parts[labels[pid]] = parts.get(labels[pid], 0.0) + used
    percent = {label: round(100 * used / elapsed, 3) for label, used in sorted(parts.items())}
    return {
        "ready_seconds": round(ready, 2),
        "window_seconds": round(elapsed, 1),
        "percent_of_a_core": round(sum(percent.values()), 3),
        "parts": percent,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure each launcher's idle CPU; print and write the results."""
    started = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=3, quick_runs=1)
    arguments.add_argument("--seconds", type=float, default=None, help="the idle window (120 s; 10 s quick)")
    arguments.add_argument("--launchers", nargs="+", default=list(LAUNCHER_ARGS), choices=list(LAUNCHER_ARGS))
    args = arguments.parse_args(argv)
    require_root_cwd()
    mode = "quick" if args.quick else "full"
    window = args.seconds or WINDOW_SECONDS[mode]
    runs = runs_of(args)
    found: dict[str, list[dict[str, Any]]] = {launcher: [] for launcher in args.launchers}
    for run in range(runs):
        for launcher in args.launchers:
            with tempfile.TemporaryDirectory(prefix="assetflow-idle-") as tmp:
                found[launcher].append(
                    measure(launcher, window=window, settle=SETTLE_SECONDS[mode], work=Path(tmp))
                )
            progress(
                f"run {run + 1}/{runs}, {launcher}: {found[launcher][-1]['percent_of_a_core']}% of a core"
            )
    results: dict[str, Any] = {}
    for launcher, measured in found.items():
        labels = sorted({label for m in measured for label in m["parts"]})
        results[launcher] = {
            "percent_of_a_core": summarize([m["percent_of_a_core"] for m in measured]),
            "parts": {label: summarize([m["parts"].get(label, 0.0) for m in measured]) for label in labels},
            "ready_seconds": summarize([m["ready_seconds"] for m in measured]),
        }
    rows = []
    for launcher, result in results.items():
        for label, figure in result["parts"].items():
            rows.append([launcher, label, figure["median"]])
        rows.append([launcher, "total", result["percent_of_a_core"]["median"]])
    print_table(
        f"Idle CPU, % of one core (median of {runs} runs, {window:g} s windows)",
        ["launcher", "part", "%"],
        rows,
    )
    write_result(
        NAME,
        {"launchers": results, "target_percent": TARGET_PERCENT},
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={"runs": runs, "window_seconds": window, "pipelines": "pipelines/"},
        notes=["CPU time from /proc (user + system) of `assetflow dev up` and every process it started."],
        started=started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
