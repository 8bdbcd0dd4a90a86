"""A queue as a store keeps it: its head (version, generation, held ticks, a summary) and its entries.

The summary lets an evaluator add entries to a waiting queue from its head alone, without reading every
entry. It keeps, per selector key (``a:URI``, ``l:ALIAS``, ``w:WHERE-KEY``, ``f:URI``, ``t:URI``), how many
entries have it and the oldest and newest of their timestamps: enough to judge plain trees, ``at_least``,
``where``, ``failed``, ``late``, debounce and max-wait, and ``within`` where the window does not cut through
a key's entries. An order between entries (``then``) it cannot judge: :meth:`QueueHead.waits` then answers
None and the evaluator reads the queue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from assetflow.core.conditions import SortKey, Undecidable
from assetflow.core.decision import decide_on, explain_view
from assetflow.core.entries import QueueEntry, QueueState
from assetflow.core.events import format_timestamp, parse_timestamp
from assetflow.core.pipeline import Pipeline
from assetflow.core.schedules import utc

if TYPE_CHECKING:
    from assetflow.core.scheduler import Transition


@dataclass(frozen=True)
class StoredQueue:
    """A queue as read: the core's state plus the store's generation (a batch run consumes a generation)."""

    state: QueueState
    generation: int

    def after(self, pipeline: Pipeline, transition: Transition) -> StoredQueue:
        """The queue once ``transition`` is applied.

        The n-th batch run of a transition consumes generation ``generation + n`` (the first one with what
        was queued before), and what stays is in the next one.
        """
        runs = sum(1 for r in transition.runs if r.scheduled_time is None) if pipeline.batch else 0
        return StoredQueue(transition.after, self.generation + runs)

    def head(self) -> QueueHead:
        """This queue's head, with the summary of its entries."""
        state = self.state
        return QueueHead(
            pipeline=state.pipeline,
            key=state.key,
            version=state.version,
            generation=self.generation,
            pending_ticks=state.pending_ticks,
            last_tick=state.last_tick,
            summary=QueueSummary.of(state.entries),
        )


#: Entries one append may take: its transaction holds the head and two writes per entry (DynamoDB: 100).
MAX_APPEND = 49


@dataclass(frozen=True)
class KeyStats:
    """How many entries have a selector key, and the oldest and newest of their timestamps."""

    count: int
    oldest: datetime
    newest: datetime

    def merged(self, other: KeyStats) -> KeyStats:
        """The stats of both sets of entries."""
        return KeyStats(
            self.count + other.count, min(self.oldest, other.oldest), max(self.newest, other.newest)
        )


