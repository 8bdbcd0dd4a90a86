"""The decision: whether a pipeline's queue makes a run now, and if not the one reason why; explain's JSON.

:func:`decide` is the only place that answers "does this queue run now?". :func:`~assetflow.core.scheduler.
advance` calls it before every run it makes, the queue head's fast path calls it on a summary, and
:func:`explain` reports it, so the operator's answer and the evaluator's action cannot disagree.

The one ``blocked_by`` reason is the first gate that stops the run, checked in this order:

1. ``paused`` — an operator paused the pipeline (events keep queueing);
2. ``max_active_runs`` — a tick is held for a free slot (held ticks run before anything else);
3. ``time`` — the schedule has no asset part (manual or time only: runs come from ticks or by hand), or
   it is an ``AssetAndTimeSchedule`` whose condition holds and waits for its tick;
4. ``assets`` — the asset condition does not hold (``missing`` lists what would complete it);
5. ``debounce`` — the condition holds but the newest event is younger than ``debounce`` (and the oldest
   younger than ``max_wait``); ``wake_at`` says when that ends;
6. ``max_active_runs`` — the run would start but every slot is taken (a run's end re-evaluates).

Gates about what the pipeline waits *for* come before the one about capacity, which is reported only when
the pipeline would otherwise run now.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from assetflow.core.conditions import SortKey
from assetflow.core.entries import QueueEntry, QueueState
from assetflow.core.events import format_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.core.schedules import utc

BlockedBy = Literal["paused", "max_active_runs", "time", "assets", "debounce"]
Action = Literal["tick", "batch", "event"]
#: The gates in the order they are checked (``max_active_runs`` appears for held ticks and at the end).
PRECEDENCE: tuple[BlockedBy, ...] = (
    "paused",
    "max_active_runs",
    "time",
    "assets",
    "debounce",
    "max_active_runs",
)


class QueueView:
    """A queue's eligible entries indexed by selector key, at ``now`` (a condition's :class:`EvalView`).

    With ``within``, real events older than ``now - within`` are not eligible (they stay queued and ride
    along with the next run); failure and late entries are always eligible. ``oldest`` and ``newest`` are
    over every queued entry (the debounce and max-wait clocks).
    """

    __slots__ = ("_index", "_keys", "cutoff", "entries", "newest", "now", "old", "oldest")

    def __init__(
        self, entries: Iterable[QueueEntry], *, now: datetime, within: timedelta | None = None
    ) -> None:
        self.now = now
        self.cutoff = None if within is None else now - within
        self.entries = sorted(entries, key=lambda e: e.sort_key)
        index: dict[str, list[SortKey]] = {}
        keys: list[frozenset[str]] = []
        self.old = 0
        for entry in self.entries:
            if self.cutoff is not None and entry.kind == "event" and entry.event.timestamp < self.cutoff:
                self.old += 1
                continue
            entry_keys = frozenset(entry.selector_keys())
            keys.append(entry_keys)
            for key in entry_keys:
                index.setdefault(key, []).append(entry.sort_key)
        self._index = index
        self._keys = keys
        self.oldest = self.entries[0].event.timestamp if self.entries else None
        self.newest = max((e.event.timestamp for e in self.entries), default=None)

    def present(self, key: str) -> bool:
        """Whether an eligible entry has ``key``."""
        return key in self._index

    def count(self, key: str) -> int:
        """The eligible entries with ``key``."""
        return len(self._index.get(key, ()))

    def times(self, key: str) -> Sequence[SortKey]:
        """The (timestamp, id) of the eligible entries with ``key``, oldest first."""
        return self._index.get(key, ())

    def missed(self, where_key: str, target_key: str) -> int:
        """Eligible entries of the target that did not match the where-node's pattern."""
        return sum(1 for keys in self._keys if target_key in keys and where_key not in keys)


@dataclass(frozen=True)
class Decision:
    """Whether a queue makes a run now (``due``, with the ``action``), else the one reason and a wake-up.

    ``action``: ``tick`` (a held tick runs), ``batch`` (one run takes the whole queue), ``event`` (one run
    takes the oldest entry: ``batch=False``). ``holds``: the asset condition's value (None
    when it was not needed). ``wake_at``: when the decision changes with no new input (a debounce or
    max-wait deadline); schedule a one-shot re-evaluation then.
    """

    pipeline: str
    due: bool
    blocked_by: BlockedBy | None
    action: Action | None = None
    holds: bool | None = None
    wake_at: datetime | None = None


