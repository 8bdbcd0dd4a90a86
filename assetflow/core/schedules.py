"""Schedules: manual, time, asset conditions, asset-or-time, asset-and-time, partitioned (by key or field)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from assetflow.core.conditions import NO_ASSETS, Condition, NoAssets, as_condition, condition_from_json
from assetflow.core.cron import ScheduleExpressionError, TimeSpec
from assetflow.core.errors import AssetflowError, DefinitionError, DocumentError
from assetflow.core.limits import LimitError, check_partition_key

Grain = Literal["identity", "hourly", "daily", "weekly", "monthly"]
_GRAINS: tuple[Grain, ...] = ("identity", "hourly", "daily", "weekly", "monthly")
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_FIELD_PATH = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


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


def _time_spec(value: object, timezone: str | None, what: str) -> TimeSpec:
    """A validated time schedule from a cron string, preset, timedelta or TimeSpec.

    Raises:
        ScheduleExpressionError: the value is not a time schedule EventBridge Scheduler can run.

    """
    if isinstance(value, TimeSpec):
        if timezone is not None and timezone != value.timezone:
            raise DefinitionError(f"{what}: give the time zone once, in the TimeSpec or as timezone=")
        return value
    if isinstance(value, str) and "://" in value:
        raise DefinitionError(
            f"{what}: {value!r} looks like an asset URI; a string schedule is a cron or preset, an asset is "
            f"Asset({value!r})"
        )
    if not isinstance(value, str | timedelta):
        raise DefinitionError(
            f"{what}: a time schedule is a cron string, a preset such as '@daily', a timedelta or a TimeSpec, "
            f"got {type(value).__name__}"
        )
    try:
        return TimeSpec(value, "UTC" if timezone is None else timezone)
    except ScheduleExpressionError as exc:
        raise ScheduleExpressionError(f"{what}: {exc}", exc.field) from exc


def CronTriggerTimetable(cron: str, *, timezone: str = "UTC") -> TimeSpec:  # noqa: N802  (Airflow's name)
    """Airflow's ``CronTriggerTimetable``: runs at each cron time (a :class:`TimeSpec`).

    Raises:
        ScheduleExpressionError: the cron is not one EventBridge Scheduler can run.

    """
    return _time_spec(cron, timezone, "CronTriggerTimetable")


def DeltaTriggerTimetable(delta: timedelta) -> TimeSpec:  # noqa: N802  (Airflow's name)
    """Airflow's ``DeltaTriggerTimetable``: runs every ``delta`` (a :class:`TimeSpec` of ``rate(...)``).

    Raises:
        ScheduleExpressionError: the interval is not whole minutes.

    """
    return _time_spec(delta, None, "DeltaTriggerTimetable")


class Schedule:
    """What makes a pipeline run: an asset condition, a time schedule, both, or neither (manual only).

    ``condition`` is the asset part (``NO_ASSETS`` when there is none) and ``time`` the time part (None when
    there is none); ``kind`` names the shape in the catalog document.
    """

    __slots__ = ()

    kind = ""
    condition: Condition
    #: The time part, or None.
    time: TimeSpec | None = None

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {key!r}")

    @property
    def partitioned(self) -> bool:
        """Whether runs carry a partition key (partition-aware consumers, partitioned time schedules)."""
        return False

    @property
    def has_assets(self) -> bool:
        """Whether the schedule has an asset part."""
        return not isinstance(self.condition, NoAssets)

    @property
    def runs_on_assets(self) -> bool:
        """Whether asset events alone start runs (not for ``AssetAndTimeSchedule``, which waits for a tick)."""
        return self.has_assets

    @property
    def key_field(self) -> str | None:
        """The extra field a partition-aware schedule takes its queue key from, or None."""
        return None

    def partition_key_for(self, tick: datetime) -> str | None:
        """The partition key of the run a tick starts (None but for ``CronPartitionTimetable``)."""
        return None

    def with_condition(self, condition: Condition) -> Schedule:
        """The same schedule with another asset part (``Asset.ref`` resolution)."""
        raise NotImplementedError

    def _identity(self) -> tuple[Any, ...]:
        return (self.kind, self.to_json())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash((self.kind, self.condition, self.time))

    def ticks_between(self, after: datetime, until: datetime) -> list[datetime]:
        """The time part's fire times in ``(after, until]`` (aware UTC, oldest first); none without one.

        Raises:
            ValueError: either bound is naive.

        """
        return [] if self.time is None else self.time.ticks_between(after, until)

    def eventbridge_expression(self) -> str | None:
        """The time part's EventBridge Scheduler expression, or None."""
        return None if self.time is None else self.time.expression

    def _time_json(self) -> dict[str, Any]:
        spec = self.time
        assert spec is not None  # noqa: S101  (only schedules with a time part call this)
        doc: dict[str, Any] = {"cron": spec.source, "timezone": spec.timezone}
        if spec.start is not None:
            doc["start"] = spec.to_json()["start"]
        return doc

    def to_json(self) -> dict[str, Any]:
        """The catalog document's SCHEDULE shape."""
        raise NotImplementedError


