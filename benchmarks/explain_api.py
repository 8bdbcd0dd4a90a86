"""Explain through the HTTP API of the local runtime: ``GET /pipelines/{id}/explain`` with 1,000 queued events.

Issue 17 asks for explain on a pipeline with 1,000 queued events to answer in under 100 ms locally. This starts
the local runtime (DynamoDB Local, moto, the real functions behind the pollers and the local API server; the
EMR-API launcher, since no run starts), queues the events the way users do (``POST /assets/events``, the
table's stream, the evaluator), then times explain end to end: an HTTP request with the bearer token, the API
function, the store's reads of the queue head, its 1,000 entries, the active-run counter and the held runs, and
the core's decision (from the queue head's summary when it can judge the condition, else from the entries).
The events are queued with the evaluator's own transitions (``--fill api`` sends them through
``POST /assets/events`` and the table's stream instead: slower, the same queue). The pipelines wait on an
asset that never comes, so every event stays queued:

- ``all_of_2``: ``a & b``;
- ``operators``: ``at_least(a, 5000) | a.then(b) | (a.where(...) & b)`` (every entry is read and judged).

    .venv/bin/python -m benchmarks.explain_api [--quick] [--runs N] [--events 1000] [--calls 30]

Exits 1 when the median p50 at 1,000 queued events is 100 ms or more.
"""

from __future__ import annotations

import http.client
import json
import sys
import tempfile
import textwrap
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import (
    check,
    parser,
    percentiles,
    print_table,
    progress,
    runs_of,
    summarize,
    summarize_runs,
    write_result,
)

NAME = "explain_api"
TARGET_SECONDS = 0.100
TARGET_EVENTS = 1000

DEFINITIONS = """
from assetflow import Asset, Pipeline, SparkJob, at_least

a = Asset("a", "x-bench://explain/a")
b = Asset("b", "x-bench://explain/b")
never = Asset("never", "x-bench://explain/never")
JOB = SparkJob("jobs/noop.py")

all_of_2 = Pipeline("all_of_2", schedule=a & never, job=JOB)
operators = Pipeline(
    "operators",
    schedule=at_least(a, 5000) | a.then(never) | (a.where({"status": ["ok"]}) & never),
    job=JOB,
)
"""
PIPELINES = ("all_of_2", "operators")


