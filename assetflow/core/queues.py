"""A queue as a store keeps it: its head (version, generation, held ticks, a summary) and its entries.

The summary lets an evaluator add events to a waiting batch queue from its head alone, without reading
every entry: the head says which assets and aliases are queued, so the condition can be judged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from assetflow.core.pipeline import Pipeline
from assetflow.core.scheduler import QueueEntry, QueueState, Transition


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
class QueueSummary:
    """What a queue holds, kept on its head so that adding to a waiting queue needs no read of its entries."""

    assets: frozenset[str]
    aliases: frozenset[str]
    entries: int

    @classmethod
    def of(cls, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary of these entries."""
        state = QueueState("", entries=tuple(entries))
        return cls(state.assets(), state.aliases(), len(entries))

    def with_entries(self, entries: Sequence[QueueEntry]) -> QueueSummary:
        """The summary once these entries are added."""
        added = QueueSummary.of(entries)
        return QueueSummary(
            self.assets | added.assets, self.aliases | added.aliases, self.entries + added.entries
        )

    def to_json(self) -> str:
        """The head attribute's value."""
        return json.dumps(
            {"assets": sorted(self.assets), "aliases": sorted(self.aliases), "entries": self.entries}
        )

    @classmethod
    def from_json(cls, text: str) -> QueueSummary:
        """Read a head attribute's value."""
        doc = json.loads(text)
        return cls(frozenset(doc["assets"]), frozenset(doc["aliases"]), int(doc["entries"]))


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
        ``MAX_APPEND`` entries (the head and two writes per entry in one transaction).
        """
        if not pipeline.batch or self.summary is None or self.pending_ticks:
            return None
        if not 0 < len(entries) <= MAX_APPEND:
            return None
        return self.summary.with_entries(entries)


__all__ = ["MAX_APPEND", "QueueHead", "QueueSummary", "StoredQueue"]
