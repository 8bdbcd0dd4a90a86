"""The reliability suite's model of the scheduling contract, and the harness that drives the real handlers.

Model: what DESIGN §3 promises, written independently of ``assetflow.core`` (conditions are read from the
catalog *document*, routing and partition mapping are re-derived, queues are plain lists). Harness: the real
evaluator Lambda handler in worker processes (one process = one Lambda container: the handler module's
batch processor is per container), fed real stream records read from DynamoDB Local's stream through the
event-source mapping's filter, with at-least-once redelivery; and the failing adapters the fault tests
wrap around the real store, launcher and clients.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import multiprocessing
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property, partial
from typing import Any

import boto3
from botocore.exceptions import ClientError

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.composition import Dependencies, Settings
from assetflow.core.errors import ConflictError
from assetflow.core.events import Run, format_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.core.queues import QueueHead, QueueSummary, StoredQueue
from assetflow.core.scheduler import QueueEntry, Transition
from assetflow_dev import LOCAL_CLIENT_KWARGS, LOCAL_REGION

T0 = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
#: The deployed stream event source's batch size (``assetflow.cdk.config.EnvironmentConfig.stream_batch_size``).
STREAM_BATCH_SIZE = 100
#: The production stream retry budget (``assetflow.cdk.config``: 3 in prod, 5 in dev). A record failed more often
#: than this goes to the on-failure destination, and its event is never evaluated.
STREAM_RETRY_ATTEMPTS = 3


# ==== the reference model ==================================================================================


def holds(cond: Mapping[str, Any], assets: Iterable[str], aliases: Iterable[str]) -> bool:
    """Evaluate a catalog document's ``COND`` over the assets and aliases present (not the core's code)."""
    present_assets, present_aliases = set(assets), set(aliases)

    def walk(node: Mapping[str, Any]) -> bool:
        kind = node["type"]
        if kind == "asset":
            return node["uri"] in present_assets
        if kind == "alias":
            return node["name"] in present_aliases
        results = [walk(child) for child in node["of"]]
        return all(results) if kind == "all" else any(results)

    return walk(cond)


def leaves(cond: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The asset URIs and alias names a ``COND`` names."""
    if cond["type"] == "asset":
        return {cond["uri"]}, set()
    if cond["type"] == "alias":
        return set(), {cond["name"]}
    assets: set[str] = set()
    aliases: set[str] = set()
    for child in cond["of"]:
        a, b = leaves(child)
        assets |= a
        aliases |= b
    return assets, aliases


def map_partition(grain: str, key: str) -> str:
    """The queue key of a partition key (the grains the suite uses)."""
    if grain == "identity":
        return key
    if grain == "daily":
        moment = datetime.fromisoformat(key.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).date().isoformat()
    raise NotImplementedError(f"the model does not map the {grain!r} grain")


@dataclass(frozen=True)
class SentEvent:
    """An asset event as the test wrote it: what the model needs to know about it."""

    id: str
    asset: str
    timestamp: datetime
    partition_key: str | None = None
    from_run: bool = False


@dataclass(frozen=True)
class Route:
    """One queue an event must enter: the pipeline, the queue key and the aliases it counts for there."""

    pipeline: str
    key: str
    aliases: frozenset[str] = frozenset()


def expected_routes(
    catalog: Mapping[str, Any], event: SentEvent, resolutions: Mapping[str, Iterable[str]]
) -> list[Route]:
    """Where DESIGN §3.3 and §3.8 send an event: direct and alias consumers, partition rules applied."""
    routes = []
    for pid, pipeline in sorted(catalog["pipelines"].items()):
        schedule = pipeline["schedule"]
        assets, aliases = leaves(schedule["condition"])
        via = frozenset(a for a in aliases if event.asset in set(resolutions.get(a, ())))
        if event.asset not in assets and not via:
            continue
        if schedule["kind"] == "partitioned":
            if event.partition_key is None:
                continue
            routes.append(Route(pid, map_partition(schedule["mapper"]["grain"], event.partition_key), via))
        elif event.partition_key is not None and event.from_run:
            continue
        else:
            routes.append(Route(pid, "", via))
    return routes