@dataclass(frozen=True)
class QueueSummary:
    """What a queue holds, kept on its head so that adding to a waiting queue needs no read of its entries.

    ``keys`` is None for a summary written before it was kept (then only ``assets`` and ``aliases`` are known).
    """

    assets: frozenset[str]
    aliases: frozenset[str]
    entries: int
    keys: Mapping[str, KeyStats] | None = field(default=None, compare=True)

    @classmethod
    def of(cls, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary of these entries."""
        state = QueueState("", entries=tuple(entries))
        keys: dict[str, KeyStats] = {}
        for entry in entries:
            moment = entry.event.timestamp
            one = KeyStats(1, moment, moment)
            for key in entry.selector_keys():
                known = keys.get(key)
                keys[key] = one if known is None else known.merged(one)
        return cls(state.assets(), state.aliases(), len(entries), keys)

    def with_entries(self, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary once these entries are added."""
        added = QueueSummary.of(entries)
        keys: dict[str, KeyStats] | None = None
        if self.keys is not None and added.keys is not None:
            keys = dict(self.keys)
            for key, stats in added.keys.items():
                keys[key] = stats if key not in keys else keys[key].merged(stats)
        return QueueSummary(
            self.assets | added.assets, self.aliases | added.aliases, self.entries + added.entries, keys
        )

    @property
    def oldest(self) -> datetime | None:
        """The oldest entry's timestamp (every entry has a key)."""
        return min((s.oldest for s in self.keys.values()), default=None) if self.keys is not None else None

    @property
    def newest(self) -> datetime | None:
        """The newest entry's timestamp."""
        return max((s.newest for s in self.keys.values()), default=None) if self.keys is not None else None

    def to_json(self) -> str:
        """The head attribute's value."""
        doc: dict[str, object] = {
            "assets": sorted(self.assets),
            "aliases": sorted(self.aliases),
            "entries": self.entries,
        }
        if self.keys is not None:
            doc["keys"] = {
                key: [s.count, format_timestamp(s.oldest), format_timestamp(s.newest)]
                for key, s in sorted(self.keys.items())
            }
        return json.dumps(doc)

    @classmethod
    def from_json(cls, text: str) -> QueueSummary:
        """Read a head attribute's value (with or without per-key stats)."""
        doc = json.loads(text)
        keys = None
        if "keys" in doc:
            keys = {
                key: KeyStats(int(count), parse_timestamp(oldest), parse_timestamp(newest))
                for key, (count, oldest, newest) in doc["keys"].items()
            }
        return cls(frozenset(doc["assets"]), frozenset(doc["aliases"]), int(doc["entries"]), keys)


class SummaryView:
    """A condition's view of a queue from its head summary: counts and times per key, no order.

    Raises :class:`Undecidable` where the summary is not enough: an order between entries, a count that a
    ``within`` window cuts through, or any count of a summary written without per-key stats.
    """

    __slots__ = ("cutoff", "newest", "oldest", "summary")

    def __init__(self, summary: QueueSummary, *, now: datetime, pipeline: Pipeline) -> None:
        self.summary = summary
        self.cutoff = None if pipeline.within is None else now - pipeline.within
        self.oldest = summary.oldest
        self.newest = summary.newest

    def _stats(self, key: str) -> KeyStats | None:
        keys = self.summary.keys
        if keys is None:
            raise Undecidable(f"the head summary has no counts for {key}")
        return keys.get(key)

    def _legacy_present(self, key: str) -> bool:
        """Presence from a summary without per-key stats: only assets and aliases, only without a window."""
        if self.cutoff is None and key.startswith("a:"):
            return key[2:] in self.summary.assets
        if self.cutoff is None and key.startswith("l:"):
            return key[2:] in self.summary.aliases
        raise Undecidable(f"the head summary has no counts for {key}")

    def _windowed(self, key: str) -> bool:
        return self.cutoff is not None and key[:2] in ("a:", "l:", "w:")

    def present(self, key: str) -> bool:
        """Whether an eligible entry has ``key``."""
        if self.summary.keys is None:
            return self._legacy_present(key)
        stats = self._stats(key)
        if stats is None:
            return False
        return not self._windowed(key) or stats.newest >= self.cutoff  # type: ignore[operator]

    def count(self, key: str) -> int:
        """The eligible entries with ``key``, when the window does not cut through them."""
        if self.summary.keys is None and not self._legacy_present(key):
            return 0
        stats = self._stats(key)
        if stats is None:
            return 0
        if self._windowed(key):
            if stats.newest < self.cutoff:  # type: ignore[operator]
                return 0
            if stats.oldest < self.cutoff:  # type: ignore[operator]
                raise Undecidable(f"the within window cuts through the entries of {key}")
        return stats.count

    def times(self, key: str) -> Sequence[SortKey]:
        """Never known from a summary."""
        raise Undecidable("the head summary keeps no order between entries")

    def missed(self, where_key: str, target_key: str) -> int:
        """Never known from a summary."""
        raise Undecidable("the head summary keeps no per-entry matches")


@dataclass(frozen=True)
class HeadWait:
    """Entries that only queue, judged from the head: the summary to write, and when to look again."""

    summary: QueueSummary
    wake_at: datetime | None
    blocked_by: str | None


@dataclass(frozen=True)
class QueueHead:
    """A queue's head item alone: its version, generation, held ticks and summary.

    ``summary`` is None when the head's summary is not of its current version (a queue written before summaries
    were kept, or changed by a writer that does not keep them, such as ``clear_queue``): read the entries.
    """

    pipeline: str
    key: str
    version: int
    generation: int
    pending_ticks: tuple[datetime, ...]
    last_tick: datetime | None
    summary: QueueSummary | None

    def appended(self, pipeline: Pipeline, entries: Sequence[QueueEntry]) -> QueueSummary | None:
        """The summary once ``entries`` are appended from this head alone, or None when they cannot be.

        They can be for a batch queue whose summary is of this version, with no tick held, and 1 to
        ``MAX_APPEND`` entries that are all queued as they are (a real event that supersedes failure or late
        entries, or one that only does that, changes other entries: read the queue). Whether the entries make
        a run is a separate question: :meth:`waits` answers both.
        """
        if not pipeline.batch or self.summary is None or self.pending_ticks:
            return None
        if not 0 < len(entries) <= MAX_APPEND:
            return None
        if any(not e.counted for e in entries):
            return None
        # A real event supersedes failure and late entries of its asset, and a queued event supersedes a new
        # one: when both kinds of one asset meet, other entries change, so read the queue. (A summary without
        # keys predates synthetic entries: its queue holds none.)
        keys = self.summary.keys or {}
        real = {e.event.asset for e in entries if e.kind == "event"}
        synthetic = {e.event.asset for e in entries if e.kind != "event"}
        queued_real = (
            {k[2:] for k in keys if k.startswith("a:")} if self.summary.keys else set(self.summary.assets)
        )
        queued_synthetic = {k[2:] for k in keys if k.startswith(("f:", "t:"))}
        if real & (synthetic | queued_synthetic) or synthetic & queued_real:
            return None
        return self.summary.with_entries(entries)

    def waits(
        self, pipeline: Pipeline, entries: Sequence[QueueEntry], *, now: datetime, paused: bool = False
    ) -> HeadWait | None:
        """The summary to append ``entries`` with when, judged from the head alone, they make no run.

        None means "read the queue and call ``advance``": the head cannot take them (:meth:`appended`), the
        summary cannot judge the condition (an order, a window that cuts through a key), or a run may be due.
        Slots are not known from the head, so a run that would wait only for ``max_active_runs`` counts as due.
        ``wake_at`` (a debounce or max-wait deadline) is the same as ``advance`` would give.

        Raises:
            ValueError: ``now`` is naive.

        """
        summary = self.appended(pipeline, entries)
        if summary is None:
            return None
        now = utc(now)
        try:
            decision = decide_on(
                pipeline,
                SummaryView(summary, now=now, pipeline=pipeline),
                pending_ticks=False,
                slot_free=True,
                paused=paused,
                now=now,
            )
        except Undecidable:
            return None
        if decision.due:
            return None
        return HeadWait(summary, decision.wake_at, decision.blocked_by)


def explain_from_head(
    pipeline: Pipeline, head: QueueHead, *, active_runs: int, now: datetime, paused: bool = False
) -> dict[str, Any] | None:
    """Explain's JSON from a queue's head alone, or None when its summary cannot judge (read the queue then).

    The same :func:`~assetflow.core.decision.explain_view` on the head's per-key counts and times: exact for
    plain trees, ``at_least``, ``failed``, ``late``, debounce and max-wait, and ``within`` where the window does
    not cut through a key's entries; None for an order (``then``), a ``where`` node's misses, a summary of an
    older version or without per-key stats. So explain costs one read whatever the queue's depth, when it can.

    Raises:
        ValueError: ``now`` is naive.

    """
    summary = head.summary
    if summary is None or summary.keys is None:
        return None
    now = utc(now)
    try:
        return explain_view(
            pipeline,
            SummaryView(summary, now=now, pipeline=pipeline),
            key=head.key,
            queued=summary.entries,
            pending_ticks=bool(head.pending_ticks),
            active_runs=active_runs,
            now=now,
            paused=paused,
        )
    except Undecidable:
        return None


__all__ = [
    "MAX_APPEND",
    "HeadWait",
    "KeyStats",
    "QueueHead",
    "QueueSummary",
    "StoredQueue",
    "SummaryView",
    "explain_from_head",
]
