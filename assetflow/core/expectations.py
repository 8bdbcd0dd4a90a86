"""Expectations: when an asset's data should arrive, whether it is late, and the asset's health in one word.

``Asset(..., expect=ExpectedArrival("0 6 * * *", grace=timedelta(hours=1)))`` says: an event of this asset
is due at each cron tick, with ``grace`` to spare. At each *deadline* (tick + grace) the asset is **late** if
no event arrived since the previous deadline; its next event makes it **fresh** again. (DESIGN §5 says "since
the previous tick": read literally, an event that comes within ``grace`` after a tick would count for two
deadlines, yesterday's 06:30 file would satisfy today's 07:00 check; measuring from the previous deadline
makes each event count for exactly one period.)

For partitioned assets, ``key_format`` names the partition key each tick expects (``"%Y-%m-%d"``: the tick's
date in the expectation's time zone; ``key_offset=-1``: the previous tick's), and the asset is late at a
deadline when no event with that key has arrived, whenever it came.

Everything here is a pure function of the facts a store keeps (the last event time, the keys that arrived,
the newest event's checks, the newest quarantined message) and of ``now``: the evaluator schedules a one-shot
wake-up at :attr:`ArrivalStatus.next_deadline` and calls :func:`arrival_status` then.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import InitVar, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from assetflow.core.cron import ScheduleExpressionError, TimeSpec
from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.events import AssetEvent, derive_id, format_timestamp, parse_timestamp
from assetflow.core.limits import LimitError, check_partition_key

Health = Literal["fresh", "late", "check_failed", "quarantined_input"]
#: The health words, most urgent first: the first that applies is the asset's health.
HEALTH_ORDER: tuple[Health, ...] = ("check_failed", "quarantined_input", "late", "fresh")

#: The ``source.type`` of the synthetic events that say an asset missed a deadline.
LATE_SOURCE = "late"
_SAMPLE_TICK = datetime(2026, 11, 21, 6, 30, 15, tzinfo=UTC)


def _aware(moment: datetime, what: str) -> datetime:
    if not isinstance(moment, datetime) or moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime")
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class ExpectedArrival:
    """An asset's expected arrival: a time schedule, a grace period, and for partitioned assets the key.

    ``cron`` is anything :class:`~assetflow.core.cron.TimeSpec` reads (a five-field cron, a preset, a
    ``timedelta``, EventBridge's ``cron(...)`` / ``rate(...)``, or a ``TimeSpec``).

    Raises:
        DefinitionError: the schedule, grace, time zone or key format is invalid.

    """

    cron: InitVar[str | timedelta | TimeSpec]
    grace: timedelta = timedelta(0)
    timezone: str = "UTC"
    key_format: str | None = None
    key_offset: int = 0
    spec: TimeSpec = field(init=False)

    def __post_init__(self, cron: str | timedelta | TimeSpec) -> None:
        what = "ExpectedArrival"
        try:
            spec = cron if isinstance(cron, TimeSpec) else TimeSpec(cron, self.timezone)
        except ScheduleExpressionError as exc:
            raise ScheduleExpressionError(f"{what}: {exc}", exc.field) from exc
        if isinstance(cron, TimeSpec) and self.timezone != "UTC" and cron.timezone != self.timezone:
            raise DefinitionError(f"{what}: give the time zone once, in the TimeSpec or as timezone=")
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "timezone", spec.timezone)
        if not isinstance(self.grace, timedelta) or self.grace < timedelta(0):
            raise DefinitionError(f"{what}: grace must be a timedelta of zero or more, got {self.grace!r}")
        if (
            isinstance(self.key_offset, bool)
            or not isinstance(self.key_offset, int)
            or abs(self.key_offset) > 366
        ):
            raise DefinitionError(f"{what}: key_offset is a whole number of ticks between -366 and 366")
        if self.key_format is None:
            if self.key_offset:
                raise DefinitionError(f"{what}: key_offset needs a key_format")
            return
        if not isinstance(self.key_format, str) or "%" not in self.key_format:
            raise DefinitionError(
                f"{what}: key_format is a strftime format such as '%Y-%m-%d', got {self.key_format!r}"
            )
        try:
            check_partition_key(self.key_for(_SAMPLE_TICK), what=f"{what} key_format {self.key_format!r}")
        except (LimitError, ValueError) as exc:
            raise DefinitionError(f"{what}: {exc}") from exc

    @property
    def keyed(self) -> bool:
        """Whether the expectation is per partition key."""
        return self.key_format is not None

    def key_for(self, tick: datetime) -> str:
        """The partition key a tick expects: the (offset) tick formatted in the expectation's time zone.

        Raises:
            ValueError: the expectation has no key format, or ``tick`` is naive.

        """
        if self.key_format is None:
            raise ValueError("this expectation is not per partition key")
        moment = self.spec.shifted(_aware(tick, "tick"), self.key_offset) or tick
        return moment.astimezone(ZoneInfo(self.timezone)).strftime(self.key_format)

    def to_json(self) -> dict[str, Any]:
        """``{"time": TIMESPEC, "grace_seconds", "key_format", "key_offset"}``."""
        return {
            "time": self.spec.to_json(),
            "grace_seconds": self.grace.total_seconds(),
            "key_format": self.key_format,
            "key_offset": self.key_offset,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ExpectedArrival:
        """Rebuild an expectation from :meth:`to_json`'s document.

        Raises:
            DocumentError: the document is malformed.

        """
        try:
            return cls(
                TimeSpec.from_json(doc["time"]),
                grace=timedelta(seconds=float(doc["grace_seconds"])),
                key_format=doc["key_format"],
                key_offset=int(doc["key_offset"]),
            )
        except (KeyError, TypeError, ValueError, DefinitionError) as exc:
            raise DocumentError(f"invalid expectation document: {exc}") from exc


@dataclass(frozen=True)
class ArrivalStatus:
    """An asset's arrival at ``now``: the deadline last passed, whether it was missed, and the next one.

    ``deadline`` is None before the first deadline; ``since`` is the deadline before it (events after it
    count for ``deadline``); ``key`` is the partition key ``deadline`` expects (keyed expectations).
    """

    late: bool
    deadline: datetime | None
    since: datetime | None
    key: str | None
    next_deadline: datetime | None


def _deadlines(
    expect: ExpectedArrival, now: datetime
) -> tuple[datetime | None, datetime | None, datetime | None]:
    """The tick of the last deadline at or before ``now``, the tick before it, and the tick of the next deadline."""
    spec, grace = expect.spec, expect.grace
    tick = spec.last_at_or_before(now - grace)
    before = spec.last_at_or_before(tick - timedelta(microseconds=1)) if tick is not None else None
    upcoming = spec.next_after(now - grace)
    return tick, before, upcoming


def arrival_status(
    expect: ExpectedArrival,
    *,
    now: datetime,
    last_event_at: datetime | None = None,
    arrived_keys: Container[str] = (),
) -> ArrivalStatus:
    """Whether an asset is late at ``now``, and when to look again.

    An expectation without keys reads ``last_event_at`` (the newest event's timestamp, None when there is
    none): late when it is not after the previous deadline. A keyed expectation reads ``arrived_keys`` (the
    partition keys with at least one event): late when the key of the last deadline has not arrived.

    Raises:
        ValueError: a time is naive.

    """
    now = _aware(now, "now")
    tick, before, upcoming = _deadlines(expect, now)
    next_deadline = None if upcoming is None else upcoming + expect.grace
    if tick is None:
        return ArrivalStatus(False, None, None, None, next_deadline)
    deadline = tick + expect.grace
    since = None if before is None else before + expect.grace
    if expect.keyed:
        key = expect.key_for(tick)
        return ArrivalStatus(key not in arrived_keys, deadline, since, key, next_deadline)
    last = None if last_event_at is None else _aware(last_event_at, "last_event_at")
    late = last is None or (since is not None and last <= since)
    return ArrivalStatus(late, deadline, since, None, next_deadline)


def keys_lookback(status: ArrivalStatus) -> datetime | None:
    """From when the events that may carry a keyed deadline's key are read (None: all of them).

    A key may come early: an event from one whole period before the previous deadline on counts. Older
    arrivals of a key are not looked for (reading an asset's whole history at every deadline would cost
    as much as the history is long).
    """
    if status.deadline is None or status.since is None:
        return None
    return status.since - (status.deadline - status.since)


def late_event(uri: str, status: ArrivalStatus) -> AssetEvent:
    """The synthetic event that says ``uri`` missed ``status.deadline``: queued for ``late(uri)`` consumers.

    Its id derives from the asset, key and deadline, so a deadline judged twice makes one entry.

    Raises:
        ValueError: the status is not late.

    """
    if not status.late or status.deadline is None:
        raise ValueError("only a missed deadline makes a late event")
    deadline = format_timestamp(status.deadline)
    return AssetEvent(
        asset=uri,
        id=derive_id("late", uri, status.key or "", deadline),
        timestamp=status.deadline,
        source={
            "type": LATE_SOURCE,
            "deadline": deadline,
            "since": None if status.since is None else format_timestamp(status.since),
        },
        partition_key=status.key,
    )


def late_resolved_by(late: AssetEvent, event: AssetEvent) -> bool:
    """Whether a real event of the asset answers a late event: same key (keyed), or newer than its ``since``."""
    if event.asset != late.asset:
        return False
    if late.partition_key is not None:
        return event.partition_key == late.partition_key
    since = late.source.get("since")
    return since is None or event.timestamp > parse_timestamp(str(since))


def asset_health(
    *,
    now: datetime,
    expect: ExpectedArrival | None = None,
    last_event_at: datetime | None = None,
    arrived_keys: Container[str] = (),
    newest_check_failed: bool = False,
    last_quarantined_at: datetime | None = None,
) -> Health:
    """An asset's health in one word, from the facts a store keeps; the most urgent that applies wins.

    - ``check_failed``: the newest event failed a blocking check and no operator released it;
    - ``quarantined_input``: a message of one of its watchers was quarantined after its newest event;
    - ``late``: its expectation's last deadline was missed and no event has come since;
    - ``fresh``: none of these (an asset without an expectation is never late).

    Raises:
        ValueError: a time is naive.

    """
    if newest_check_failed:
        return "check_failed"
    if last_quarantined_at is not None:
        quarantined = _aware(last_quarantined_at, "last_quarantined_at")
        if last_event_at is None or quarantined > _aware(last_event_at, "last_event_at"):
            return "quarantined_input"
    if expect is not None:
        status = arrival_status(expect, now=now, last_event_at=last_event_at, arrived_keys=arrived_keys)
        if status.late:
            return "late"
    return "fresh"


__all__ = [
    "HEALTH_ORDER",
    "LATE_SOURCE",
    "ArrivalStatus",
    "ExpectedArrival",
    "Health",
    "arrival_status",
    "asset_health",
    "keys_lookback",
    "late_event",
    "late_resolved_by",
]