@dataclass(frozen=True)
class Applied:
    """One queue transition that the store committed, as a recording store saw it (picklable)."""

    pipeline: str
    key: str
    before: int
    added: tuple[tuple[str, str, tuple[str, ...], str], ...]  # (event id, asset, aliases, timestamp)
    runs: tuple[tuple[str, tuple[str, ...]], ...]  # (run id, triggering event ids) of asset-triggered runs
    tick_runs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # the same for cron-triggered runs

    @classmethod
    def of(cls, pipeline: Pipeline, transition: Transition) -> Applied:
        """Record a committed transition."""
        runs = [(r, tuple(sorted(e.id for e in r.triggering_events))) for r in transition.runs]
        return cls(
            pipeline=pipeline.id,
            key=transition.before.key,
            before=transition.before.version,
            added=tuple(
                (e.event.id, e.event.asset, e.aliases, format_timestamp(e.event.timestamp))
                for e in transition.added
            ),
            runs=tuple((r.run_id, ids) for r, ids in runs if r.scheduled_time is None),
            tick_runs=tuple((r.run_id, ids) for r, ids in runs if r.scheduled_time is not None),
        )

    @classmethod
    def queued(cls, pipeline: Pipeline, head: QueueHead, entries: Sequence[QueueEntry]) -> Applied:
        """Record a committed append (entries queued from the head alone, no run)."""
        return cls(
            pipeline=pipeline.id,
            key=head.key,
            before=head.version,
            added=tuple(
                (e.event.id, e.event.asset, e.aliases, format_timestamp(e.event.timestamp)) for e in entries
            ),
            runs=(),
        )


def replay(catalog: Mapping[str, Any], applied: Sequence[Applied]) -> list[str]:
    """Replay the committed transitions of every queue in version order through the model.

    The version condition makes each queue's transitions a serial history; the model takes that history's
    arrivals and decides the runs itself (batch: one run as soon as the condition holds, consuming every
    queued event; ``batch=False``: one run per event, oldest first). Returns the violations: a version
    committed twice or skipped, an event queued twice, or runs that differ from the model's.

    Raises:
        NotImplementedError: a pipeline has ``max_active_runs``; the model does not count active runs.
    """
    violations: list[str] = []
    by_queue: dict[tuple[str, str], list[Applied]] = collections.defaultdict(list)
    for a in applied:
        by_queue[(a.pipeline, a.key)].append(a)
    for (pid, key), history in sorted(by_queue.items()):
        doc = catalog["pipelines"][pid]
        if doc.get("max_active_runs") is not None:
            raise NotImplementedError(f"{pid}: the model does not count active runs (max_active_runs)")
        cond = doc["schedule"]["condition"]
        history.sort(key=lambda a: a.before)
        versions = [a.before for a in history]
        if versions != list(range(len(history))):
            violations.append(f"{pid}/{key}: committed versions {versions[:20]}... are not 0, 1, 2, ...")
            continue
        queued: list[tuple[str, str, tuple[str, ...], str]] = []
        ever: set[str] = set()
        for a in history:
            model_runs: list[tuple[str, ...]] = []
            if (
                doc["batch"]
                and queued
                and holds(cond, {e[1] for e in queued}, {x for e in queued for x in e[2]})
            ):
                model_runs.append(tuple(sorted(e[0] for e in queued)))  # what a freed slot releases
                queued = []
            for entry in a.added:
                if entry[0] in ever:
                    violations.append(f"{pid}/{key}: event {entry[0]} queued twice (version {a.before})")
                ever.add(entry[0])
                queued.append(entry)
                # A transition may queue several arrivals (a stream batch): each is judged as it arrives,
                # in the order the transition lists them (the stream's), and makes a run the moment the
                # condition holds.
                if doc["batch"] and holds(cond, {e[1] for e in queued}, {x for e in queued for x in e[2]}):
                    model_runs.append(tuple(sorted(e[0] for e in queued)))
                    queued = []
            if not doc["batch"]:
                for entry in sorted(queued, key=lambda e: (e[3], e[0])):
                    model_runs.append((entry[0],))
                queued = []
            got = [ids for _, ids in a.runs]
            if any(ids for _, ids in a.tick_runs):
                violations.append(f"{pid}/{key} version {a.before}: a cron-triggered run consumed events")
            if got != model_runs:
                violations.append(
                    f"{pid}/{key} version {a.before}: runs {got} but the model makes {model_runs}"
                )
    return violations


@dataclass
class PipelineOutcome:
    """What the store holds for one pipeline after a burst, and what the model expects of it."""

    pipeline: str
    routed: int = 0
    runs: int = 0
    consumed: int = 0
    queued: int = 0
    expected_runs: int | None = None  # exact where the contract fixes it (batch=False)