def decide_on(
    pipeline: Pipeline,
    view: Any,
    *,
    pending_ticks: bool,
    slot_free: bool,
    paused: bool,
    now: datetime,
) -> Decision:
    """The decision on a view (a :class:`QueueView`, or a head's summary view).

    Raises:
        Undecidable: a summary view cannot judge the condition.

    """
    pid = pipeline.id

    def blocked(reason: BlockedBy, holds: bool | None = None, wake_at: datetime | None = None) -> Decision:
        return Decision(pid, False, reason, holds=holds, wake_at=wake_at)

    schedule = pipeline.schedule
    if paused:
        return blocked("paused")
    if pending_ticks:
        return Decision(pid, True, None, action="tick") if slot_free else blocked("max_active_runs")
    if not schedule.has_assets:
        return blocked("time")
    holds = schedule.condition.holds(view)
    if not pipeline.batch:
        # one run per queued entry, oldest first: every routed entry satisfies an any-of-leaves condition on
        # its own, and one left over from an older schedule still runs rather than waiting forever
        if view.newest is None:
            return blocked("assets", holds)
        if not slot_free:
            return blocked("max_active_runs", holds)
        return Decision(pid, True, None, action="event", holds=holds)
    if not holds:
        return blocked("assets", holds)
    if not schedule.runs_on_assets:
        return blocked("time", holds)
    if pipeline.debounce is not None and view.newest is not None:
        quiet_at = view.newest + pipeline.debounce
        forced_at = (
            None if pipeline.max_wait is None or view.oldest is None else view.oldest + pipeline.max_wait
        )
        if quiet_at > now and (forced_at is None or forced_at > now):
            return blocked("debounce", holds, quiet_at if forced_at is None else min(quiet_at, forced_at))
    if not slot_free:
        return blocked("max_active_runs", holds)
    return Decision(pid, True, None, action="batch", holds=holds)


def _slot_free(pipeline: Pipeline, active_runs: int) -> bool:
    return pipeline.max_active_runs is None or active_runs < pipeline.max_active_runs


def view_of(pipeline: Pipeline, entries: Iterable[QueueEntry], now: datetime) -> QueueView:
    """The queue view a pipeline's condition is judged on at ``now`` (its ``within`` window applied)."""
    return QueueView(entries, now=now, within=pipeline.within)


def decide(
    pipeline: Pipeline,
    state: QueueState,
    *,
    active_runs: int,
    now: datetime,
    paused: bool = False,
) -> Decision:
    """Whether ``state`` makes a run of ``pipeline`` now; :func:`~assetflow.core.scheduler.advance` acts on it.

    Raises:
        ValueError: the state belongs to another pipeline, or ``now`` is naive.

    """
    if state.pipeline != pipeline.id:
        raise ValueError(f"queue of {state.pipeline!r} given to pipeline {pipeline.id!r}")
    now = utc(now)
    return decide_on(
        pipeline,
        view_of(pipeline, state.entries, now),
        pending_ticks=bool(state.pending_ticks),
        slot_free=_slot_free(pipeline, active_runs),
        paused=paused,
        now=now,
    )


def progress(pipeline: Pipeline, view: QueueView) -> tuple[int, int]:
    """``(updated, required)``: "x of N assets updated".

    N counts the distinct assets and aliases whose real events the condition counts (an asset named twice, or
    under ``where``, ``at_least`` and ``then``, once; ``failed()`` and ``late()`` are not updates and are not
    counted). x counts those with at least one eligible queued event (with ``within``, a recent one).
    """
    subjects = dict(pipeline.condition.subjects())
    return sum(1 for key in subjects if view.present(key)), len(subjects)


def queue_progress(pipeline: Pipeline, entries: Iterable[QueueEntry], *, now: datetime) -> tuple[int, int]:
    """``(updated, required)`` of a queue at ``now``: ``queue list``'s "x of N assets updated".

    Raises:
        ValueError: ``now`` is naive.

    """
    return progress(pipeline, view_of(pipeline, entries, utc(now)))


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_timestamp(moment)


