"""Schedules: asset conditions, asset-or-time (cron), and partitioned asset schedules with key mappers."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from assetflow.core.conditions import Condition, as_condition, condition_from_json
from assetflow.core.cron import ScheduleExpressionError, TimeSpec
from assetflow.core.errors import AssetflowError, DefinitionError, DocumentError

Grain = Literal["identity", "hourly", "daily", "weekly", "monthly"]
_GRAINS: tuple[Grain, ...] = ("identity", "hourly", "daily", "weekly", "monthly")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PartitionKeyError(AssetflowError, ValueError):
    """A partition key cannot be mapped (for example, not ISO-8601 for a time-grain mapper)."""


@dataclass(frozen=True)
class PartitionMapper:
    """Maps an event's partition key to the key of the run it belongs to (e.g. hourly keys to days).

    Time grains parse the key as ISO-8601 (a date, or a date-time; an offset is converted to UTC, no offset
    means UTC) and give ``2026-11-21T10`` (hourly), ``2026-11-21`` (daily), ``2026-W47`` (ISO week) or
    ``2026-11`` (monthly). ``identity`` keeps the key.
    """

    grain: Grain = "identity"

    def __post_init__(self) -> None:
        if self.grain not in _GRAINS:
            raise DefinitionError(f"PartitionMapper grain must be one of {list(_GRAINS)}, got {self.grain!r}")

    def map(self, key: str) -> str:
        """The mapped key.

        Raises:
            PartitionKeyError: the key is empty, or not ISO-8601 for a time grain.

        """
        if not isinstance(key, str) or not key:
            raise PartitionKeyError("a partition key must be a non-empty string")
        if self.grain == "identity":
            return key
        moment = parse_iso_key(key)
        if self.grain == "hourly":
            return moment.strftime("%Y-%m-%dT%H")
        if self.grain == "daily":
            return moment.strftime("%Y-%m-%d")
        if self.grain == "weekly":
            year, week, _ = moment.isocalendar()
            return f"{year:04d}-W{week:02d}"
        return moment.strftime("%Y-%m")

    def to_json(self) -> dict[str, Any]:
        """``{"grain": ...}``."""
        return {"grain": self.grain}


def parse_iso_key(key: str) -> datetime:
    """Parse an ISO-8601 date or date-time partition key into an aware UTC datetime.

    Raises:
        PartitionKeyError: the key is not ISO-8601.

    """
    try:
        if _DATE_ONLY.match(key):
            return datetime.strptime(key, "%Y-%m-%d").replace(tzinfo=UTC)
        moment = datetime.fromisoformat(key.replace("Z", "+00:00") if key.endswith("Z") else key)
    except ValueError as exc:
        raise PartitionKeyError(
            f"partition key {key!r} is not ISO-8601 (expected e.g. 2026-11-21 or 2026-11-21T10:15:00Z)"
        ) from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def IdentityMapper() -> PartitionMapper:  # noqa: N802  (reads like a class at the call site, as in Airflow)
    """A mapper that keeps the event's key."""
    return PartitionMapper("identity")


def HourlyMapper() -> PartitionMapper:  # noqa: N802
    """A mapper from ISO-8601 keys to their hour, ``2026-11-21T10``."""
    return PartitionMapper("hourly")


def DailyMapper() -> PartitionMapper:  # noqa: N802
    """A mapper from ISO-8601 keys to their day, ``2026-11-21``."""
    return PartitionMapper("daily")


def WeeklyMapper() -> PartitionMapper:  # noqa: N802
    """A mapper from ISO-8601 keys to their ISO week, ``2026-W47``."""
    return PartitionMapper("weekly")


def MonthlyMapper() -> PartitionMapper:  # noqa: N802
    """A mapper from ISO-8601 keys to their month, ``2026-11``."""
    return PartitionMapper("monthly")


class Schedule:
    """What makes a pipeline run: an asset condition, optionally with a cron, optionally partition-aware."""

    __slots__ = ()

    condition: Condition

    @property
    def partitioned(self) -> bool:
        """Whether runs are per partition key."""
        return False

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SCHEDULE shape."""
        raise NotImplementedError


@dataclass(frozen=True)
class AssetSchedule(Schedule):
    """Run when the asset condition holds; ``Pipeline(schedule=a & b)`` builds one of these."""

    condition: Condition

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "assets", "condition": ...}``."""
        return {"kind": "assets", "condition": self.condition.to_json()}