@dataclass
class StoreCheck:
    """The store checked against the model: violations (must be empty) and the figures to report."""

    violations: list[str] = field(default_factory=list)
    pipelines: dict[str, PipelineOutcome] = field(default_factory=dict)
    events: int = 0
    runs: list[Run] = field(default_factory=list)

    @property
    def total_runs(self) -> int:
        """Runs over every pipeline."""
        return sum(p.runs for p in self.pipelines.values())


def all_pages(fetch: Callable[..., Any]) -> list[dict[str, Any]]:
    """Every item of a paged listing (``fetch(token=...)`` returns a ``Page``)."""
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        page = fetch(token=token)
        rows += page.items
        if not page.next:
            return rows
        token = page.next


def check_store(
    store: DynamoDbStore,
    catalog: Mapping[str, Any],
    sent: Sequence[SentEvent],
    resolutions: Mapping[str, Iterable[str]],
    *,
    runs_end: bool = False,
    single_arrivals: bool = True,
    accepted: Callable[[Run], bool] | None = None,
) -> StoreCheck:
    """Check the contract on what the store holds after every delivery was processed.

    Asserted for every pipeline and queue key:

    - every event is stored exactly once, and the asset summaries count each event once;
    - every routed event is consumed by exactly one run or is still queued, never both; no run holds an
      event that was not routed to its queue; each run carries its queue's partition key;
    - a cron-triggered run consumes no events; each batch run's events satisfy the condition, and
      (``single_arrivals``: each transition queued at most one event, as the stream evaluator does) removing
      some one event makes it false: the run was made as soon as the condition held, never later;
    - no queue is left whose events satisfy the condition (nothing stranded);
    - ``batch=False`` pipelines make exactly one run per routed event;
    - every run was accepted by the launcher (by default: the run recorded a job run id), and the active-run
      counter equals the runs not yet ended (``runs_end``: the runs were moved to a final state, the counter
      is 0). Only pipelines with ``max_active_runs`` keep the counter; the others' is 0.
    """
    check = StoreCheck()
    bad = check.violations
    by_asset: dict[str, list[SentEvent]] = collections.defaultdict(list)
    for event in sent:
        by_asset[event.asset].append(event)
    for uri, events in sorted(by_asset.items()):
        stored = all_pages(partial(store.list_events, uri, limit=1000, newest_first=False))
        ids = [e["id"] for e in stored]
        if sorted(ids) != sorted({e.id for e in events}):
            missing = {e.id for e in events} - set(ids)
            extra = collections.Counter(ids) - collections.Counter({e.id for e in events})
            bad.append(f"{uri}: {len(missing)} events missing, extra or doubled {dict(extra)}")
        check.events += len(ids)
    counts = {a["uri"]: a["event_count"] for a in all_pages(partial(store.list_assets, limit=1000))}
    for uri, events in by_asset.items():
        if counts.get(uri) != len({e.id for e in events}):
            bad.append(f"{uri}: the asset summary counts {counts.get(uri)} events, not {len(events)}")

    routed: dict[tuple[str, str], dict[str, Route]] = collections.defaultdict(dict)
    by_id = {e.id: e for e in sent}
    for event in sent:
        for route in expected_routes(catalog, event, resolutions):
            routed[(route.pipeline, route.key)][event.id] = route

    for pid, doc in sorted(catalog["pipelines"].items()):
        outcome = check.pipelines.setdefault(pid, PipelineOutcome(pid))
        cond = doc["schedule"]["condition"]
        rows = all_pages(partial(store.list_runs, pid, limit=100))
        runs = [store.get_run(r["run_id"]) for r in rows]
        check.runs += runs
        outcome.runs = len(runs)
        keys = {k for p, k in routed if p == pid} | set(store.queue_keys(pid, pending_only=False))
        strays = [r.run_id for r in runs if (r.partition_key or "") not in keys]
        if strays:
            bad.append(f"{pid}: runs {strays[:5]} carry a partition key no routed event maps to")
        for key in sorted(keys):
            want = routed.get((pid, key), {})
            outcome.routed += len(want)
            queued = [e.event.id for e in store.read_queue(pid, key).state.entries]
            key_runs = [r for r in runs if (r.partition_key or "") == key]
            consumed = [e.id for r in key_runs for e in r.triggering_events]
            outcome.consumed += len(consumed)
            outcome.queued += len(queued)
            doubled = [i for i, n in collections.Counter(consumed + queued).items() if n > 1]
            if doubled:
                bad.append(f"{pid}/{key}: events consumed twice or consumed and still queued: {doubled[:5]}")
            if set(consumed) | set(queued) != set(want):
                lost = set(want) - set(consumed) - set(queued)
                stray = (set(consumed) | set(queued)) - set(want)
                bad.append(
                    f"{pid}/{key}: {len(lost)} routed events lost {sorted(lost)[:5]}, stray {sorted(stray)[:5]}"
                )
            for run in key_runs:
                ids = [e.id for e in run.triggering_events]
                if not (accepted(run) if accepted else run.job_run_id):
                    bad.append(f"{pid}: run {run.run_id} was never accepted by the launcher")
                if run.scheduled_time is not None:
                    if ids:
                        bad.append(f"{pid}/{key}: cron-triggered run {run.run_id} consumed events {ids}")
                    continue
                aliases = {a for i in ids if i in want for a in want[i].aliases}
                assets = {by_id[i].asset for i in ids if i in by_id}
                if not holds(cond, assets, aliases):
                    bad.append(f"{pid}/{key}: run {run.run_id} does not satisfy the condition: {ids}")
                elif doc["batch"] and single_arrivals and not _made_at_once(cond, ids, want, by_id):
                    bad.append(
                        f"{pid}/{key}: run {run.run_id} waited past the moment its condition held: {ids}"
                    )
            left = [i for i in queued if i in want]
            if (
                doc["batch"]
                and left
                and holds(cond, {by_id[i].asset for i in left}, {a for i in left for a in want[i].aliases})
            ):
                bad.append(f"{pid}/{key}: {len(left)} queued events satisfy the condition but made no run")
            if not doc["batch"] and doc.get("max_active_runs") is None and left:
                bad.append(f"{pid}/{key}: batch=False events left queued without a run limit: {left[:5]}")
        if not doc["batch"]:
            outcome.expected_runs = outcome.routed
            if sum(1 for r in runs if r.scheduled_time is None) != outcome.routed:
                bad.append(f"{pid}: {outcome.runs} runs for {outcome.routed} events (batch=False: one each)")
        # Only a pipeline with max_active_runs keeps the counter (nothing else reads it).
        active = (
            0 if runs_end or doc.get("max_active_runs") is None else sum(1 for r in runs if r.state.active)
        )
        if store.active_runs(pid) != active:
            bad.append(f"{pid}: the active-run counter is {store.active_runs(pid)}, not {active}")
    return check