class ManualSchedule(Schedule):
    """``schedule=None``: no run starts by itself; runs are triggered by hand (``assetflow runs trigger``)."""

    __slots__ = ()
    kind = "manual"
    condition = NO_ASSETS

    def __repr__(self) -> str:
        return "ManualSchedule()"

    def with_condition(self, condition: Condition) -> Schedule:
        """Itself: there is no asset part."""
        return self

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "manual"}``."""
        return {"kind": "manual"}


class TimeSchedule(Schedule):
    """A time-only schedule: ``schedule="0 6 * * *"``, ``"@daily"``, ``timedelta(hours=1)`` or a TimeSpec.

    Raises:
        ScheduleExpressionError: the time schedule is invalid.

    """

    __slots__ = ("time",)
    kind = "time"
    condition = NO_ASSETS
    time: TimeSpec

    def __init__(self, timetable: str | timedelta | TimeSpec, timezone: str | None = None) -> None:
        object.__setattr__(self, "time", _time_spec(timetable, timezone, "schedule"))

    def __repr__(self) -> str:
        return f"TimeSchedule({self.time.source!r}, timezone={self.time.timezone!r})"

    @property
    def cron(self) -> str:
        """What was written, normalised."""
        return self.time.source

    @property
    def timezone(self) -> str:
        """The time zone the schedule is read in."""
        return self.time.timezone

    def with_condition(self, condition: Condition) -> Schedule:
        """Itself: there is no asset part."""
        return self

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "time", "cron", "timezone"[, "start"]}``."""
        return {"kind": "time", **self._time_json()}