def explain(
    pipeline: Pipeline,
    state: QueueState,
    *,
    active_runs: int,
    now: datetime,
    paused: bool = False,
) -> dict[str, Any]:
    """Why the pipeline runs or waits now, as DESIGN §5's JSON, on the same decision :func:`advance` takes.

    ``{"pipeline", "due", "blocked_by", "missing", "updated", "required", "condition"}`` plus ``"key"`` (the
    queue's partition key or null), ``"paused"``, ``"queued"`` (entries), ``"active_runs"``,
    ``"max_active_runs"``, ``"wake_at"`` and ``"next_tick"`` (the time part's next fire time). ``condition`` is
    the tree (null without an asset part): each node ``{"op", "value", "children"}``, each leaf ``{"op",
    "value", "uri" | "name", "queued"}``; ``where`` adds ``pattern``, ``key`` and ``missed`` (queued events of
    its asset that did not match), ``at_least`` adds ``n``, ``then`` adds ``within_seconds``. ``missing``
    lists a smallest set of subjects (URIs, ``alias:NAME``) whose events would make the condition hold.

    Raises:
        ValueError: the state belongs to another pipeline, or ``now`` is naive.

    """
    if state.pipeline != pipeline.id:
        raise ValueError(f"queue of {state.pipeline!r} given to pipeline {pipeline.id!r}")
    now = utc(now)
    return explain_view(
        pipeline,
        view_of(pipeline, state.entries, now),
        key=state.key,
        queued=len(state.entries),
        pending_ticks=bool(state.pending_ticks),
        active_runs=active_runs,
        now=now,
        paused=paused,
    )


def explain_view(
    pipeline: Pipeline,
    view: Any,
    *,
    key: str,
    queued: int,
    pending_ticks: bool,
    active_runs: int,
    now: datetime,
    paused: bool = False,
) -> dict[str, Any]:
    """:func:`explain` on a view: a :class:`QueueView`, or a queue head's summary view.

    Raises:
        Undecidable: a summary view cannot judge the condition (read the queue and call :func:`explain`).

    """
    decision = decide_on(
        pipeline,
        view,
        pending_ticks=pending_ticks,
        slot_free=_slot_free(pipeline, active_runs),
        paused=paused,
        now=now,
    )
    schedule = pipeline.schedule
    condition = schedule.condition
    tree = condition.report(view) if schedule.has_assets else None
    missing = condition.needs(view) if schedule.has_assets else []
    updated, required = progress(pipeline, view)
    next_tick = None if schedule.time is None else schedule.time.next_after(now)
    return {
        "pipeline": pipeline.id,
        "due": decision.due,
        "blocked_by": decision.blocked_by,
        "missing": missing,
        "updated": updated,
        "required": required,
        "condition": tree,
        "key": key or None,
        "paused": paused,
        "queued": queued,
        "active_runs": active_runs,
        "max_active_runs": pipeline.max_active_runs,
        "wake_at": _time(decision.wake_at),
        "next_tick": _time(next_tick),
    }


def explain_pipeline(
    pipeline: Pipeline,
    states: Sequence[QueueState],
    *,
    active_runs: int,
    now: datetime,
    paused: bool = False,
) -> dict[str, Any]:
    """Explain over every queue of a pipeline (one per partition key for partition-aware pipelines).

    The top level is the queue that is due, else the one nearest to due (most assets updated, then most
    entries, then key order), so a waiting pipeline shows its most advanced partition; ``"partitions"`` lists
    each queue's ``key``, ``due``, ``blocked_by``, ``updated``, ``required``, ``missing`` and ``queued``.
    With no queue yet, the pipeline is explained on an empty one.

    Raises:
        ValueError: a state belongs to another pipeline, or ``now`` is naive.

    """
    queues = list(states) or [QueueState(pipeline.id)]
    docs = [explain(pipeline, s, active_runs=active_runs, now=now, paused=paused) for s in queues]
    return combine_explains(pipeline, docs)


def combine_explains(pipeline: Pipeline, docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One explain over a pipeline's queues: the due one, else the nearest to due, with ``partitions``.

    Raises:
        ValueError: no queue was explained.

    """
    if not docs:
        raise ValueError(f"no queue of {pipeline.id!r} was explained")

    def rank(doc: dict[str, Any]) -> tuple[Any, ...]:
        share = doc["updated"] / doc["required"] if doc["required"] else 0.0
        return (not doc["due"], -share, -doc["queued"], doc["key"] or "")

    chosen: dict[str, Any] = min(docs, key=rank)
    best = dict(chosen)
    if pipeline.partitioned and pipeline.schedule.has_assets:
        best["partitions"] = [
            {k: d[k] for k in ("key", "due", "blocked_by", "updated", "required", "missing", "queued")}
            for d in sorted(docs, key=lambda d: d["key"] or "")
        ]
    return best


__all__ = [
    "PRECEDENCE",
    "Action",
    "BlockedBy",
    "Decision",
    "QueueView",
    "combine_explains",
    "decide",
    "decide_on",
    "explain",
    "explain_pipeline",
    "explain_view",
    "progress",
    "queue_progress",
    "view_of",
]