def _made_at_once(
    cond: Mapping[str, Any], ids: Sequence[str], want: Mapping[str, Route], by_id: Mapping[str, SentEvent]
) -> bool:
    for last in ids:
        rest = [i for i in ids if i != last]
        assets = {by_id[i].asset for i in rest if i in by_id}
        aliases = {a for i in rest if i in want for a in want[i].aliases}
        if not holds(cond, assets, aliases):
            return True
    return False


# ==== adapters around the real ones ========================================================================


class Crash(BaseException):
    """The invocation dies here (a Lambda timeout or out-of-memory): no handler can catch it, nothing is acked."""


class CountingClient:
    """A boto3 client that counts the error codes it returns (and a transaction's cancellation reasons)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.codes: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name.startswith("_") or not callable(attr) or name in ("get_waiter", "get_paginator"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                reasons = [str(r.get("Code")) for r in exc.response.get("CancellationReasons", [])]
                with self._lock:
                    self.codes[code] += 1
                    self.codes.update(f"cancelled:{r}" for r in reasons if r != "None")
                raise

        return call


class InjectedConflicts:
    """A DynamoDB client that cancels the transactions (and refuses the updates) ``decide`` picks, unrun.

    DynamoDB does this when two transactions touch one item at once; DynamoDB Local serialises transactions
    and never does (measured: no TransactionConflict in any run of this suite), so the suite injects them.
    """

    def __init__(self, real: Any, decide: Callable[[Mapping[str, Any]], bool]) -> None:
        self._real = real
        self._decide = decide
        self.injected = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def update_item(self, **kwargs: Any) -> Any:
        """Run the update, or refuse it as DynamoDB refuses a write to an item a transaction holds.

        ``decide`` sees it as ``{"UpdateItem": request}`` (``random_conflicts`` leaves single writes alone).
        """
        if self._decide({"UpdateItem": kwargs}):
            with self._lock:
                self.injected += 1
            error = {"Error": {"Code": "TransactionConflictException", "Message": "injected"}}
            raise ClientError(error, "UpdateItem")
        return self._real.update_item(**kwargs)

    def transact_write_items(self, **kwargs: Any) -> Any:
        """Run the transaction, or cancel it as a lost race."""
        if self._decide(kwargs):
            with self._lock:
                self.injected += 1
            reasons = [{"Code": "TransactionConflict"}] + [{"Code": "None"}] * (
                len(kwargs["TransactItems"]) - 1
            )
            error = {
                "Error": {
                    "Code": "TransactionCanceledException",
                    "Message": "injected [TransactionConflict]",
                },
                "CancellationReasons": reasons,
            }
            raise ClientError(error, "TransactWriteItems")
        return self._real.transact_write_items(**kwargs)


def random_conflicts(rate: float, seed: int) -> Callable[[Mapping[str, Any]], bool]:
    """Pick a share of transactions at random (seeded)."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def decide(request: Mapping[str, Any]) -> bool:
        if "UpdateItem" in request:
            return False
        with lock:
            return rng.random() < rate

    return decide