class Api:
    """One keep-alive connection to the local API, as a client that asks repeatedly would hold it."""

    def __init__(self, url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def get(self, path: str) -> dict[str, Any]:
        self.connection.request("GET", path, headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        check(response.status == 200, f"GET {path}: {response.status} {body[:300]!r}")
        return json.loads(body)  # type: ignore[no-any-return]

    def post(self, path: str, doc: Any) -> dict[str, Any]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        headers = {**self.headers, "Content-Type": "application/json"}
        connection.request("POST", path, body=json.dumps(doc), headers=headers)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        check(response.status == 201, f"POST {path}: {response.status} {body[:300]!r}")
        return json.loads(body)  # type: ignore[no-any-return]


def fill_store(runtime: Any, events: int) -> float:
    """Queue ``events`` events of ``a`` with the evaluator's own transitions (advance, then apply), 40 at a time."""
    from datetime import UTC, datetime, timedelta

    from assetflow.core.events import AssetEvent
    from assetflow.core.scheduler import advance, route_event

    deps = runtime.deps
    store, catalog = deps.store, deps.catalog
    t0 = datetime.now(UTC) - timedelta(hours=1)
    started = time.perf_counter()
    for first in range(0, events, 40):
        batch = [
            AssetEvent(
                "x-bench://explain/a",
                f"bench-{n:06d}",
                t0 + timedelta(milliseconds=n),
                {"n": n, "status": "ok"},
                {"type": "api", "principal": "bench"},
            )
            for n in range(first, min(events, first + 40))
        ]
        for pipeline_id in PIPELINES:
            pipeline = catalog.pipelines[pipeline_id]
            entries = [route_event(e, [(pipeline, ())])[0][0].entry(e) for e in batch]
            stored = store.read_queue(pipeline_id)
            transition = advance(pipeline, stored.state, active_runs=0, now=t0, entries=entries)
            check(not transition.runs, "the benchmark's pipelines must only queue")
            store.apply(pipeline, stored, transition)
    return time.perf_counter() - started


def fill(api: Api, events: int) -> float:
    """Queue ``events`` events of ``a`` through the API and the evaluator; seconds until all are queued."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda n: api.post(
                    "/assets/events", {"uri": "x-bench://explain/a", "extra": {"n": n, "status": "ok"}}
                ),
                range(events),
            )
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if all(api.get(f"/pipelines/{p}/explain")["queued"] == events for p in PIPELINES):
            return time.perf_counter() - started
        time.sleep(0.5)
    raise TimeoutError(f"the {events} events were not all queued within 10 minutes")


def explain_run(api: Api, events: int, calls: int) -> dict[str, dict[str, float]]:
    """One run: per pipeline, p50/p95 of a whole explain request."""
    figures: dict[str, dict[str, float]] = {}
    for pipeline in PIPELINES:
        path = f"/pipelines/{pipeline}/explain"
        doc = api.get(path)  # warm: the first call of a route builds nothing afterwards
        check(
            doc["queued"] == events and not doc["due"] and doc["blocked_by"] == "assets",
            f"{pipeline}: must wait with its {events} events ({doc['queued']}, {doc['blocked_by']})",
        )
        seconds = []
        for _ in range(calls):
            began = time.perf_counter()
            api.get(path)
            seconds.append(time.perf_counter() - began)
        figures[pipeline] = percentiles(seconds, (50, 95))
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when explain at 1,000 queued events stays under 100 ms, else 1."""
    args_parser = parser(__doc__.splitlines()[0], default_runs=5, quick_runs=2)
    args_parser.add_argument("--events", type=int, default=TARGET_EVENTS, help="queued events (default 1000)")
    args_parser.add_argument("--calls", type=int, default=None, help="explain requests per figure")
    args_parser.add_argument(
        "--fill",
        choices=("store", "api"),
        default="store",
        help="queue the events with the evaluator's transitions (store, default) or POST /assets/events (api)",
    )
    args = args_parser.parse_args(argv)
    started = time.perf_counter()
    runs = runs_of(args)
    calls = args.calls or (10 if args.quick else 30)
    from assetflow_dev.runtime import LocalRuntime, RuntimeOptions

    with tempfile.TemporaryDirectory(prefix="assetflow-explain-") as folder:
        project = Path(folder)
        (project / "pipelines").mkdir()
        (project / "pipelines" / "bench.py").write_text(textwrap.dedent(DEFINITIONS))
        (project / "jobs").mkdir()
        (project / "jobs" / "noop.py").write_text("pass\n")
        (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
        options = RuntimeOptions(
            pipelines=str(project / "pipelines"),
            work_dir=project / ".assetflow",
            launcher="emr-api",
            function_log=project / ".assetflow" / "logs" / "functions.log",
        )
        progress("starting the local runtime")
        with LocalRuntime(options) as runtime:
            config = runtime.dev_config()
            api = Api(config["api"]["url"], config["api"]["token"])
            progress(f"queueing {args.events} events ({args.fill})")
            fill_seconds = fill(api, args.events) if args.fill == "api" else fill_store(runtime, args.events)
            explain_runs = []
            for run in range(runs):
                progress(f"run {run + 1}/{runs}: {calls} explain requests per pipeline")
                explain_runs.append({k: v["p50"] for k, v in explain_run(api, args.events, calls).items()})
            sample = api.get("/pipelines/all_of_2/explain")
    explained = summarize_runs(explain_runs)
    print_table(
        f"GET /pipelines/{{id}}/explain with {args.events} queued events (ms, p50 per run: median [min, max])",
        ["pipeline", "median", "min", "max"],
        [[k, v["median"] * 1e3, v["min"] * 1e3, v["max"] * 1e3] for k, v in explained.items()],
    )
    worst = max(v["median"] for v in explained.values())
    met = args.events < TARGET_EVENTS or worst < TARGET_SECONDS
    verdict = "met" if worst < TARGET_SECONDS else "MISSED"
    print(
        f"\nexplain with {args.events} queued events: worst median {worst * 1e3:.1f} ms (target < 100 ms at "
        f"{TARGET_EVENTS}): {verdict}; queueing them took {fill_seconds:.1f} s"
    )
    write_result(
        NAME,
        {
            "explain_seconds": explained,
            "fill_seconds": fill_seconds,
            "sample": {
                k: sample[k] for k in ("pipeline", "due", "blocked_by", "updated", "required", "queued")
            },
            "target": {"events": TARGET_EVENTS, "seconds": TARGET_SECONDS, "worst_median": worst, "met": met},
            "overall": summarize([v["median"] for v in explained.values()]),
        },
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "events": args.events,
            "calls_per_figure": calls,
            "launcher": "emr-api",
            "fill": args.fill,
        },
        notes=[
            "through the local runtime's HTTP API (bearer token), the API function and DynamoDB Local",
            "each figure: the p50 of requests within a run; median, min and max over runs",
        ],
        started=started,
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
