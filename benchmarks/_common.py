"""The shared benchmark harness: arguments, repeated runs, statistics, a printed table and JSON results.

Every figure a benchmark reports is the median of several runs, with their min and max; latency-like figures
within one run are percentiles (p50/p95/p99). Results go to ``benchmarks/results/<name>.json`` with the date,
the machine and the git commit; ``--quick`` runs a small version (CI's smoke test) and writes
``<name>-quick.json`` so that it never overwrites the committed figures of a full run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Bump when the common fields of the JSON document change.
SCHEMA_VERSION = 1

T = TypeVar("T")


class BenchmarkCheckError(AssertionError):
    """A benchmark's own sanity check failed: the figures would describe something else than intended."""


def check(condition: object, message: str) -> None:
    """Raise ``BenchmarkCheckError(message)`` unless ``condition`` holds (kept under ``python -O``).

    Raises:
        BenchmarkCheckError: the condition is false.
    """
    if not condition:
        raise BenchmarkCheckError(message)


# ---- statistics -------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks (NumPy's default)."""
    if not values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not within 0-100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """``{"p50": ..., "p95": ..., "p99": ...}`` of the values."""
    return {f"p{q:g}": percentile(values, q) for q in qs}


def summarize(values: Sequence[float]) -> dict[str, float]:
    """The median of repeated runs with their min and max (and how many runs there were)."""
    if not values:
        raise ValueError("no values")
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def summarize_runs(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per key, the median/min/max over runs of a mapping each run produced (e.g. each run's p50 and p95)."""
    keys = list(dict.fromkeys(k for run in runs for k in run))
    return {key: summarize([run[key] for run in runs if key in run]) for key in keys}


def repeat(function: Callable[[], T], runs: int) -> list[T]:
    """Call ``function`` ``runs`` times and return what each call returned."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    return [function() for _ in range(runs)]


class Stopwatch:
    """Times a block: ``with Stopwatch() as watch: ...`` then ``watch.seconds``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> Stopwatch:
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._started


# ---- where and when ---------------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine() -> dict[str, Any]:
    """The machine the figures come from: CPUs, model, memory, Python and platform."""
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        # Other processes share the CPUs: the load when the results were written puts them in context.
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def git_commit(root: Path = ROOT) -> dict[str, Any]:
    """The commit the code was at and whether the working tree differed from it (read-only git commands)."""
    # No optional locks: reading must never write .git/index (other processes may be using the repository).
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=root, env=env, capture_output=True, text=True, timeout=30, check=False
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"commit": None, "dirty": None}
        dirty = git("diff-index", "--quiet", "HEAD", "--").returncode != 0
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": dirty}


# ---- arguments, output ------------------------------------------------------------------------------------


def parser(description: str, *, default_runs: int, quick_runs: int) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: ``--quick``, ``--runs`` and ``--results-dir``."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument(
        "--quick", action="store_true", help="a small run for CI's smoke test (writes <name>-quick.json)"
    )
    result.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"repetitions of each measurement (default {default_runs}; {quick_runs} with --quick)",
    )
    result.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where the JSON goes (default benchmarks/results)",
    )
    result.set_defaults(default_runs=default_runs, quick_runs=quick_runs)
    return result


def runs_of(args: argparse.Namespace) -> int:
    """The number of repetitions asked for, or the mode's default."""
    runs = args.runs if args.runs is not None else (args.quick_runs if args.quick else args.default_runs)
    if runs < 1:
        raise SystemExit("--runs must be at least 1")
    return int(runs)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: left-aligned first column, right-aligned numbers."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(widths[i]) if i == 0 else v.rjust(widths[i]) for i, v in enumerate(values)
        ).rstrip()

    return "\n".join([line(list(headers)), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def progress(message: str) -> None:
    """One line of progress on stderr, flushed at once (full runs take minutes)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a titled table to stdout."""
    print(f"\n{title}")
    print(format_table(headers, rows))


def result_path(name: str, results_dir: Path, *, quick: bool) -> Path:
    """``<results_dir>/<name>.json``, or ``<name>-quick.json`` for a quick run."""
    return results_dir / f"{name}{'-quick' if quick else ''}.json"


def write_result(
    name: str,
    results: Mapping[str, Any],
    *,
    results_dir: Path,
    quick: bool,
    parameters: Mapping[str, Any],
    notes: Sequence[str] = (),
    started: float | None = None,
) -> Path:
    """Write the JSON document of a benchmark (atomically) and return its path.

    The document holds ``benchmark``, ``schema``, ``date`` (UTC), ``quick``, ``machine``, ``git``,
    ``parameters``, ``results``, ``notes`` and ``seconds`` (the benchmark's wall time).
    """
    document = {
        "benchmark": name,
        "schema": SCHEMA_VERSION,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "machine": machine(),
        "git": git_commit(),
        "parameters": dict(parameters),
        "results": dict(results),
        "notes": list(notes),
        "seconds": round(time.perf_counter() - started, 1) if started is not None else None,
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    path = result_path(name, results_dir, quick=quick)
    with tempfile.NamedTemporaryFile(
        "w", dir=results_dir, prefix=f".{name}-", suffix=".tmp", delete=False
    ) as handle:
        json.dump(_rounded(document), handle, indent=1, sort_keys=False)
        handle.write("\n")
    # NamedTemporaryFile makes the file private; results are meant to be committed and shared.
    umask = os.umask(0)
    os.umask(umask)
    Path(handle.name).chmod(0o666 & ~umask)
    Path(handle.name).replace(path)
    print(f"\nwrote {path}")
    return path


def _rounded(value: Any) -> Any:
    # Six significant digits keep the committed JSON small and diff-friendly.
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, Mapping):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


# ---- quiet handlers, emulators ----------------------------------------------------------------------------


class CountingSink:
    """A text stream that keeps nothing but counts the bytes written to it (log volume, without the noise)."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        """Count the UTF-8 bytes of ``text``."""
        self.bytes += len(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        """Nothing to flush."""


def redirect_logger_streams(names: Sequence[str], sink: CountingSink) -> None:
    """Point the stream handlers of these loggers (Powertools loggers are named by service) at ``sink``."""
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sink)  # type: ignore[arg-type]


@contextlib.contextmanager
def emulators(*, dynamodb: bool = True, moto: bool = True) -> Iterator[dict[str, Any]]:
    """Start DynamoDB Local and/or moto's server for the duration of the block; yields them by name.

    Raises:
        EmulatorNotInstalledError: Java, the DynamoDB Local jar or moto is missing
            (run scripts/install-tools.sh and pip install -r requirements-local.txt).
    """
    from assetflow_dev import DynamoDbLocal, MotoServer

    with contextlib.ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="assetflow-bench-")))
        started: dict[str, Any] = {}
        if dynamodb:
            started["dynamodb"] = stack.enter_context(DynamoDbLocal(log_dir=logs))
        if moto:
            started["moto"] = stack.enter_context(MotoServer(log_dir=logs))
        yield started


#: /proc counts CPU time in clock ticks.
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_stat(pid: int) -> tuple[int, float, str] | None:
    """A process's parent pid, CPU seconds (user + system) so far and command name, from /proc (Linux).

    None once the process is gone.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS, name


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far.

    Raises:
        ProcessLookupError: no such process.
    """
    found = process_stat(pid)
    if found is None:
        raise ProcessLookupError(f"no process {pid}")
    return found[1]


def require_root_cwd() -> None:
    """Benchmarks import ``functions`` and read ``pipelines/``: run them from the repository root."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