class IdempotentEmr:
    """An EMR Serverless client that honours ``StartJobRun``'s ``clientToken`` as EMR does (moto ignores it).

    ``answers`` is shared by every container's client: a repeated token gets the first call's answer.
    """

    def __init__(self, real: Any, answers: dict[str, Any]) -> None:
        self._real = real
        self._answers = answers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def start_job_run(self, **kwargs: Any) -> Any:
        """Start the job once per client token."""
        token = kwargs.get("clientToken")
        if token in self._answers:
            return self._answers[token]
        answer = self._real.start_job_run(**kwargs)
        if token:
            self._answers[token] = answer
        return answer


class RecordingStore(DynamoDbStore):
    """The real store; it also records each transition it committed, and can die right after one.

    ``crash_after`` is asked after every committed transition; True makes the invocation die there (between
    the transaction and the launcher's ``StartJobRun``).
    """

    def __init__(
        self, client: Any, table_name: str, *, crash_after: Callable[[Transition], bool] | None = None
    ) -> None:
        super().__init__(client, table_name)
        self.applied: list[Applied] = []
        self.conflicts = 0
        self.crashes = 0
        self.crash_after = crash_after
        self._lock = threading.Lock()

    def apply(self, pipeline: Pipeline, stored: StoredQueue, transition: Transition) -> None:
        """Apply as the real store does; record the committed transition.

        Raises:
            ConflictError: as the real store.
            Crash: ``crash_after`` said so, after the transaction committed.
        """
        try:
            super().apply(pipeline, stored, transition)
        except ConflictError:
            with self._lock:
                self.conflicts += 1
            raise
        if transition.changed:
            with self._lock:
                self.applied.append(Applied.of(pipeline, transition))
            if self.crash_after is not None and self.crash_after(transition):
                with self._lock:
                    self.crashes += 1
                raise Crash(f"died after committing {pipeline.id} version {transition.after.version}")

    def append_entries(
        self, pipeline: Pipeline, head: QueueHead, entries: Sequence[QueueEntry]
    ) -> QueueSummary:
        """Append as the real store does (a transition that only queues); record it.

        Raises:
            ConflictError: as the real store.
        """
        try:
            summary = super().append_entries(pipeline, head, entries)
        except ConflictError:
            with self._lock:
                self.conflicts += 1
            raise
        with self._lock:
            self.applied.append(Applied.queued(pipeline, head, entries))
        return summary

    def drain(self) -> tuple[list[Applied], int]:
        """The transitions recorded and the conflicts counted since the last call."""
        with self._lock:
            applied, self.applied = self.applied, []
            conflicts, self.conflicts = self.conflicts, 0
        return applied, conflicts


class RecordingLauncher:
    """Stands in for EMR Serverless where the test is about the evaluator: idempotent on the run id."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self._lock = threading.Lock()

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Accept the run; the job run id is derived from the run id, as EMR's clientToken makes it stable."""
        with self._lock:
            self.submitted.append(run.run_id)
        return f"job-{run.run_id}"

    def drain(self) -> list[str]:
        """The run ids submitted since the last call."""
        with self._lock:
            done, self.submitted = self.submitted, []
        return done


class FaultPlan:
    """The errors an operation returns on its next calls, in order, shared by every container's client."""

    def __init__(self, *codes: str) -> None:
        self._codes = collections.deque(codes)
        self.injected: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def add(self, *codes: str) -> None:
        """Fail the calls after those already planned with ``codes``."""
        with self._lock:
            self._codes.extend(codes)

    def next_error(self) -> str | None:
        """The code to fail the next call with, or None when the plan is used up."""
        with self._lock:
            if not self._codes:
                return None
            code = self._codes.popleft()
            self.injected[code] += 1
            return code


