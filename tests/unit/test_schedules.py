"""Schedules: partition-key mappers, asset-or-time (cron) schedules and their documents (DESIGN §1, §3.8)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from croniter import croniter

from assetflow import (
    Asset,
    AssetAlias,
    AssetAndTimeSchedule,
    AssetOrTimeSchedule,
    CronPartitionTimetable,
    CronTriggerTimetable,
    DailyMapper,
    DefinitionError,
    DeltaTriggerTimetable,
    HourlyMapper,
    IdentityMapper,
    MonthlyMapper,
    PartitionedAssetSchedule,
    PartitionedAssetTimetable,
    PartitionMapper,
    TimeSpec,
    WeeklyMapper,
)
from assetflow.core.conditions import NO_ASSETS
from assetflow.core.errors import DocumentError
from assetflow.core.schedules import (
    AssetSchedule,
    ManualSchedule,
    PartitionKeyError,
    TimeSchedule,
    as_schedule,
    parse_iso_key,
    schedule_from_json,
    utc,
)

A = Asset("s3://bucket/a")
B = Asset("s3://bucket/b")


# --- partition mappers --------------------------------------------------------------------------


def test_factories_build_the_grains() -> None:
    assert [m().grain for m in (IdentityMapper, HourlyMapper, DailyMapper, WeeklyMapper, MonthlyMapper)] == [
        "identity",
        "hourly",
        "daily",
        "weekly",
        "monthly",
    ]
    assert DailyMapper() == PartitionMapper("daily")
    assert DailyMapper().to_json() == {"grain": "daily"}


def test_unknown_grain_is_refused() -> None:
    with pytest.raises(DefinitionError, match="grain must be one of"):
        PartitionMapper("yearly")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["anything", "2026-11-21", "region=eu/day=1", "ü"])
def test_identity_keeps_the_key(key: str) -> None:
    assert IdentityMapper().map(key) == key


@pytest.mark.parametrize(
    ("key", "hourly", "daily", "weekly", "monthly"),
    [
        ("2026-11-21T10:15:00Z", "2026-11-21T10", "2026-11-21", "2026-W47", "2026-11"),
        ("2026-11-21T10:15:00.123456+00:00", "2026-11-21T10", "2026-11-21", "2026-W47", "2026-11"),
        ("2026-11-21T10:15:00", "2026-11-21T10", "2026-11-21", "2026-W47", "2026-11"),  # no offset means UTC
        ("2026-11-21", "2026-11-21T00", "2026-11-21", "2026-W47", "2026-11"),  # date only
        # offsets are converted to UTC first, which can change the hour, day, week and month
        ("2026-11-21T01:30:00+02:00", "2026-11-20T23", "2026-11-20", "2026-W47", "2026-11"),
        ("2026-11-30T22:00:00-05:00", "2026-12-01T03", "2026-12-01", "2026-W49", "2026-12"),
        ("2026-11-23T00:30:00+01:00", "2026-11-22T23", "2026-11-22", "2026-W47", "2026-11"),
    ],
)
def test_time_grains(key: str, hourly: str, daily: str, weekly: str, monthly: str) -> None:
    assert HourlyMapper().map(key) == hourly
    assert DailyMapper().map(key) == daily
    assert WeeklyMapper().map(key) == weekly
    assert MonthlyMapper().map(key) == monthly


@pytest.mark.parametrize(
    ("key", "week"),
    [
        ("2026-12-31", "2026-W53"),  # 2026 starts on a Thursday: it has 53 ISO weeks
        ("2027-01-01", "2026-W53"),
        ("2027-01-03", "2026-W53"),
        ("2027-01-04", "2027-W01"),
        ("2024-12-30", "2025-W01"),  # a Monday in December that belongs to next year's week 1
        ("2021-01-03", "2020-W53"),
        ("2027-01-04T00:30:00+02:00", "2026-W53"),  # still Sunday 2027-01-03 in UTC
    ],
)
def test_weekly_uses_iso_weeks_across_year_boundaries(key: str, week: str) -> None:
    assert WeeklyMapper().map(key) == week


@pytest.mark.parametrize(
    "key",
    ["yesterday", "2026-13-01", "2026-02-30", "2026-11-21T25:00", "21/11/2026", "2026-11-21T10:15:00+25:00"],
)
@pytest.mark.parametrize("mapper", [HourlyMapper(), DailyMapper(), WeeklyMapper(), MonthlyMapper()])
def test_invalid_keys_raise_partition_key_error(mapper: PartitionMapper, key: str) -> None:
    with pytest.raises(PartitionKeyError, match="is not ISO-8601"):
        mapper.map(key)


@pytest.mark.parametrize("key", ["", None, 20261121])
@pytest.mark.parametrize("mapper", [IdentityMapper(), DailyMapper()])
def test_empty_or_non_string_keys_are_refused(mapper: PartitionMapper, key: Any) -> None:
    with pytest.raises(PartitionKeyError, match="non-empty string"):
        mapper.map(key)


def test_partition_key_error_is_a_value_error() -> None:
    assert issubclass(PartitionKeyError, ValueError)


def test_parse_iso_key_returns_aware_utc() -> None:
    assert parse_iso_key("2026-11-21T10:15:00+02:00") == datetime(2026, 11, 21, 8, 15, tzinfo=UTC)
    assert parse_iso_key("2026-11-21").tzinfo is UTC


# --- AssetOrTimeSchedule: validation ------------------------------------------------------------


def test_asset_or_time_defaults_to_utc_and_normalises_spacing() -> None:
    schedule = AssetOrTimeSchedule("0  6 *  * *", A)
    assert schedule.cron == "0 6 * * *"
    assert schedule.timezone == "UTC"
    assert schedule.condition == A


def test_asset_or_time_takes_any_condition_or_a_list() -> None:
    assert AssetOrTimeSchedule("0 6 * * *", [A, B]).condition == A & B
    assert AssetOrTimeSchedule("0 6 * * *", A | AssetAlias("x")).condition == A | AssetAlias("x")


# Each refusal now names what is wrong (the field and the fix) instead of one generic message, and
# Airflow's presets are accepted (see tests/unit/test_cron.py for the full table).
@pytest.mark.parametrize(
    ("cron", "reason"),
    [
        ("0 6 * *", "4 fields is not a cron"),
        ("0 6 * * * *", r"six fields outside cron\(...\) are ambiguous"),
        ("61 6 * * *", "minute: 61 is outside 0-59"),
        ("0 24 * * *", "hour: 24 is outside 0-23"),
        ("0 6 32 * *", "day-of-month: 32 is outside 1-31"),
        ("not a cron", "3 fields is not a cron"),
        ("", "the schedule is empty"),
        (None, "needs timetable="),
        (5, "got int"),
    ],
)
def test_cron_must_be_valid(cron: Any, reason: str) -> None:
    with pytest.raises(DefinitionError, match=f"^AssetOrTimeSchedule: .*{reason}"):
        AssetOrTimeSchedule(cron, A)


def test_presets_are_accepted() -> None:
    assert AssetOrTimeSchedule("@daily", A).eventbridge_expression() == "cron(0 0 * * ? *)"


@pytest.mark.parametrize("cron", ["0 6 1 * 1", "0 6 1-5 * MON", "0 6 */2 * 1-5"])
def test_both_day_fields_restricted_is_refused(cron: str) -> None:
    with pytest.raises(DefinitionError, match="restricts both day-of-month and day-of-week"):
        AssetOrTimeSchedule(cron, A)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "utc+2", "", "../etc/passwd"])
def test_unknown_time_zone_is_refused(zone: str) -> None:
    with pytest.raises(DefinitionError, match="unknown time zone"):
        AssetOrTimeSchedule("0 6 * * *", A, timezone=zone)


def test_empty_asset_list_is_refused() -> None:
    with pytest.raises(DefinitionError, match="AssetOrTimeSchedule assets: an empty list"):
        AssetOrTimeSchedule("0 6 * * *", [])


def test_asset_or_time_is_immutable_and_compares_by_value() -> None:
    schedule = AssetOrTimeSchedule("0 6 * * *", A, timezone="Europe/Berlin")
    with pytest.raises(AttributeError, match="immutable"):
        schedule.cron = "0 7 * * *"  # type: ignore[misc]
    assert schedule == AssetOrTimeSchedule("0 6 * * *", Asset("s3://bucket/a"), timezone="Europe/Berlin")
    assert schedule != AssetOrTimeSchedule("0 6 * * *", A)
    assert schedule != AssetOrTimeSchedule("0 7 * * *", A, timezone="Europe/Berlin")
    assert hash(schedule) == hash(AssetOrTimeSchedule("0 6 * * *", A, timezone="Europe/Berlin"))


# --- EventBridge expressions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "expression"),
    [
        ("0 6 * * *", "cron(0 6 * * ? *)"),
        ("0 6 * * 1-5", "cron(0 6 ? * 2-6 *)"),
        ("0 6 1 * *", "cron(0 6 1 * ? *)"),
        ("0 6 * * 0", "cron(0 6 ? * 1 *)"),
        ("0 6 * * 7", "cron(0 6 ? * 1 *)"),
        ("0 6 * * 6", "cron(0 6 ? * 7 *)"),
        ("0 6 * * 0,6", "cron(0 6 ? * 1,7 *)"),
        ("0 6 * * MON-FRI", "cron(0 6 ? * MON-FRI *)"),
        ("15,45 8-18 * * *", "cron(15,45 8-18 * * ? *)"),
        ("30 2 1,15 1-6 *", "cron(30 2 1,15 1-6 ? *)"),
        ("0 6 ? * 1", "cron(0 6 ? * 2 *)"),
        ("0 6 1 * ?", "cron(0 6 1 * ? *)"),
        ("0 6 ? * *", "cron(0 6 * * ? *)"),
    ],
)
def test_eventbridge_expression(cron: str, expression: str) -> None:
    assert AssetOrTimeSchedule(cron, A).eventbridge_expression() == expression


def eventbridge_weekdays(field: str) -> set[int]:
    """The days (Python weekday numbers, Monday = 0) an EventBridge day-of-week field (Sunday = 1) names."""
    days: set[int] = set()
    for part in field.split(","):
        base, _, step = part.partition("/")
        if base in ("*", "?"):
            first, last = 1, 7
        elif "-" in base:
            first, last = (int(x) for x in base.split("-"))
        else:
            first = int(base)
            last = 7 if step else first
        days.update(range(first, last + 1, int(step or 1)))
    return {(d - 2) % 7 for d in days}


def cron_weekdays(cron: str) -> set[int]:
    it = croniter(cron, datetime(2026, 11, 1, tzinfo=UTC))  # a Sunday
    return {it.get_next(datetime).weekday() for _ in range(21)}


@pytest.mark.parametrize("dow", ["1-5", "0", "0,3", "6", "2-4"])
def test_eventbridge_day_of_week_names_the_same_days(dow: str) -> None:
    cron = f"0 6 * * {dow}"
    field = AssetOrTimeSchedule(cron, A).eventbridge_expression()[len("cron(") : -1].split()[4]
    assert eventbridge_weekdays(field) == cron_weekdays(cron)


@pytest.mark.parametrize("dow", ["*/2", "1-5/2", "0-6/3"])
def test_eventbridge_day_of_week_steps_name_the_same_days(dow: str) -> None:
    cron = f"0 6 * * {dow}"
    field = AssetOrTimeSchedule(cron, A).eventbridge_expression()[len("cron(") : -1].split()[4]
    assert eventbridge_weekdays(field) == cron_weekdays(cron)


def test_eventbridge_nth_weekday() -> None:
    # the second Monday of the month
    assert AssetOrTimeSchedule("0 6 * * 1#2", A).eventbridge_expression() == "cron(0 6 ? * 2#2 *)"


# --- ticks --------------------------------------------------------------------------------------


def test_ticks_in_utc_exclude_after_and_include_until() -> None:
    schedule = AssetOrTimeSchedule("0 6 * * *", A)
    ticks = schedule.ticks_between(
        datetime(2026, 11, 20, 6, tzinfo=UTC), datetime(2026, 11, 22, 6, tzinfo=UTC)
    )
    assert ticks == [datetime(2026, 11, 21, 6, tzinfo=UTC), datetime(2026, 11, 22, 6, tzinfo=UTC)]
    assert all(t.tzinfo is UTC for t in ticks)


def test_no_ticks_in_an_empty_window() -> None:
    schedule = AssetOrTimeSchedule("0 6 * * *", A)
    assert (
        schedule.ticks_between(datetime(2026, 11, 20, 7, tzinfo=UTC), datetime(2026, 11, 21, 5, tzinfo=UTC))
        == []
    )


def test_ticks_are_read_in_the_schedule_time_zone() -> None:
    schedule = AssetOrTimeSchedule("0 6 * * *", A, timezone="America/New_York")
    ticks = schedule.ticks_between(datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 22, tzinfo=UTC))
    assert ticks == [datetime(2026, 11, 20, 11, tzinfo=UTC), datetime(2026, 11, 21, 11, tzinfo=UTC)]


def test_bounds_in_other_offsets_mean_the_same_instants() -> None:
    schedule = AssetOrTimeSchedule("0 6 * * *", A)
    plus_two = timezone(timedelta(hours=2))
    ticks = schedule.ticks_between(
        datetime(2026, 11, 20, 8, tzinfo=plus_two), datetime(2026, 11, 21, 8, tzinfo=plus_two)
    )
    assert ticks == [datetime(2026, 11, 21, 6, tzinfo=UTC)]


def test_ticks_follow_the_october_dst_change_in_berlin() -> None:
    # 06:00 Berlin is 04:00Z in summer time (CEST) and 05:00Z from 2026-10-25 (CET)
    schedule = AssetOrTimeSchedule("0 6 * * *", A, timezone="Europe/Berlin")
    ticks = schedule.ticks_between(
        datetime(2026, 10, 23, 12, tzinfo=UTC), datetime(2026, 10, 27, 12, tzinfo=UTC)
    )
    assert ticks == [
        datetime(2026, 10, 24, 4, tzinfo=UTC),
        datetime(2026, 10, 25, 5, tzinfo=UTC),
        datetime(2026, 10, 26, 5, tzinfo=UTC),
        datetime(2026, 10, 27, 5, tzinfo=UTC),
    ]


def test_hourly_ticks_across_the_dst_changes_are_one_per_real_hour() -> None:
    schedule = AssetOrTimeSchedule("0 * * * *", A, timezone="Europe/Berlin")
    spring = schedule.ticks_between(
        datetime(2026, 3, 28, 23, 30, tzinfo=UTC), datetime(2026, 3, 29, 2, 30, tzinfo=UTC)
    )
    assert spring == [datetime(2026, 3, 29, h, tzinfo=UTC) for h in (0, 1, 2)]


def test_daily_tick_in_the_repeated_hour_runs_once() -> None:
    schedule = AssetOrTimeSchedule("30 2 * * *", A, timezone="Europe/Berlin")
    ticks = schedule.ticks_between(
        datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 26, 12, tzinfo=UTC)
    )
    assert ticks == [datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 26, 1, 30, tzinfo=UTC)]


def test_daily_tick_in_the_skipped_hour_is_skipped_like_eventbridge() -> None:
    schedule = AssetOrTimeSchedule("30 2 * * *", A, timezone="Europe/Berlin")
    ticks = schedule.ticks_between(
        datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 30, 12, tzinfo=UTC)
    )
    assert ticks == [datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("after", "until"),
    [
        (datetime(2026, 11, 20), datetime(2026, 11, 21, tzinfo=UTC)),
        (datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21)),
    ],
)
def test_ticks_refuse_naive_datetimes(after: datetime, until: datetime) -> None:
    with pytest.raises(ValueError, match="aware"):
        AssetOrTimeSchedule("0 6 * * *", A).ticks_between(after, until)


# --- other schedules ----------------------------------------------------------------------------


def test_partitioned_schedule_defaults_to_identity() -> None:
    schedule = PartitionedAssetSchedule(A)
    assert schedule.mapper == IdentityMapper()
    assert schedule.partitioned is True
    assert schedule.condition == A


def test_partitioned_schedule_checks_the_mapper() -> None:
    with pytest.raises(DefinitionError, match="mapper must be a PartitionMapper"):
        PartitionedAssetSchedule(A, mapper="daily")  # type: ignore[arg-type]


def test_partitioned_schedule_is_immutable_and_compares_by_value() -> None:
    schedule = PartitionedAssetSchedule([A, B], mapper=DailyMapper())
    assert schedule.condition == A & B
    assert schedule == PartitionedAssetSchedule(A & B, DailyMapper())
    assert schedule != PartitionedAssetSchedule(A & B, HourlyMapper())
    assert hash(schedule) == hash(PartitionedAssetSchedule(A & B, DailyMapper()))
    with pytest.raises(AttributeError, match="immutable"):
        schedule.mapper = HourlyMapper()  # type: ignore[misc]


def test_as_schedule_wraps_conditions() -> None:
    assert as_schedule(A | B, "s") == AssetSchedule(A | B)
    assert as_schedule([A, B], "s") == AssetSchedule(A & B)
    assert as_schedule(A, "s").partitioned is False
    timed = AssetOrTimeSchedule("0 6 * * *", A)
    assert as_schedule(timed, "s") is timed
    with pytest.raises(DefinitionError, match="got int"):
        as_schedule(5, "s")


def test_utc_helper() -> None:
    assert utc(datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))) == datetime(
        2026, 1, 1, tzinfo=UTC
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        utc(datetime(2026, 1, 1))


# --- documents ----------------------------------------------------------------------------------


def test_schedule_document_shapes() -> None:
    assert AssetSchedule(A).to_json() == {
        "kind": "assets",
        "condition": {"type": "asset", "uri": "s3://bucket/a"},
    }
    assert AssetOrTimeSchedule("0 6 * * *", A, timezone="Europe/Berlin").to_json() == {
        "kind": "asset_or_time",
        "cron": "0 6 * * *",
        "timezone": "Europe/Berlin",
        "condition": {"type": "asset", "uri": "s3://bucket/a"},
    }
    assert PartitionedAssetSchedule(A, WeeklyMapper()).to_json() == {
        "kind": "partitioned",
        "condition": {"type": "asset", "uri": "s3://bucket/a"},
        "mapper": {"grain": "weekly"},
        "key": None,
    }


@pytest.mark.parametrize(
    "schedule",
    [
        AssetSchedule(A),
        AssetSchedule((A & B) | AssetAlias("x")),
        AssetOrTimeSchedule("*/5 * * * 1-5", [A, B], timezone="Asia/Kolkata"),
        PartitionedAssetSchedule(A | B),
        PartitionedAssetSchedule(A, MonthlyMapper()),
    ],
    ids=repr,
)
def test_schedule_round_trip(schedule: Any) -> None:
    assert schedule_from_json(schedule.to_json()) == schedule


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": "weekly", "condition": {"type": "asset", "uri": "a"}},
        {"kind": "assets"},
        {"condition": {"type": "asset", "uri": "a"}},
        {
            "kind": "asset_or_time",
            "cron": "bad",
            "timezone": "UTC",
            "condition": {"type": "asset", "uri": "a"},
        },
        {"kind": "asset_or_time", "cron": "0 6 * * *", "condition": {"type": "asset", "uri": "a"}},
        {"kind": "partitioned", "condition": {"type": "asset", "uri": "a"}, "mapper": {"grain": "yearly"}},
        {"kind": "partitioned", "condition": {"type": "asset", "uri": "a"}},
        {"kind": "assets", "condition": {"type": "all", "of": []}},
    ],
)
def test_schedule_from_json_refuses_bad_documents(doc: dict[str, Any]) -> None:
    with pytest.raises(DocumentError):
        schedule_from_json(doc)


def test_unknown_kind_message_names_it() -> None:
    with pytest.raises(DocumentError, match=re.escape("unknown schedule kind 'weekly'")):
        schedule_from_json({"kind": "weekly", "condition": {"type": "asset", "uri": "a"}})


# --- manual, time, asset-and-time, cron-partition (issue 16) ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind", "expression"),
    [
        (None, "manual", None),
        ("@daily", "time", "cron(0 0 * * ? *)"),
        ("0 6 * * 1-5", "time", "cron(0 6 ? * 2-6 *)"),
        (timedelta(minutes=30), "time", "rate(30 minutes)"),
        (TimeSpec("0 6 * * *", "Europe/Berlin"), "time", "cron(0 6 * * ? *)"),
        (CronTriggerTimetable("0 6 * * *", timezone="Asia/Tokyo"), "time", "cron(0 6 * * ? *)"),
        (DeltaTriggerTimetable(timedelta(hours=2)), "time", "rate(2 hours)"),
    ],
    ids=repr,
)
def test_schedule_none_and_time_only_schedules(value: Any, kind: str, expression: str | None) -> None:
    schedule = as_schedule(value, "s")
    assert schedule.kind == kind and schedule.condition is NO_ASSETS and not schedule.has_assets
    assert schedule.eventbridge_expression() == expression
    assert schedule_from_json(schedule.to_json()) == schedule


def test_time_only_schedule_documents() -> None:
    assert ManualSchedule().to_json() == {"kind": "manual"}
    assert TimeSchedule("@hourly", "Europe/Berlin").to_json() == {
        "kind": "time",
        "cron": "@hourly",
        "timezone": "Europe/Berlin",
    }
    started = TimeSchedule(TimeSpec(timedelta(hours=1), start=datetime(2026, 1, 1, tzinfo=UTC)))
    assert started.to_json()["start"] == "2026-01-01T00:00:00Z"
    assert schedule_from_json(started.to_json()) == started
    assert (
        ManualSchedule().ticks_between(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))
        == []
    )


def test_a_string_schedule_that_looks_like_a_uri_is_refused_with_the_fix() -> None:
    with pytest.raises(DefinitionError, match=r"looks like an asset URI.*Asset\('s3://bucket/a'\)"):
        as_schedule("s3://bucket/a", "s")


def test_asset_or_time_takes_airflow_s_keywords_and_any_time_spec() -> None:
    airflow_style = AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 0 * * *", timezone="UTC"), assets=(A | B)
    )
    assert airflow_style == AssetOrTimeSchedule("0 0 * * *", A | B)
    assert AssetOrTimeSchedule(timedelta(hours=1), A).eventbridge_expression() == "rate(1 hour)"
    assert AssetOrTimeSchedule(cron="@daily", assets=[A]).cron == "@daily"
    assert AssetOrTimeSchedule("@daily", A, timezone="Asia/Kolkata").timezone == "Asia/Kolkata"
    with pytest.raises(DefinitionError, match="timetable= or cron=, not both"):
        AssetOrTimeSchedule("@daily", A, cron="@hourly")
    with pytest.raises(DefinitionError, match="needs assets="):
        AssetOrTimeSchedule("@daily")
    with pytest.raises(DefinitionError, match="give the time zone once"):
        AssetOrTimeSchedule(TimeSpec("@daily", "Asia/Tokyo"), A, timezone="UTC")


def test_asset_and_time_schedule() -> None:
    schedule = AssetAndTimeSchedule("0 * * * *", A & B, timezone="Europe/Berlin")
    assert (schedule.kind, schedule.has_assets, schedule.runs_on_assets) == ("asset_and_time", True, False)
    assert schedule.to_json() == {
        "kind": "asset_and_time",
        "cron": "0 * * * *",
        "timezone": "Europe/Berlin",
        "condition": (A & B).to_json(),
    }
    assert schedule_from_json(schedule.to_json()) == schedule
    assert schedule != AssetOrTimeSchedule("0 * * * *", A & B, timezone="Europe/Berlin")


def test_cron_partition_timetable_keys_follow_airflow() -> None:
    hourly = CronPartitionTimetable("0 * * * *")
    tick = datetime(2026, 11, 21, 10, tzinfo=UTC)
    assert hourly.partition_key_for(tick) == "2026-11-21T10:00:00"  # Airflow's default key format
    previous_day = CronPartitionTimetable(
        "0 1 * * *", timezone="Asia/Tokyo", run_offset=-1, key_format="%Y-%m-%d"
    )
    assert previous_day.partition_key_for(datetime(2026, 11, 20, 16, tzinfo=UTC)) == "2026-11-20"
    assert (
        CronPartitionTimetable("@daily", run_offset=1, key_format="%Y-%m-%d").partition_key_for(
            datetime(2026, 11, 21, tzinfo=UTC)
        )
        == "2026-11-22"
    )
    assert (hourly.partitioned, hourly.has_assets, hourly.kind) == (True, False, "cron_partition")
    assert schedule_from_json(previous_day.to_json()) == previous_day
    assert previous_day.to_json() == {
        "kind": "cron_partition",
        "cron": "0 1 * * *",
        "timezone": "Asia/Tokyo",
        "run_offset": -1,
        "key_format": "%Y-%m-%d",
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"key_format": "%Y/%m/%d"}, "must not contain '/'"),
        ({"key_format": "daily"}, "strftime format"),
        ({"run_offset": 1000}, "between -366 and 366"),
        ({"run_offset": True}, "whole number of ticks"),
    ],
)
def test_bad_cron_partition_timetables_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        CronPartitionTimetable("@daily", **kwargs)


def test_partitioned_asset_schedule_by_key_field() -> None:
    schedule = PartitionedAssetSchedule(A & B, key="payload.tenant")
    assert schedule.key_field == "payload.tenant" and schedule.partitioned
    assert schedule.to_json()["key"] == "payload.tenant"
    assert schedule_from_json(schedule.to_json()) == schedule
    assert PartitionedAssetTimetable(
        assets=A, partition_key_mapper=DailyMapper()
    ) == PartitionedAssetSchedule(A, DailyMapper())
    for key in ("", "a..b", "a b", 5):
        with pytest.raises(DefinitionError, match="key must be a dotted path"):
            PartitionedAssetSchedule(A, key=key)  # type: ignore[arg-type]


def test_schedules_swap_their_conditions_for_ref_resolution() -> None:
    for schedule in (
        AssetSchedule(A),
        AssetOrTimeSchedule("@daily", A),
        AssetAndTimeSchedule("@daily", A),
        PartitionedAssetSchedule(A, DailyMapper(), key="t"),
    ):
        swapped = schedule.with_condition(B)
        assert swapped.condition == B and swapped.kind == schedule.kind and swapped.time == schedule.time
    assert ManualSchedule().with_condition(B) == ManualSchedule()