class AssetSchedule(Schedule):
    """Run when the asset condition holds; ``Pipeline(schedule=a & b)`` builds one of these."""

    __slots__ = ("condition",)
    kind = "assets"

    def __init__(self, condition: Condition) -> None:
        object.__setattr__(self, "condition", as_condition(condition, "AssetSchedule"))

    def __repr__(self) -> str:
        return f"AssetSchedule({self.condition!r})"

    def with_condition(self, condition: Condition) -> Schedule:
        """An asset schedule on ``condition``."""
        return AssetSchedule(condition)

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "assets", "condition": ...}``."""
        return {"kind": "assets", "condition": self.condition.to_json()}


class _TimeAndAssets(Schedule):
    """A time part and an asset part (Airflow's ``timetable=`` and ``assets=``)."""

    __slots__ = ("condition", "time")

    time: TimeSpec

    def __init__(
        self,
        timetable: str | timedelta | TimeSpec | None = None,
        assets: Condition | Sequence[Condition] | None = None,
        timezone: str | None = None,
        *,
        cron: str | timedelta | TimeSpec | None = None,
    ) -> None:
        name = type(self).__name__
        if cron is not None:
            if timetable is not None:
                raise DefinitionError(f"{name}: give timetable= or cron=, not both")
            timetable = cron
        if timetable is None:
            raise DefinitionError(f"{name}: needs timetable= (a cron, a preset, a timedelta or a TimeSpec)")
        if assets is None:
            raise DefinitionError(f"{name}: needs assets=")
        object.__setattr__(self, "time", _time_spec(timetable, timezone, name))
        object.__setattr__(self, "condition", as_condition(assets, f"{name} assets"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cron!r}, {self.condition!r}, timezone={self.timezone!r})"

    @property
    def cron(self) -> str:
        """What was written, normalised (spaces collapsed; a timedelta as its ``rate(...)``)."""
        return self.time.source

    @property
    def timezone(self) -> str:
        """The time zone the time part is read in."""
        return self.time.timezone

    @property
    def spec(self) -> TimeSpec:
        """The validated time part (also :attr:`time`)."""
        return self.time

    def eventbridge_expression(self) -> str:
        """The EventBridge Scheduler expression: ``cron(...)`` (six fields, Sunday = 1) or ``rate(...)``."""
        return self.time.expression

    def with_condition(self, condition: Condition) -> Schedule:
        """The same time part on ``condition``."""
        return type(self)(self.time, condition)

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "cron", "timezone"[, "start"], "condition"}``."""
        return {"kind": self.kind, **self._time_json(), "condition": self.condition.to_json()}


class AssetOrTimeSchedule(_TimeAndAssets):
    """Run on a time schedule and also whenever the asset condition holds (Airflow's ``AssetOrTimeSchedule``).

    ``AssetOrTimeSchedule(timetable=..., assets=...)`` as in Airflow, or positionally; the time part is anything
    :class:`~assetflow.core.cron.TimeSpec` reads: a five-field cron (Sunday = 0), an Airflow preset such as
    ``@daily``, a ``timedelta``, EventBridge's ``cron(...)`` / ``rate(...)``, or a TimeSpec (``cron=`` is an
    older spelling of ``timetable=``). It is read in ``timezone``; whatever EventBridge Scheduler would refuse
    or cannot express (both day fields restricted, for one) is refused here.

    Raises:
        DefinitionError: the time part or time zone is invalid (a ``ScheduleExpressionError`` naming the
            field and the fix), or the assets are.

    """

    __slots__ = ()
    kind = "asset_or_time"


class AssetAndTimeSchedule(_TimeAndAssets):
    """Run at each tick of the time part, but only if the asset condition holds then; the run takes the queue.

    Events queue between ticks and never start a run by themselves; a tick at which the condition is false
    is skipped. Same arguments as :class:`AssetOrTimeSchedule`.

    Raises:
        DefinitionError: the time part or the assets are invalid.

    """

    __slots__ = ()
    kind = "asset_and_time"

    @property
    def runs_on_assets(self) -> bool:
        """False: only ticks start runs."""
        return False


class CronPartitionTimetable(Schedule):
    """Airflow 3.2's ``CronPartitionTimetable``: runs on a time schedule, each carrying a partition key.

    The key is the run's *partition date* (the tick, moved ``run_offset`` ticks: -1 for the previous one)
    formatted with ``key_format`` in ``timezone`` (as Airflow 3.3 does). The run's outlet events carry the key,
    so they trigger partition-aware pipelines only (DESIGN §3.8).

    Raises:
        DefinitionError: the time part, offset or key format is invalid (a key must pass the partition-key
            rules: no '/', no control characters).

    """

    __slots__ = ("key_format", "run_offset", "time")

    kind = "cron_partition"
    condition = NO_ASSETS
    time: TimeSpec
    run_offset: int
    key_format: str

    def __init__(
        self,
        cron: str | timedelta | TimeSpec,
        *,
        timezone: str | None = None,
        run_offset: int = 0,
        key_format: str = "%Y-%m-%dT%H:%M:%S",
    ) -> None:
        what = "CronPartitionTimetable"
        object.__setattr__(self, "time", _time_spec(cron, timezone, what))
        if isinstance(run_offset, bool) or not isinstance(run_offset, int) or abs(run_offset) > 366:
            raise DefinitionError(f"{what}: run_offset is a whole number of ticks between -366 and 366")
        if not isinstance(key_format, str) or "%" not in key_format:
            raise DefinitionError(
                f"{what}: key_format is a strftime format such as '%Y-%m-%d', got {key_format!r}"
            )
        object.__setattr__(self, "run_offset", run_offset)
        object.__setattr__(self, "key_format", key_format)
        sample = datetime(2026, 11, 21, 6, 30, 15, tzinfo=UTC)
        try:
            check_partition_key(self._format(sample), what=f"{what} key_format {key_format!r}")
        except LimitError as exc:
            raise DefinitionError(f"{what}: {exc}") from exc

    def __repr__(self) -> str:
        return (
            f"CronPartitionTimetable({self.time.source!r}, timezone={self.time.timezone!r}, "
            f"run_offset={self.run_offset}, key_format={self.key_format!r})"
        )

    @property
    def partitioned(self) -> bool:
        """True: every run carries a key."""
        return True

    @property
    def cron(self) -> str:
        """What was written, normalised."""
        return self.time.source

    @property
    def timezone(self) -> str:
        """The time zone the schedule and its keys are read in."""
        return self.time.timezone

    def _format(self, moment: datetime) -> str:
        return moment.astimezone(ZoneInfo(self.time.timezone)).strftime(self.key_format)

    def partition_key_for(self, tick: datetime) -> str:
        """The key of the run a tick starts: the partition date (tick moved ``run_offset`` ticks), formatted."""
        partition_date = self.time.shifted(utc(tick), self.run_offset) or utc(tick)
        return self._format(partition_date)

    def with_condition(self, condition: Condition) -> Schedule:
        """Itself: there is no asset part."""
        return self

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "cron_partition", "cron", "timezone"[, "start"], "run_offset", "key_format"}``."""
        return {
            "kind": "cron_partition",
            **self._time_json(),
            "run_offset": self.run_offset,
            "key_format": self.key_format,
        }