class FailingCalls:
    """A boto3 client proxy whose ``operation`` fails as ``plan`` says, then works.

    Stands in for what the emulators cannot produce: throttling, a refused request.
    """

    def __init__(self, real: Any, operation: str, plan: FaultPlan) -> None:
        self._real = real
        self.operation = operation
        self.plan = plan

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name != self.operation:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            code = self.plan.next_error()
            if code is not None:
                error = {
                    "Error": {"Code": code, "Message": "injected"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
                raise ClientError(error, self.operation)
            return attr(*args, **kwargs)

        return call


@dataclass
class LambdaContext:
    """The attributes Powertools reads from a Lambda context."""

    function_name: str = "assetflow-evaluator"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:assetflow-evaluator"
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"


def local_session() -> boto3.session.Session:
    """A boto3 session with the emulators' fake credentials (no profile, no environment)."""
    return boto3.session.Session(**LOCAL_CLIENT_KWARGS)


class LocalDependencies(Dependencies):
    """The functions' composition root pointed at the emulators, with a recording store and counted errors."""

    def __init__(
        self,
        settings: Settings,
        *,
        endpoints: Mapping[str, str],
        launcher: Any = None,
        crash_after: Callable[[Transition], bool] | None = None,
        wrap: Mapping[str, Callable[[Any], Any]] | None = None,
        conflicts: Callable[[Mapping[str, Any]], bool] | None = None,
    ) -> None:
        super().__init__(settings, session=local_session(), launcher=launcher, endpoints=endpoints)
        self._crash_after = crash_after
        self._wrap = dict(wrap or {})
        real = super().client("dynamodb")
        self.dynamodb = CountingClient(InjectedConflicts(real, conflicts) if conflicts else real)

    def client(self, service: str) -> Any:
        """The emulator's client, wrapped by a failing adapter where the test asks for one."""
        real = self.dynamodb if service == "dynamodb" else super().client(service)
        return self._wrap[service](real) if service in self._wrap else real

    @cached_property
    def store(self) -> RecordingStore:
        """The real store, recording its committed transitions."""
        return RecordingStore(
            self.client("dynamodb"), self.settings.table_name, crash_after=self._crash_after
        )


# ==== the stream ===========================================================================================


def is_new_asset_event(record: Mapping[str, Any]) -> bool:
    """The evaluator event source's filter (``assetflow.cdk.evaluator.new_asset_events_filter``)."""
    return record.get("eventName") == "INSERT" and str(
        record.get("dynamodb", {}).get("Keys", {}).get("sk", {}).get("S", "")
    ).startswith("EVENT#")


class StreamTail:
    """Reads a table's stream from its start and keeps following it, as the event source mapping does.

    ``poll()`` returns the new records that pass the mapping's filter, shaped as Lambda delivers them.
    """

    def __init__(self, streams: Any, stream_arn: str) -> None:
        self._streams = streams
        self.stream_arn = stream_arn
        self._iterators: dict[str, str | None] = {}
        self._described = 0.0
        self.read = 0

    def _describe(self) -> None:
        shards, start = [], None
        while True:
            args = {"StreamArn": self.stream_arn, **({"ExclusiveStartShardId": start} if start else {})}
            description = self._streams.describe_stream(**args)["StreamDescription"]
            shards += description["Shards"]
            start = description.get("LastEvaluatedShardId")
            if not start:
                break
        for shard in shards:
            if shard["ShardId"] not in self._iterators:
                self._iterators[shard["ShardId"]] = self._streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
        self._described = time.monotonic()

    def poll(self) -> list[dict[str, Any]]:
        """The filtered records that arrived since the last call, in stream order per shard."""
        if not self._iterators or time.monotonic() - self._described > 2.0:
            self._describe()
        found: list[dict[str, Any]] = []
        for shard_id, iterator in list(self._iterators.items()):
            while iterator:
                page = self._streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = page.get("NextShardIterator")
                self.read += len(page["Records"])
                found += [self._lambda_shape(r) for r in page["Records"] if is_new_asset_event(r)]
                if not page["Records"]:
                    break
            self._iterators[shard_id] = iterator
        return found

    def _lambda_shape(self, record: Mapping[str, Any]) -> dict[str, Any]:
        dynamodb = dict(record["dynamodb"])
        created = dynamodb.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
        return {**record, "dynamodb": dynamodb, "eventSourceARN": self.stream_arn}


def sequence_number(record: Mapping[str, Any]) -> str:
    """A stream record's sequence number (the batch item identifier of a failure)."""
    return str(record["dynamodb"]["SequenceNumber"])


# ==== evaluator workers: one process per Lambda container ==================================================


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process needs to build its own dependencies."""

    table: str
    catalog_path: str
    dynamodb_endpoint: str
    conflict_rate: float = 0.0  # share of transactions cancelled with TransactionConflict


@dataclass
class Outcome:
    """One delivery's result, sent back from a worker."""

    delivery: int
    worker: int
    failed: list[str]
    error: str | None
    applied: list[Applied]
    conflicts: int
    submitted: list[str]
    codes: dict[str, int]
    seconds: float


def evaluator_worker(config: WorkerConfig, worker: int, tasks: Any, results: Any) -> None:
    """A worker process's loop: each task is one invocation of the real evaluator handler with a batch."""
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"  # the per-record info lines would cost more than the test
    os.environ.setdefault("AWS_DEFAULT_REGION", LOCAL_REGION)
    from assetflow.functions import (
        handle_asset_events,  # imported in the worker: the handler's module is per container
    )

    settings = Settings(table_name=config.table, catalog_path=config.catalog_path, region=LOCAL_REGION)
    launcher = RecordingLauncher()
    deps = LocalDependencies(
        settings,
        endpoints={"dynamodb": config.dynamodb_endpoint},
        launcher=launcher,
        conflicts=random_conflicts(config.conflict_rate, seed=worker) if config.conflict_rate else None,
    )
    deps.evaluator  # noqa: B018  (built before the first batch, as a warm container has it)
    while True:
        task = tasks.get()
        if task is None:
            return
        delivery, records = task
        began = time.perf_counter()
        error = None
        try:
            answer = handle_asset_events.lambda_handler(
                {"Records": records}, LambdaContext(aws_request_id=f"w{worker}-d{delivery}"), deps=deps
            )
            failed = [f["itemIdentifier"] for f in answer["batchItemFailures"]]
        except BaseException as exc:  # the whole batch failed (BatchProcessingError) or the invocation died
            failed = [sequence_number(r) for r in records]
            error = f"{type(exc).__name__}: {exc}"[:500]
        codes = dict(deps.dynamodb.codes)
        deps.dynamodb.codes.clear()
        applied, conflicts = deps.store.drain()
        results.put(
            Outcome(
                delivery=delivery,
                worker=worker,
                failed=failed,
                error=error,
                applied=applied,
                conflicts=conflicts,
                submitted=launcher.drain(),
                codes=codes,
                seconds=time.perf_counter() - began,
            )
        )


@dataclass
class DrainFigures:
    """What draining the stream took."""

    records: int = 0
    deliveries: int = 0
    redelivered_batches: int = 0
    retried_batches: int = 0
    failed_records: int = 0
    max_failures_per_record: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    codes: collections.Counter[str] = field(default_factory=collections.Counter)
    conflicts: int = 0
    applied: list[Applied] = field(default_factory=list)
    submitted: collections.Counter[str] = field(default_factory=collections.Counter)
    busy_seconds: float = 0.0


class EvaluatorPool:
    """Worker processes running the evaluator handler, fed batches of stream records.

    Delivery is at-least-once, as the event source mapping's: a batch with failures comes back from its first
    failed record on (Lambda retries from there, records after it included); a share of batches is delivered
    twice, half of them at once to another worker (two invocations racing on the same records), half after
    the first delivery finished (a response lost after the work was done).
    """

    def __init__(self, config: WorkerConfig, *, workers: int, redeliver: float, seed: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._tasks = context.Queue()
        self._results = context.Queue()
        self._processes = [
            context.Process(
                target=evaluator_worker, args=(config, n, self._tasks, self._results), daemon=True
            )
            for n in range(workers)
        ]
        for process in self._processes:
            process.start()
        self.redeliver = redeliver
        self._rng = random.Random(seed)
        self._ids = itertools.count()
        self._outstanding: dict[int, list[dict[str, Any]]] = {}
        self._after: dict[int, list[dict[str, Any]]] = {}
        self._failures: collections.Counter[str] = collections.Counter()
        self.figures = DrainFigures()

    @property
    def idle(self) -> bool:
        """No delivery is in flight or waiting."""
        return not self._outstanding and not self._after

    @property
    def in_flight(self) -> int:
        """Deliveries handed over and not finished, plus redeliveries waiting for them."""
        return len(self._outstanding) + len(self._after)

    def deliver(self, records: Sequence[dict[str, Any]], *, batch_size: int = STREAM_BATCH_SIZE) -> None:
        """Hand new records over in batches, redelivering a share of the batches."""
        self.figures.records += len(records)
        for start in range(0, len(records), batch_size):
            batch = list(records[start : start + batch_size])
            first = self._send(batch)
            if self._rng.random() < self.redeliver:
                self.figures.redelivered_batches += 1
                if self._rng.random() < 0.5:
                    self._send(batch)
                else:
                    self._after[first] = batch

    def deliver_at_once(self, records: Sequence[dict[str, Any]], *, copies: int, batch_size: int) -> None:
        """Hand each batch of ``records`` over ``copies`` times at once: that many invocations race on it."""
        self.figures.records += len(records)
        for start in range(0, len(records), batch_size):
            batch = list(records[start : start + batch_size])
            for _ in range(copies):
                self._send(batch)
            self.figures.redelivered_batches += copies - 1

    def _send(self, batch: list[dict[str, Any]]) -> int:
        delivery = next(self._ids)
        self._outstanding[delivery] = batch
        self.figures.deliveries += 1
        self._tasks.put((delivery, batch))
        return delivery

    def collect(self, timeout: float) -> int:
        """Take the finished deliveries' outcomes, re-sending what failed; returns how many finished."""
        finished = 0
        deadline = time.monotonic() + timeout
        while True:
            try:
                outcome: Outcome = self._results.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return finished
            finished += 1
            self._record(outcome)
            if time.monotonic() >= deadline:
                return finished

    def _record(self, outcome: Outcome) -> None:
        figures = self.figures
        batch = self._outstanding.pop(outcome.delivery)
        figures.applied += outcome.applied
        figures.conflicts += outcome.conflicts
        figures.codes.update(outcome.codes)
        figures.submitted.update(outcome.submitted)
        figures.busy_seconds += outcome.seconds
        if outcome.error:
            figures.errors[outcome.error.split(":", 1)[0]] += 1
        if outcome.failed:
            failed = set(outcome.failed)
            figures.failed_records += len(failed)
            self._failures.update(failed)
            figures.max_failures_per_record = max(self._failures.values())
            first = next(i for i, r in enumerate(batch) if sequence_number(r) in failed)
            figures.retried_batches += 1
            self._send(batch[first:])
        later = self._after.pop(outcome.delivery, None)
        if later is not None:
            self._send(later)

    def close(self) -> None:
        """Stop the workers: drop the deliveries not started, one sentinel each, wait (kill after 30 s)."""
        with contextlib.suppress(queue.Empty):
            while True:
                self._tasks.get_nowait()
        for _ in self._processes:
            self._tasks.put(None)
        for process in self._processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        # Whatever a killed worker left unread must not hold this process at exit.
        for channel in (self._tasks, self._results):
            channel.cancel_join_thread()
            channel.close()


def drain(
    tail: StreamTail,
    pool: EvaluatorPool,
    *,
    expected_records: int,
    writers_done: Callable[[], bool],
    deadline: float,
    abort: Callable[[], str] = lambda: "",
) -> DrainFigures:
    """Follow the stream into the pool until every expected record was delivered and every delivery ended.

    Raises:
        AssertionError: the deadline passed first, or ``abort`` gave a reason (the message says where it stood).
    """
    seen = 0
    while True:
        reason = abort()
        if reason:
            raise AssertionError(f"drain aborted: {reason}")
        new = tail.poll()  # four times a second, as Lambda polls a shard
        seen += len(new)
        pool.deliver(new)
        pool.collect(timeout=0.25)
        if seen >= expected_records and writers_done() and pool.idle:
            return pool.figures
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not drained in time: {seen}/{expected_records} records read, {pool.figures.deliveries} "
                f"deliveries, {pool.in_flight} in flight, {pool.figures.failed_records} failed records, "
                f"{pool.figures.busy_seconds:.0f} busy worker seconds, errors {dict(pool.figures.errors)}"
            )


# ==== event plans ==========================================================================================


def spread(
    count: int, weights: Mapping[str, float], *, seed: int, partition_keys: Mapping[str, Sequence[str]]
) -> list[SentEvent]:
    """``count`` events over the assets in ``weights`` (seeded), one millisecond apart, partition keys drawn
    from ``partition_keys`` for the assets listed there.
    """
    rng = random.Random(seed)
    uris, odds = list(weights), list(weights.values())
    events = []
    for n in range(count):
        uri = rng.choices(uris, odds)[0]
        keys = partition_keys.get(uri)
        events.append(
            SentEvent(
                id=f"ev-{seed}-{n:06d}",
                asset=uri,
                timestamp=T0 + timedelta(milliseconds=n),
                partition_key=rng.choice(keys) if keys else None,
            )
        )
    return events


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a live process has used (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``items`` of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