class AssetOrTimeSchedule(Schedule):
    """Run on a time schedule and also whenever the asset condition holds (Airflow's ``AssetOrTimeSchedule``).

    ``cron`` is anything :class:`~assetflow.core.cron.TimeSpec` reads: a five-field cron (minute hour
    day-of-month month day-of-week, Sunday = 0), an Airflow preset such as ``@daily``, a ``timedelta``, or
    EventBridge's ``cron(...)`` / ``rate(...)``; it is read in ``timezone``. Whatever EventBridge Scheduler
    would refuse or cannot express (both day fields restricted, for one) is refused here.

    Raises:
        DefinitionError: the schedule or time zone is invalid (a ``ScheduleExpressionError`` naming the
            field and the fix), or the assets are.

    """

    __slots__ = ("condition", "cron", "spec", "timezone")

    #: What was written, normalised (spaces collapsed; a timedelta as its ``rate(...)``).
    cron: str
    timezone: str
    #: The validated time schedule.
    spec: TimeSpec

    def __init__(
        self, cron: str | timedelta, assets: Condition | Sequence[Condition], timezone: str = "UTC"
    ) -> None:
        try:
            spec = TimeSpec(cron, timezone)
        except ScheduleExpressionError as exc:
            raise ScheduleExpressionError(f"AssetOrTimeSchedule: {exc}", exc.field) from exc
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "cron", spec.source)
        object.__setattr__(self, "timezone", timezone)
        object.__setattr__(self, "condition", as_condition(assets, "AssetOrTimeSchedule assets"))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"AssetOrTimeSchedule is immutable; cannot set {key!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AssetOrTimeSchedule):
            return NotImplemented
        return (self.cron, self.timezone, self.condition) == (other.cron, other.timezone, other.condition)

    def __hash__(self) -> int:
        return hash((self.cron, self.timezone, self.condition))

    def __repr__(self) -> str:
        return f"AssetOrTimeSchedule({self.cron!r}, {self.condition!r}, timezone={self.timezone!r})"

    def eventbridge_expression(self) -> str:
        """The EventBridge Scheduler expression: ``cron(...)`` (six fields, Sunday = 1) or ``rate(...)``."""
        return self.spec.expression

    def ticks_between(self, after: datetime, until: datetime) -> list[datetime]:
        """The scheduled times in ``(after, until]`` as aware UTC datetimes, oldest first.

        Daylight saving time is handled like EventBridge Scheduler: the cron is matched against local
        wall-clock times, a time skipped when clocks go forward does not run, and a time repeated when
        clocks go back runs once (at its first occurrence).

        Raises:
            ValueError: either bound is a naive datetime.

        """
        return self.spec.ticks_between(after, until)

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "asset_or_time", "cron", "timezone", "condition"}``."""
        return {
            "kind": "asset_or_time",
            "cron": self.cron,
            "timezone": self.timezone,
            "condition": self.condition.to_json(),
        }


class PartitionedAssetSchedule(Schedule):
    """Partition-aware schedule: one queue per mapped partition key; only partitioned events count.

    Raises:
        DefinitionError: the assets or mapper are invalid.

    """

    __slots__ = ("condition", "mapper")

    mapper: PartitionMapper

    def __init__(
        self, assets: Condition | Sequence[Condition], mapper: PartitionMapper | None = None
    ) -> None:
        if mapper is not None and not isinstance(mapper, PartitionMapper):
            raise DefinitionError(
                "PartitionedAssetSchedule: mapper must be a PartitionMapper such as DailyMapper()"
            )
        object.__setattr__(self, "condition", as_condition(assets, "PartitionedAssetSchedule assets"))
        object.__setattr__(self, "mapper", mapper or IdentityMapper())

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"PartitionedAssetSchedule is immutable; cannot set {key!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartitionedAssetSchedule):
            return NotImplemented
        return (self.condition, self.mapper) == (other.condition, other.mapper)

    def __hash__(self) -> int:
        return hash((self.condition, self.mapper))

    def __repr__(self) -> str:
        return f"PartitionedAssetSchedule({self.condition!r}, mapper={self.mapper!r})"

    @property
    def partitioned(self) -> bool:
        """Always true."""
        return True

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "partitioned", "condition", "mapper"}``."""
        return {"kind": "partitioned", "condition": self.condition.to_json(), "mapper": self.mapper.to_json()}


def as_schedule(value: object, what: str) -> Schedule:
    """Normalise what users pass as ``schedule=`` into a :class:`Schedule`.

    Raises:
        DefinitionError: the value is not a schedule.

    """
    if isinstance(value, Schedule):
        return value
    return AssetSchedule(as_condition(value, what))  # type: ignore[arg-type]


def schedule_from_json(doc: Mapping[str, Any]) -> Schedule:
    """Rebuild a schedule from its document.

    Raises:
        DocumentError: the document is not a schedule.

    """
    try:
        kind = doc["kind"]
        condition = condition_from_json(doc["condition"])
        if kind == "assets":
            return AssetSchedule(condition)
        if kind == "asset_or_time":
            return AssetOrTimeSchedule(doc["cron"], condition, timezone=doc["timezone"])
        if kind == "partitioned":
            return PartitionedAssetSchedule(condition, PartitionMapper(doc["mapper"]["grain"]))
    except (KeyError, TypeError, DefinitionError) as exc:
        raise DocumentError(f"invalid schedule document: {exc}") from exc
    raise DocumentError(f"unknown schedule kind {kind!r}")


def utc(moment: datetime) -> datetime:
    """An aware datetime in UTC.

    Raises:
        ValueError: ``moment`` is naive.

    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC)
