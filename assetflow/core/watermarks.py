"""Watermarks: per source, the newest message recorded, and the gaps between a source and what was recorded.

A watermark is an SQS queue's newest sent time, or a Kafka partition's highest offset. Ingest advances a
watermark for every message it recorded (as an event or in quarantine): each is a position that only moves
forward. Reconciliation compares them with what the sources say (a Kafka consumer group's
committed offsets: every offset below it was handed to ingest) and replays the gaps through the same idempotent
ingest: a message recorded meanwhile is recognised by its identity and not recorded twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Watermark:
    """The newest position recorded of one source partition.

    ``source`` is ``kafka:<cluster>:<topic>`` or ``sqs:<queue ARN>``; ``partition`` the Kafka partition (``""``
    for SQS); ``position`` the offset, or the message's sent time in epoch milliseconds; ``message`` the identity
    of the message at that position.

    Kafka offsets also keep ``contiguous``: the highest offset up to which every batch was recorded (a batch
    given up after its retries leaves it behind while ``position`` moves on). ``first`` is, in a batch being
    written, the lowest offset of the partition's records in it.
    """

    source: str
    partition: str
    position: int
    message: str
    at: datetime | None = None
    contiguous: int | None = None
    first: int | None = None

    @property
    def recorded_through(self) -> int:
        """The offset through which everything was recorded (``contiguous`` where kept, else ``position``)."""
        return self.position if self.contiguous is None else self.contiguous


@dataclass(frozen=True)
class Gap:
    """Positions ``[first, last]`` of a source partition that its source delivered and nothing recorded."""

    source: str
    partition: str
    first: int
    last: int

    @property
    def size(self) -> int:
        """How many positions the gap spans."""
        return self.last - self.first + 1

    def to_json(self) -> dict[str, Any]:
        """``{"source", "partition", "first", "last", "size"}``."""
        return {
            "source": self.source,
            "partition": self.partition,
            "first": self.first,
            "last": self.last,
            "size": self.size,
        }


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def kafka_source(cluster: str, topic: str) -> str:
    """A Kafka topic's source name, as its messages' identities start."""
    return f"kafka:{cluster}:{topic}"


def position_of(identity: str, facts: Mapping[str, Any] | None = None) -> Watermark | None:
    """The watermark one recorded message sets, from its identity (and, for SQS, its sent time); None if none.

    Kafka identities are ``kafka:<cluster>:<topic>:<partition>:<offset>:<timestamp>`` (topics have no ``:``);
    SQS identities ``sqs:<queue ARN>:<message id>``, positioned by the ``SentTimestamp`` attribute.
    """
    if identity.startswith("kafka:") and ":malformed:" not in identity:
        head, _sep, _stamp = identity.rpartition(":")
        rest, _sep, offset = head.rpartition(":")
        source, _sep, partition = rest.rpartition(":")
        position = _int(offset)
        if position is None or _int(partition) is None or source.count(":") < 2:
            return None
        return Watermark(source, partition, position, identity, first=position)
    if identity.startswith("sqs:") and ":no-message-id:" not in identity:
        source, _sep, _message_id = identity.rpartition(":")
        attributes = (facts or {}).get("attributes")
        sent = _int(attributes.get("SentTimestamp")) if isinstance(attributes, Mapping) else None
        if sent is None or not source.startswith("sqs:arn:"):
            return None
        return Watermark(source, "", sent, identity)
    return None


def newest(marks: list[Watermark]) -> list[Watermark]:
    """The newest watermark of each source partition among ``marks`` (a batch's, before they are written)."""
    best: dict[tuple[str, str], Watermark] = {}
    lowest: dict[tuple[str, str], int] = {}
    for mark in marks:
        key = (mark.source, mark.partition)
        first = mark.first if mark.first is not None else mark.position
        lowest[key] = min(lowest.get(key, first), first)
        if key not in best or mark.position > best[key].position:
            best[key] = mark
    return [replace(best[k], first=lowest[k]) for k in sorted(best)]


def kafka_gaps(
    source: str,
    recorded: Mapping[str, int],
    committed: Mapping[str, int],
    *,
    start: Mapping[str, int] | None = None,
) -> list[Gap]:
    """The offsets a consumer group committed (handed to ingest) beyond what was recorded, per partition.

    ``committed`` is the group's next offset to read per partition; ``recorded`` the offset through which every
    record was recorded (:attr:`Watermark.recorded_through`);
    ``start`` the earliest offset still in the topic (a partition never recorded is read from there). A
    partition whose committed offset is at or below its recorded one + 1 has no gap.
    """
    gaps: list[Gap] = []
    for partition, next_offset in sorted(committed.items(), key=lambda kv: (len(kv[0]), kv[0])):
        first = recorded[partition] + 1 if partition in recorded else (start or {}).get(partition, 0)
        if next_offset - 1 >= first:
            gaps.append(Gap(source, partition, first, next_offset - 1))
    return gaps


__all__ = ["Gap", "Watermark", "kafka_gaps", "kafka_source", "newest", "position_of"]