class PartitionedAssetSchedule(Schedule):
    """Partition-aware schedule: one queue per partition key; runs carry the key.

    By default the key is the event's ``partition_key`` mapped by ``mapper`` (events without one never reach
    it). With ``key="tenant"`` the key is read from the event's extra when it is routed (a dotted path; for a
    watcher event, whose extra holds the message at ``payload``, a path not found at the top level is looked up
    in the payload), so events of several assets meet per tenant whatever their partition keys; the mapper
    still applies to the value read.

    Raises:
        DefinitionError: the assets, mapper or key path are invalid.

    """

    __slots__ = ("_key", "condition", "mapper")

    kind = "partitioned"
    mapper: PartitionMapper
    _key: str | None

    def __init__(
        self,
        assets: Condition | Sequence[Condition],
        mapper: PartitionMapper | None = None,
        *,
        key: str | None = None,
    ) -> None:
        if mapper is not None and not isinstance(mapper, PartitionMapper):
            raise DefinitionError(
                "PartitionedAssetSchedule: mapper must be a PartitionMapper such as DailyMapper()"
            )
        if key is not None and (not isinstance(key, str) or not _FIELD_PATH.match(key)):
            raise DefinitionError(
                f"PartitionedAssetSchedule: key must be a dotted path into the event's extra such as 'tenant' or "
                f"'payload.meta.tenant', got {key!r}"
            )
        object.__setattr__(self, "condition", as_condition(assets, "PartitionedAssetSchedule assets"))
        object.__setattr__(self, "mapper", mapper or IdentityMapper())
        object.__setattr__(self, "_key", key)

    def __repr__(self) -> str:
        key = f", key={self._key!r}" if self._key else ""
        return f"PartitionedAssetSchedule({self.condition!r}, mapper={self.mapper!r}{key})"

    @property
    def partitioned(self) -> bool:
        """Always true."""
        return True

    @property
    def key_field(self) -> str | None:
        """The extra field the queue key is read from, or None (the event's partition key)."""
        return self._key

    def with_condition(self, condition: Condition) -> Schedule:
        """The same partitioning on ``condition``."""
        return PartitionedAssetSchedule(condition, self.mapper, key=self._key)

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "partitioned", "condition", "mapper", "key"}``."""
        return {
            "kind": "partitioned",
            "condition": self.condition.to_json(),
            "mapper": self.mapper.to_json(),
            "key": self._key,
        }


def PartitionedAssetTimetable(  # noqa: N802  (Airflow's name)
    *,
    assets: Condition | Sequence[Condition],
    partition_key_mapper: PartitionMapper | None = None,
    key: str | None = None,
) -> PartitionedAssetSchedule:
    """Airflow 3.2's ``PartitionedAssetTimetable``: a :class:`PartitionedAssetSchedule`."""
    return PartitionedAssetSchedule(assets, partition_key_mapper, key=key)


def as_schedule(value: object, what: str) -> Schedule:
    """Normalise what users pass as ``schedule=`` into a :class:`Schedule`.

    ``None`` is manual only; a cron string, preset, ``timedelta`` or TimeSpec is time only; an asset, alias,
    expression or list is an asset schedule.

    Raises:
        DefinitionError: the value is not a schedule.

    """
    if isinstance(value, Schedule):
        return value
    if value is None:
        return ManualSchedule()
    if isinstance(value, str | timedelta | TimeSpec):
        return (
            TimeSchedule(value)
            if isinstance(value, TimeSpec)
            else TimeSchedule(_time_spec(value, None, what))
        )
    return AssetSchedule(as_condition(value, what))  # type: ignore[arg-type]


def schedule_from_json(doc: Mapping[str, Any]) -> Schedule:
    """Rebuild a schedule from its document.

    Raises:
        DocumentError: the document is not a schedule.

    """
    try:
        kind = doc["kind"]
        if kind == "manual":
            return ManualSchedule()
        spec = None
        if kind in ("time", "asset_or_time", "asset_and_time", "cron_partition"):
            start = doc.get("start")
            spec = TimeSpec.from_json({"source": doc["cron"], "timezone": doc["timezone"], "start": start})
        if kind == "time":
            return TimeSchedule(spec)  # type: ignore[arg-type]
        if kind == "cron_partition":
            return CronPartitionTimetable(spec, run_offset=doc["run_offset"], key_format=doc["key_format"])  # type: ignore[arg-type]
        condition = condition_from_json(doc["condition"])
        if kind == "assets":
            return AssetSchedule(condition)
        if kind == "asset_or_time":
            return AssetOrTimeSchedule(spec, condition)
        if kind == "asset_and_time":
            return AssetAndTimeSchedule(spec, condition)
        if kind == "partitioned":
            return PartitionedAssetSchedule(
                condition, PartitionMapper(doc["mapper"]["grain"]), key=doc.get("key")
            )
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
