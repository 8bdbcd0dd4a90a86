"""Time schedules: EventBridge's cron and rate rules, Airflow crons and presets, fire times (DST, month ends)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from croniter import croniter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from assetflow import Asset, AssetOrTimeSchedule, DefinitionError
from assetflow.core.cron import PRESETS, REFUSED_PRESETS, ScheduleExpressionError, TimeSpec
from assetflow.core.errors import DocumentError
from assetflow.core.schedules import schedule_from_json


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def days(ticks: list[datetime]) -> list[int]:
    return [t.day for t in ticks]


# --- accepted: what each input deploys as ----------------------------------------------------------

ACCEPTED: list[tuple[Any, str]] = [
    # Airflow's five fields: day-of-week 0-7 (Sunday 0 or 7) becomes 1-7 (Sunday 1), one day field gets '?'
    ("0 6 * * *", "cron(0 6 * * ? *)"),
    ("0 6 * * 1-5", "cron(0 6 ? * 2-6 *)"),
    ("0 6 1 * *", "cron(0 6 1 * ? *)"),
    ("0 6 * * 0", "cron(0 6 ? * 1 *)"),
    ("0 6 * * 7", "cron(0 6 ? * 1 *)"),
    ("0 6 * * 0,7", "cron(0 6 ? * 1 *)"),
    ("0 6 * * 6", "cron(0 6 ? * 7 *)"),
    ("0 6 * * 0,6", "cron(0 6 ? * 1,7 *)"),
    ("0 6 * * 1,2,3", "cron(0 6 ? * 2-4 *)"),
    ("0 6 * * 5-7", "cron(0 6 ? * 1,6,7 *)"),
    ("0 6 * * 0-6", "cron(0 6 * * ? *)"),
    ("0 6 * * */2", "cron(0 6 ? * 1,3,5,7 *)"),
    ("0 6 * * 1-5/2", "cron(0 6 ? * 2,4,6 *)"),
    ("0 6 * * 1/2", "cron(0 6 ? * 2,4,6 *)"),
    ("0 6 * * MON-FRI", "cron(0 6 ? * MON-FRI *)"),
    ("0 6 * * mon-fri", "cron(0 6 ? * MON-FRI *)"),
    ("0 6 * * SUN", "cron(0 6 ? * SUN *)"),
    ("0 6 * * SAT-SUN", "cron(0 6 ? * 1,7 *)"),
    ("0 6 * * FRI-SUN", "cron(0 6 ? * 1,6,7 *)"),
    ("0 6 * * MON-FRI/2", "cron(0 6 ? * 2,4,6 *)"),
    ("0 6 * * 1#2", "cron(0 6 ? * 2#2 *)"),
    ("0 6 * * 0#1", "cron(0 6 ? * 1#1 *)"),
    ("0 6 * * 7#5", "cron(0 6 ? * 1#5 *)"),
    ("0 6 * * L5", "cron(0 6 ? * 6L *)"),
    ("0 6 * * 5L", "cron(0 6 ? * 6L *)"),
    ("0 6 * * L0", "cron(0 6 ? * 1L *)"),
    ("0 6 L * *", "cron(0 6 L * ? *)"),
    ("0 6 LW * *", "cron(0 6 LW * ? *)"),
    ("0 6 15W * *", "cron(0 6 15W * ? *)"),
    ("0 6 1w * *", "cron(0 6 1W * ? *)"),
    ("0 6 ? * 1", "cron(0 6 ? * 2 *)"),
    ("0 6 1 * ?", "cron(0 6 1 * ? *)"),
    ("0 6 ? * *", "cron(0 6 * * ? *)"),
    ("0 6 ? * ?", "cron(0 6 * * ? *)"),
    ("15,45 8-18 * * *", "cron(15,45 8-18 * * ? *)"),
    ("30 2 1,15 1-6 *", "cron(30 2 1,15 1-6 ? *)"),
    ("*/5 * * * *", "cron(*/5 * * * ? *)"),
    ("5/10 * * * *", "cron(5/10 * * * ? *)"),
    ("0-30/10 9-17/2 * * *", "cron(0-30/10 9-17/2 * * ? *)"),
    ("0 0 */3 JAN-MAR *", "cron(0 0 */3 JAN-MAR ? *)"),
    ("0 0 1 jan,jul *", "cron(0 0 1 JAN,JUL ? *)"),
    ("00 06 01 * *", "cron(0 6 1 * ? *)"),
    ("0  6   * *  *", "cron(0 6 * * ? *)"),
    # cron's backwards ranges wrap around; EventBridge gets them split
    ("0 22-2 * * *", "cron(0 0-2,22,23 * * ? *)"),
    ("0 0 30-2 * *", "cron(0 0 1,2,30,31 * ? *)"),
    ("0 0 1 NOV-FEB *", "cron(0 0 1 1,2,11,12 ? *)"),
    # both day fields restricted, but one names every day: cron reads that as "either", i.e. every day
    ("0 0 1 * 0-6", "cron(0 0 * * ? *)"),
    ("0 0 1-31 * 1", "cron(0 0 * * ? *)"),
    ("0 0 L * SUN-SAT", "cron(0 0 * * ? *)"),
    # Airflow's presets
    ("@hourly", "cron(0 * * * ? *)"),
    ("@daily", "cron(0 0 * * ? *)"),
    ("@midnight", "cron(0 0 * * ? *)"),
    ("@weekly", "cron(0 0 ? * 1 *)"),
    ("@monthly", "cron(0 0 1 * ? *)"),
    ("@quarterly", "cron(0 0 1 */3 ? *)"),
    ("@yearly", "cron(0 0 1 1 ? *)"),
    ("@annually", "cron(0 0 1 1 ? *)"),
    ("@DAILY", "cron(0 0 * * ? *)"),
    # EventBridge's own cron, checked and kept (names and L/W upper-cased, numbers canonical)
    ("cron(0 10 * * ? *)", "cron(0 10 * * ? *)"),
    ("cron(15 12 * * ? *)", "cron(15 12 * * ? *)"),
    ("cron(0 18 ? * MON-FRI *)", "cron(0 18 ? * MON-FRI *)"),
    ("cron(0 8 1 * ? *)", "cron(0 8 1 * ? *)"),
    ("cron(0/15 * * * ? *)", "cron(0/15 * * * ? *)"),
    ("cron(0/10 * ? * MON-FRI *)", "cron(0/10 * ? * MON-FRI *)"),
    ("cron(0/5 8-17 ? * MON-FRI *)", "cron(0/5 8-17 ? * MON-FRI *)"),
    ("cron(0 9 ? * 2#1 *)", "cron(0 9 ? * 2#1 *)"),
    ("cron(0 9 ? * MON#1 *)", "cron(0 9 ? * MON#1 *)"),
    ("cron(0 0 L * ? *)", "cron(0 0 L * ? *)"),
    ("cron(0 0 lw * ? *)", "cron(0 0 LW * ? *)"),
    ("cron(0 0 3W * ? *)", "cron(0 0 3W * ? *)"),
    ("cron(0 0 ? * 6L *)", "cron(0 0 ? * 6L *)"),
    ("cron(0 0 ? * L *)", "cron(0 0 ? * L *)"),
    ("cron(0 0 1 JAN,FEB,MAR ? *)", "cron(0 0 1 JAN,FEB,MAR ? *)"),
    ("cron(0 0 1 1 ? 2026-2030)", "cron(0 0 1 1 ? 2026-2030)"),
    ("cron(0 0 1 1 ? 2026/2)", "cron(0 0 1 1 ? 2026/2)"),
    ("cron(0 0 1 1 ? 1970,2199)", "cron(0 0 1 1 ? 1970,2199)"),
    ("cron(0 0 29 2 ? *)", "cron(0 0 29 2 ? *)"),
    ("  cron( 0  6 * * ? * )  ", "cron(0 6 * * ? *)"),
    # rates, and timedeltas as rates
    ("rate(1 minute)", "rate(1 minute)"),
    ("rate(5 minutes)", "rate(5 minutes)"),
    ("rate(1 hour)", "rate(1 hour)"),
    ("rate(12 hours)", "rate(12 hours)"),
    ("rate(1 day)", "rate(1 day)"),
    ("rate(30 days)", "rate(30 days)"),
    ("rate(5 Minutes)", "rate(5 minutes)"),
    ("rate(05 minutes)", "rate(5 minutes)"),
    (timedelta(minutes=1), "rate(1 minute)"),
    (timedelta(minutes=90), "rate(90 minutes)"),
    (timedelta(hours=1), "rate(1 hour)"),
    (timedelta(hours=36), "rate(36 hours)"),
    (timedelta(days=1), "rate(1 day)"),
    (timedelta(weeks=1), "rate(7 days)"),
    (timedelta(seconds=7200), "rate(2 hours)"),
]


@pytest.mark.parametrize(("value", "expression"), ACCEPTED, ids=[repr(v) for v, _ in ACCEPTED])
def test_accepted(value: Any, expression: str) -> None:
    spec = TimeSpec(value)
    assert spec.expression == expression
    assert spec.eventbridge_expression() == expression
    assert spec.kind == expression[:4]
    # the deployed form reads back as itself
    assert TimeSpec(expression).expression == expression


# --- refused: each with its reason and the field at fault ---------------------------------------

REFUSED: list[tuple[Any, str | None, str]] = [
    # not a schedule at all
    (None, None, "got NoneType"),
    (6, None, "got int"),
    ("", None, "the schedule is empty"),
    ("   ", None, "the schedule is empty"),
    ("0 6 * *", None, "4 fields is not a cron"),
    ("not a cron", None, "3 fields is not a cron"),
    ("0 0 6 * * ? * *", None, "8 fields is not a cron"),
    (
        "0 6 * * ? *",
        None,
        r"six fields outside cron\(...\) are ambiguous.*wrap EventBridge's six fields in cron",
    ),
    # Airflow presets EventBridge cannot run, and unknown ones
    (
        "@once",
        None,
        r"@once has no EventBridge Scheduler equivalent; use schedule=None.*assetflow runs trigger",
    ),
    (
        "@continuous",
        None,
        r"@continuous has no EventBridge Scheduler equivalent.*schedule on assets.*rate\(1 minute\)",
    ),
    ("@fortnightly", None, "unknown preset; use one of @hourly, @daily"),
    ("@reboot", None, "unknown preset"),
    ("at(2026-01-01T00:00:00)", None, r"one-time at\(...\) schedules do not recur; use schedule=None"),
    # five fields: ranges
    ("61 6 * * *", "minute", "61 is outside 0-59"),
    ("0 24 * * *", "hour", "24 is outside 0-23"),
    ("0 6 0 * *", "day-of-month", "0 is outside 1-31"),
    ("0 6 32 * *", "day-of-month", "32 is outside 1-31"),
    ("0 6 * 0 *", "month", "0 is outside 1-12"),
    ("0 6 * 13 *", "month", "13 is outside 1-12"),
    ("0 6 * * 8", "day-of-week", "8 is outside 0-7"),
    ("0 6 * * 1-8", "day-of-week", "8 is outside 0-7"),
    # five fields: syntax
    ("x 6 * * *", "minute", "'X' is not a number"),
    ("0 6 * FOO *", "month", "'FOO' is not a number 1-12 or one of JAN"),
    ("0 6 * * MONDAY", "day-of-week", "'MONDAY' is not a number 0-7 or one of SUN"),
    ("0 MON * * *", "hour", "'MON' is not a number"),
    ("0 6 1,,2 * *", "day-of-month", "empty list item"),
    ("0 6 1- * *", "day-of-month", "is not a value, a range"),
    ("0 6 *-5 * *", "day-of-month", r"'\*-5' is not a range"),
    ("*/0 * * * *", "minute", "step in '\\*/0' must be a whole number 1-59"),
    ("*/60 * * * *", "minute", "step in '\\*/60' is larger than 59.*write 0"),
    ("0 */24 * * *", "hour", "larger than 23"),
    ("0 6 * * */7", "day-of-week", "larger than 6"),
    ("0 22-2/2 * * *", "hour", "backwards range in '22-2/2' cannot take a step"),
    (
        "5-5 * * * *",
        "minute",
        "'5-5' is a range of one value, which croniter \\(Airflow\\) reads as every value.*write 5 or \\*",
    ),
    ("0 0 * * MON-MON", "day-of-week", "range of one value"),
    ("0 0 1-1/5 * *", "day-of-month", "range of one value"),
    ("0 ? * * *", "hour", "'\\?' is only for day-of-month or day-of-week; write \\*"),
    ("? 6 * * *", "minute", "'\\?' is only for day-of-month or day-of-week"),
    ("0 6 * ? *", "month", "'\\?' is only for day-of-month or day-of-week"),
    # five fields: day-of-month and day-of-week together (cron's OR)
    ("0 6 1 * 1", "day-of-month", "restricts both day-of-month and day-of-week.*write \\* in one of them"),
    ("0 6 1-5 * MON", "day-of-month", "restricts both day-of-month and day-of-week"),
    ("0 6 */2 * 1-5", "day-of-month", "cron runs when either matches"),
    ("0 6 L * 5", "day-of-month", "restricts both day-of-month and day-of-week"),
    ("0 6 15 * 1#1", "day-of-month", "restricts both day-of-month and day-of-week"),
    # five fields: L, W and #
    ("0 6 * * L", "day-of-week", "L in day-of-week names the last of one day.*write L5 \\(or 5L\\)"),
    ("0 6 * * 1,L5", "day-of-week", "L in day-of-week names the last of one day"),
    ("0 6 * * 1#2,3", "day-of-week", "with '#' the field holds exactly one expression"),
    ("0 6 * * 1#6", "day-of-week", "occurrence must be 1-5"),
    ("0 6 * * 1#0", "day-of-week", "occurrence must be 1-5"),
    ("0 6 1#1 * *", "day-of-month", "'#' in '1#1' is for day-of-week"),
    ("0 6 1,L * *", "day-of-month", "L and W must stand alone"),
    ("0 6 1-5W * *", "day-of-month", "L and W must stand alone"),
    ("0 6 30W * *", "day-of-month", "W takes a day 1-28.*write LW"),
    ("0 6 0W * *", "day-of-month", "W takes a day 1-28"),
    ("0 6 L-2 * *", "day-of-month", "an offset from the last day.*use L or LW"),
    ("0 6 L2 * *", "day-of-month", "L and W must stand alone"),
    # schedules that would never run
    ("0 6 31 2 *", "day-of-month", "31 never falls in FEB, so this schedule would never run"),
    ("0 6 30,31 2 *", "day-of-month", "never falls in FEB"),
    ("0 6 31 4,6,9,11 *", "day-of-month", "31 never falls in APR, JUN, SEP, NOV"),
    # EventBridge's cron: shape
    ("cron(0 6 * * ?)", None, r"cron\(...\) takes six fields, not 5; add the year: cron\(0 6 \* \* \? \*\)"),
    ("cron(0 0 6 * * ? *)", None, "takes six fields, not 7; EventBridge has no seconds field"),
    ("cron()", None, "takes six fields, not 0"),
    ("cron(0 6 * * ? *", None, "the closing '\\)' is missing"),
    ("rate(5 minutes", None, "the closing '\\)' is missing"),
    # EventBridge's cron: the '?' rule
    ("cron(0 6 * * * *)", "day-of-week", r"must be '\?'.*write '\?' in day-of-week: cron\(0 6 \* \* \? \*\)"),
    ("cron(0 6 * * MON *)", "day-of-month", r"write '\?' in day-of-month: cron\(0 6 \? \* MON \*\)"),
    ("cron(0 6 1 * MON *)", "day-of-month", "keep one of them and write '\\?' in the other"),
    ("cron(0 6 ? * ? *)", "day-of-week", "day-of-month and day-of-week are both '\\?'"),
    ("cron(0 ? * * ? *)", "hour", "'\\?' is only for day-of-month or day-of-week"),
    # EventBridge's cron: ranges and wildcards per field
    ("cron(60 6 * * ? *)", "minute", "60 is outside 0-59"),
    ("cron(0 6 * * ? 1969)", "year", "1969 is outside 1970-2199"),
    ("cron(0 6 * * ? 2200)", "year", "2200 is outside 1970-2199"),
    ("cron(0 6 ? * 0 *)", "day-of-week", "0 is outside 1-7"),
    ("cron(0 6 ? * 8 *)", "day-of-week", "8 is outside 1-7"),
    ("cron(0 6 ? * */2 *)", "day-of-week", "takes no '/' step; list the days instead: 1,3,5,7"),
    ("cron(0 6 ? * 2-6/2 *)", "day-of-week", "list the days instead: 2,4,6"),
    ("cron(0 22-2 * * ? *)", "hour", "runs backwards.*write it as two ranges: 22-23,0-2"),
    ("cron(0 6 ? * FRI-MON *)", "day-of-week", "runs backwards.*6-7,1-2"),
    ("cron(0 6 ? * 2#1,6#3 *)", "day-of-week", "with '#' the field holds exactly one expression"),
    ("cron(0 6 ? * 2#6 *)", "day-of-week", "occurrence must be 1-5"),
    ("cron(0 6 ? * 1-3L *)", "day-of-week", "L must stand alone \\(L = Saturday\\) or follow one day"),
    ("cron(0 6 ? * 15W *)", "day-of-week", "'15W' is not a number 1-7"),
    ("cron(0 6 L-3 * ? *)", "day-of-month", "an offset from the last day"),
    ("cron(0 6 1,L * ? *)", "day-of-month", "L and W must stand alone"),
    ("cron(0 6 31W * ? *)", "day-of-month", "W takes a day 1-28"),
    ("cron(0 6 1#2 * ? *)", "day-of-month", "is for day-of-week"),
    ("cron(0 6 31 2 ? *)", "day-of-month", "never falls in FEB"),
    # rates
    ("rate(0 minutes)", "rate", "the value '0' is not a positive whole number"),
    ("rate(-5 minutes)", "rate", "not a positive whole number"),
    ("rate(1.5 hours)", "rate", "not a positive whole number"),
    ("rate(1 minutes)", "rate", r"must be singular for 1; write rate\(1 minute\)"),
    ("rate(5 minute)", "rate", r"must be plural for 5; write rate\(5 minutes\)"),
    ("rate(2 day)", "rate", r"write rate\(2 days\)"),
    ("rate(30 seconds)", "rate", r"finest rate is one minute; write rate\(1 minute\)"),
    ("rate(2 weeks)", "rate", r"no week unit; write rate\(14 days\)"),
    ("rate(1 month)", "rate", "no month unit.*@monthly"),
    ("rate(1 fortnight)", "rate", "'fortnight' is not a unit"),
    ("rate(99999999999 days)", "rate", "too long an interval; use a cron"),
    ("rate(5)", None, "takes a value and a unit"),
    ("rate(every 5 minutes)", None, "takes a value and a unit"),
    (timedelta(0), "rate", "the interval must be positive"),
    (timedelta(minutes=-5), "rate", "the interval must be positive"),
    (timedelta(seconds=30), "rate", r"finest rate is one minute; use timedelta\(minutes=1\)"),
    (timedelta(seconds=90), "rate", r"whole minutes.*timedelta\(minutes=1\) or timedelta\(minutes=2\)"),
    (timedelta(minutes=1, microseconds=1), "rate", "whole minutes"),
]


@pytest.mark.parametrize(("value", "field", "reason"), REFUSED, ids=[repr(v) for v, _, _ in REFUSED])
def test_refused(value: Any, field: str | None, reason: str) -> None:
    with pytest.raises(ScheduleExpressionError, match=reason) as caught:
        TimeSpec(value)
    assert caught.value.field == field
    if field is not None and field != "rate":
        assert f": {field}: " in str(caught.value)  # the message names the field


def test_the_tables_are_large_enough() -> None:
    assert len(ACCEPTED) + len(REFUSED) >= 80
    assert len(REFUSED) >= 40


def test_refusals_are_definition_errors() -> None:
    assert issubclass(ScheduleExpressionError, DefinitionError)
    assert issubclass(ScheduleExpressionError, ValueError)


def test_every_airflow_preset_is_decided() -> None:
    airflow = {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly"}
    assert airflow <= set(PRESETS) | set(REFUSED_PRESETS)
    assert set(PRESETS).isdisjoint(REFUSED_PRESETS)


# --- time zones and start -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"]
)
def test_iana_zones_are_accepted(zone: str) -> None:
    assert TimeSpec("0 6 * * *", zone).timezone == zone


@pytest.mark.parametrize("zone", ["Mars/Olympus", "utc+2", "europe/berlin", "", "../etc/passwd", None, 2])
def test_unknown_zones_are_refused(zone: Any) -> None:
    with pytest.raises(ScheduleExpressionError, match=r"unknown time zone .*use an IANA name") as caught:
        TimeSpec("0 6 * * *", zone)
    assert caught.value.field == "timezone"


def test_start_must_be_aware_and_is_kept_in_utc() -> None:
    with pytest.raises(ScheduleExpressionError, match="must be a timezone-aware datetime"):
        TimeSpec("@daily", start=datetime(2026, 1, 1))
    spec = TimeSpec("@daily", start=datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    assert spec.start == at(2026, 1, 1)
    assert spec.start is not None and spec.start.tzinfo is UTC


# --- the value ----------------------------------------------------------------------------------


def test_specs_compare_by_what_they_deploy() -> None:
    assert TimeSpec("@daily") == TimeSpec("0 0 * * *") == TimeSpec("cron(0 0 * * ? *)")
    assert hash(TimeSpec("@daily")) == hash(TimeSpec("0 0 * * *"))
    assert TimeSpec("@daily").source == "@daily"
    assert TimeSpec("0  0 * * *").source == "0 0 * * *"
    assert TimeSpec(timedelta(hours=1)) == TimeSpec("rate(1 hour)")
    assert TimeSpec("@daily") != TimeSpec("@daily", "Europe/Berlin")
    assert TimeSpec("@daily") != TimeSpec("@daily", start=at(2026, 1, 1))
    assert TimeSpec("@daily") != TimeSpec("@hourly")


def test_specs_are_immutable() -> None:
    spec = TimeSpec("@daily")
    with pytest.raises(AttributeError):
        spec.timezone = "Europe/Berlin"  # type: ignore[misc]


def test_kind_and_interval() -> None:
    assert (TimeSpec("@daily").kind, TimeSpec("@daily").interval) == ("cron", None)
    assert (TimeSpec("rate(2 hours)").kind, TimeSpec("rate(2 hours)").interval) == (
        "rate",
        timedelta(hours=2),
    )


@pytest.mark.parametrize(
    "spec",
    [
        TimeSpec("0 6 * * 1-5", "Europe/Berlin"),
        TimeSpec("@quarterly"),
        TimeSpec("cron(0 0 ? * 6L 2026-2030)", "America/New_York"),
        TimeSpec(timedelta(minutes=45), start=at(2026, 3, 1, 12)),
    ],
    ids=repr,
)
def test_document_round_trip(spec: TimeSpec) -> None:
    doc = spec.to_json()
    assert set(doc) == {"source", "expression", "timezone", "start"}
    rebuilt = TimeSpec.from_json(doc)
    assert rebuilt == spec
    assert rebuilt.source == spec.source


def test_document_shape() -> None:
    assert TimeSpec("@daily", "Europe/Berlin", start=at(2026, 1, 1)).to_json() == {
        "source": "@daily",
        "expression": "cron(0 0 * * ? *)",
        "timezone": "Europe/Berlin",
        "start": "2026-01-01T00:00:00Z",
    }


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({"timezone": "UTC"}, "invalid time schedule document"),
        ({"source": "@daily"}, "invalid time schedule document"),
        ({"source": "@daily", "timezone": "UTC", "start": "yesterday"}, "invalid time schedule document"),
        ({"source": "@daily", "timezone": "UTC", "start": 5}, "invalid time schedule document"),
        ({"source": "@once", "timezone": "UTC"}, "invalid time schedule document"),
        (
            {"source": "@daily", "timezone": "UTC", "expression": "cron(0 1 * * ? *)"},
            "was saved as 'cron\\(0 1 \\* \\* \\? \\*\\)' but now reads as",
        ),
    ],
)
def test_bad_documents(doc: dict[str, Any], reason: str) -> None:
    with pytest.raises(DocumentError, match=reason):
        TimeSpec.from_json(doc)


# --- fire times: basics -------------------------------------------------------------------------


def test_ticks_exclude_after_include_until_and_are_utc() -> None:
    ticks = TimeSpec("0 6 * * *").ticks_between(at(2026, 11, 20, 6), at(2026, 11, 22, 6))
    assert ticks == [at(2026, 11, 21, 6), at(2026, 11, 22, 6)]
    assert all(t.tzinfo is UTC for t in ticks)


def test_empty_and_reversed_windows() -> None:
    spec = TimeSpec("0 6 * * *")
    assert spec.ticks_between(at(2026, 11, 20, 7), at(2026, 11, 21, 5)) == []
    assert spec.ticks_between(at(2026, 11, 22), at(2026, 11, 20)) == []


@pytest.mark.parametrize(
    ("after", "until"),
    [(datetime(2026, 1, 1), at(2026, 1, 2)), (at(2026, 1, 1), datetime(2026, 1, 2))],
)
@pytest.mark.parametrize("value", ["@daily", "rate(1 hour)"])
def test_ticks_refuse_naive_datetimes(value: str, after: datetime, until: datetime) -> None:
    with pytest.raises(ValueError, match="aware"):
        TimeSpec(value).ticks_between(after, until)


def test_bounds_in_other_offsets_are_the_same_instants() -> None:
    plus_two = timezone(timedelta(hours=2))
    ticks = TimeSpec("0 6 * * *").ticks_between(
        datetime(2026, 11, 20, 8, tzinfo=plus_two), datetime(2026, 11, 21, 8, tzinfo=plus_two)
    )
    assert ticks == [at(2026, 11, 21, 6)]


def test_the_year_field_limits_ticks() -> None:
    spec = TimeSpec("cron(0 0 1 1 ? 2027,2029)")
    assert spec.ticks_between(at(2025, 1, 1), at(2031, 1, 1)) == [at(2027, 1, 1), at(2029, 1, 1)]


def test_no_ticks_outside_eventbridge_years() -> None:
    spec = TimeSpec("@yearly")
    assert spec.ticks_between(at(1960, 6, 1), at(1971, 6, 1)) == [at(1971, 1, 1)]
    assert spec.ticks_between(at(2199, 6, 1), at(2205, 6, 1)) == []


def test_cron_start_holds_back_earlier_ticks() -> None:
    spec = TimeSpec("0 6 * * *", start=at(2026, 11, 21, 6))
    assert spec.ticks_between(at(2026, 11, 19), at(2026, 11, 23)) == [
        at(2026, 11, 21, 6),
        at(2026, 11, 22, 6),
    ]


def test_the_same_ticks_whatever_the_window_split() -> None:
    spec = TimeSpec("*/7 * * * *", "Europe/Berlin")
    whole = spec.ticks_between(at(2026, 10, 24, 23), at(2026, 10, 25, 3))
    parts = spec.ticks_between(at(2026, 10, 24, 23), at(2026, 10, 25, 1, 3)) + spec.ticks_between(
        at(2026, 10, 25, 1, 3), at(2026, 10, 25, 3)
    )
    assert whole == parts


# --- fire times: daylight saving time -----------------------------------------------------------


def test_daily_ticks_follow_the_berlin_offset() -> None:
    # 06:00 Berlin is 04:00Z in summer time and 05:00Z from 2026-10-25
    ticks = TimeSpec("0 6 * * *", "Europe/Berlin").ticks_between(at(2026, 10, 23, 12), at(2026, 10, 27, 12))
    assert ticks == [at(2026, 10, 24, 4), at(2026, 10, 25, 5), at(2026, 10, 26, 5), at(2026, 10, 27, 5)]


def test_a_time_skipped_in_spring_does_not_fire() -> None:
    # New York jumps from 02:00 to 03:00 on 2026-03-08: there is no 02:30 that day
    ticks = TimeSpec("30 2 * * *", "America/New_York").ticks_between(at(2026, 3, 7), at(2026, 3, 10))
    assert ticks == [at(2026, 3, 7, 7, 30), at(2026, 3, 9, 6, 30)]


def test_a_time_repeated_in_autumn_fires_once_at_its_first_occurrence() -> None:
    # New York repeats 01:00-02:00 on 2026-11-01: 01:30 EDT (05:30Z) fires, 01:30 EST (06:30Z) does not
    ticks = TimeSpec("30 1 * * *", "America/New_York").ticks_between(at(2026, 10, 31), at(2026, 11, 3))
    assert ticks == [at(2026, 10, 31, 5, 30), at(2026, 11, 1, 5, 30), at(2026, 11, 2, 6, 30)]


def test_quarter_hours_across_the_berlin_autumn_change() -> None:
    # 02:00-03:00 happens twice on 2026-10-25; the repeat (01:00Z-02:00Z) has no fires
    ticks = TimeSpec("*/15 * * * *", "Europe/Berlin").ticks_between(
        at(2026, 10, 25, 0, 30), at(2026, 10, 25, 2, 15)
    )
    assert ticks == [at(2026, 10, 25, 0, 45), at(2026, 10, 25, 2), at(2026, 10, 25, 2, 15)]


def test_half_hours_across_the_berlin_spring_change() -> None:
    # 02:00 and 02:30 do not exist on 2026-03-29; real time keeps its half-hour steps
    ticks = TimeSpec("*/30 * * * *", "Europe/Berlin").ticks_between(at(2026, 3, 29), at(2026, 3, 29, 1, 30))
    assert ticks == [at(2026, 3, 29, 0, 30), at(2026, 3, 29, 1), at(2026, 3, 29, 1, 30)]


def test_half_hour_dst_shift_on_lord_howe() -> None:
    # Lord Howe moves 30 minutes: 02:00 -> 02:30 on 2026-10-04 (02:15 skipped), 02:00 -> 01:30 on 2026-04-05
    spring = TimeSpec("15 2 * * *", "Australia/Lord_Howe").ticks_between(at(2026, 10, 2), at(2026, 10, 5))
    assert spring == [at(2026, 10, 2, 15, 45), at(2026, 10, 4, 15, 15)]
    autumn = TimeSpec("45 1 * * *", "Australia/Lord_Howe").ticks_between(at(2026, 4, 3), at(2026, 4, 6))
    assert autumn == [at(2026, 4, 3, 14, 45), at(2026, 4, 4, 14, 45), at(2026, 4, 5, 15, 15)]


def test_rates_count_elapsed_time_through_dst() -> None:
    # rate(1 day) is 24 hours: 06:00 Berlin summer time becomes 05:00 after the change
    spec = TimeSpec("rate(1 day)", "Europe/Berlin", start=at(2026, 10, 24, 4))
    assert spec.ticks_between(at(2026, 10, 23), at(2026, 10, 26, 12)) == [
        at(2026, 10, 24, 4),
        at(2026, 10, 25, 4),
        at(2026, 10, 26, 4),
    ]


def test_rate_without_start_counts_from_the_epoch() -> None:
    spec = TimeSpec(timedelta(minutes=20))
    assert spec.ticks_between(at(2026, 1, 1, 0, 10), at(2026, 1, 1, 1)) == [
        at(2026, 1, 1, 0, 20),
        at(2026, 1, 1, 0, 40),
        at(2026, 1, 1, 1),
    ]
    # a tick exactly at `after` is not repeated
    assert spec.ticks_between(at(2026, 1, 1, 0, 20), at(2026, 1, 1, 0, 40)) == [at(2026, 1, 1, 0, 40)]


def test_rate_with_start_fires_at_start_and_every_interval() -> None:
    spec = TimeSpec("rate(90 minutes)", start=at(2026, 1, 1, 0, 7))
    assert spec.ticks_between(at(2025, 12, 31), at(2026, 1, 1, 3, 7)) == [
        at(2026, 1, 1, 0, 7),
        at(2026, 1, 1, 1, 37),
        at(2026, 1, 1, 3, 7),
    ]


# --- fire times: month ends, L, W and # ---------------------------------------------------------


def test_l_is_the_last_day_of_each_month() -> None:
    ticks = TimeSpec("0 0 L * *").ticks_between(at(2027, 12, 1), at(2028, 5, 1))
    assert [(t.month, t.day) for t in ticks] == [(12, 31), (1, 31), (2, 29), (3, 31), (4, 30)]


def test_last_day_in_a_time_zone_ahead_of_utc() -> None:
    # midnight of the last day in Tokyo is 15:00Z the day before
    ticks = TimeSpec("0 0 L * *", "Asia/Tokyo").ticks_between(at(2026, 1, 1), at(2026, 3, 1))
    assert ticks == [at(2026, 1, 30, 15), at(2026, 2, 27, 15)]


def test_lw_is_the_last_weekday() -> None:
    # 2026-01-31 is a Saturday, 2026-05-31 a Sunday, 2026-03-31 a Tuesday
    ticks = TimeSpec("cron(0 0 LW * ? *)").ticks_between(at(2026, 1, 1), at(2026, 6, 1))
    assert [(t.month, t.day) for t in ticks] == [(1, 30), (2, 27), (3, 31), (4, 30), (5, 29)]


@pytest.mark.parametrize(
    ("value", "month_start", "expected"),
    [
        ("0 0 1W * *", at(2026, 8, 1), 3),  # Saturday the 1st: Monday the 3rd, never July
        ("0 0 1W * *", at(2026, 2, 1), 2),  # Sunday the 1st: Monday the 2nd
        ("0 0 15W * *", at(2026, 8, 1), 14),  # Saturday the 15th: Friday
        ("0 0 15W * *", at(2026, 2, 1), 16),  # Sunday the 15th: Monday
        ("0 0 15W * *", at(2026, 1, 1), 15),  # a Thursday: itself
        ("0 0 28W * *", at(2027, 2, 1), 26),  # Sunday the 28th, the last day: Friday, never March
    ],
)
def test_w_is_the_nearest_weekday_within_the_month(value: str, month_start: datetime, expected: int) -> None:
    ticks = TimeSpec(value).ticks_between(
        month_start - timedelta(seconds=1), month_start + timedelta(days=27)
    )
    assert days(ticks) == [expected]


def test_hash_is_the_nth_weekday_and_skips_months_without_one() -> None:
    # the fifth Monday: 2026 has one in March, June, August and November
    ticks = TimeSpec("0 0 * * 1#5").ticks_between(at(2026, 1, 1), at(2027, 1, 1))
    assert [(t.month, t.day) for t in ticks] == [(3, 30), (6, 29), (8, 31), (11, 30)]


def test_second_sunday_written_both_ways() -> None:
    cron = TimeSpec("0 0 * * 0#2").ticks_between(at(2026, 1, 1), at(2026, 4, 1))
    eventbridge = TimeSpec("cron(0 0 ? * SUN#2 *)").ticks_between(at(2026, 1, 1), at(2026, 4, 1))
    assert cron == eventbridge == [at(2026, 1, 11), at(2026, 2, 8), at(2026, 3, 8)]


def test_last_friday_of_the_month() -> None:
    ticks = TimeSpec("cron(0 0 ? * 6L *)").ticks_between(at(2026, 1, 1), at(2026, 4, 1))
    assert ticks == [at(2026, 1, 30), at(2026, 2, 27), at(2026, 3, 27)]
    assert TimeSpec("0 0 * * L5").ticks_between(at(2026, 1, 1), at(2026, 4, 1)) == ticks


def test_l_alone_in_eventbridge_day_of_week_is_saturday() -> None:
    ticks = TimeSpec("cron(0 0 ? * L *)").ticks_between(at(2026, 1, 1), at(2026, 1, 15))
    assert ticks == [at(2026, 1, 3), at(2026, 1, 10)]


def test_february_29th_only_in_leap_years() -> None:
    ticks = TimeSpec("0 0 29 2 *").ticks_between(at(2025, 1, 1), at(2033, 1, 1))
    assert ticks == [at(2028, 2, 29), at(2032, 2, 29)]


# --- five fields against croniter (what Airflow runs) --------------------------------------------


def croniter_ticks(cron: str, start: datetime, limit: int) -> tuple[list[datetime], datetime]:
    """croniter's ticks after ``start`` for a year, at most ``limit``; and the end of the window compared."""
    end = start + timedelta(days=366)
    it = croniter(cron, start.replace(tzinfo=None))
    ticks: list[datetime] = []
    while len(ticks) < limit:
        tick = it.get_next(datetime).replace(tzinfo=UTC)
        if tick > end:
            return ticks, end
        ticks.append(tick)
    return ticks, ticks[-1]


@pytest.mark.parametrize(
    "cron",
    [
        "0 6 * * *",
        "*/7 3-5 * * 1-5",
        "0 0 L * *",
        "0 0 15W * *",
        "0 0 1W * *",
        "0 0 28W * *",
        "0 0 * * L5",
        "0 0 * * 5#5",
        "0 0 * * 7",
        "0 22-2 * * *",
        "0 0 * * FRI-SUN",
        "0 0 * * 5-7/2",
        "0 0 * * 1/2",
        "0 0 30-2 * *",
        "0 0 */3 */2 *",
        "5/10 * * * *",
        "0 0 1 * 0-6",
        "0 0 1-31 * 1",
        "0 0 * * sun#2",
        "@quarterly",
        "@weekly",
    ],
)
def test_the_same_ticks_as_croniter(cron: str) -> None:
    start = at(2026, 1, 1)
    theirs, end = croniter_ticks(PRESETS.get(cron, cron), start, limit=3000)
    assert TimeSpec(cron).ticks_between(start, end) == theirs


def plain(low: int, high: int, max_step: int | None = None) -> st.SearchStrategy[str]:
    """A cron list item without L, W or #: a value, a range, a step or '*'."""
    value = st.integers(low, high)
    step = st.integers(1, max_step or high - low)
    return st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        step.map(lambda s: f"*/{s}"),
        st.tuples(value, step).map(lambda vs: f"{vs[0]}/{vs[1]}"),
        st.tuples(value, value, step).map(lambda abs_: f"{min(abs_[:2])}-{max(abs_[:2])}/{abs_[2]}"),
    )


def field_list(low: int, high: int) -> st.SearchStrategy[str]:
    return st.lists(plain(low, high), min_size=1, max_size=3).map(",".join)


minutes = st.lists(st.integers(0, 59), min_size=1, max_size=3).map(
    lambda xs: ",".join(map(str, xs))
) | field_list(0, 59).filter(lambda f: f.startswith(("*/", "1", "2", "3", "4", "5")) and "*," not in f)
hours = field_list(0, 23)
months = field_list(1, 12) | st.sampled_from(["JAN-MAR", "jul,dec", "*/3", "NOV-FEB"])
days_of_month = field_list(1, 28) | st.sampled_from(
    ["L", "1W", "15W", "28W", "29", "30", "31", "29-31", "30-2"]
)
days_of_week = (
    st.lists(plain(0, 7, max_step=6).filter(lambda p: not p.startswith("7/")), min_size=1, max_size=3).map(
        ",".join
    )
    | st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda dk: f"{dk[0]}#{dk[1]}")
    | st.integers(0, 7).map(lambda d: f"L{d}")
    | st.sampled_from(["MON-FRI", "sat,sun", "FRI-SUN", "SUN"])
)


@st.composite
def five_field_crons(draw: st.DrawFn) -> str:
    # at most one day field restricted: cron's OR of both has no EventBridge form
    dom, dow = draw(st.sampled_from([("*", "*"), ("dom", "*"), ("*", "dow")]))
    dom = draw(days_of_month) if dom == "dom" else dom
    dow = draw(days_of_week) if dow == "dow" else dow
    return f"{draw(minutes)} {draw(hours)} {dom} {draw(months)} {dow}"


@settings(max_examples=150, deadline=None)
@given(cron=five_field_crons(), start=st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1)))
def test_five_field_ticks_equal_croniter_over_a_year(cron: str, start: datetime) -> None:
    try:
        spec = TimeSpec(cron)
    except ScheduleExpressionError as exc:
        # the only refusals: days no chosen month has (croniter cannot run those either), and ranges of one
        # value (croniter reads 5-5 as every value, cron as 5 alone)
        assume(re.search("never falls in|range of one value", str(exc)) is None)
        raise
    start = start.replace(second=0, microsecond=0, tzinfo=UTC)
    theirs, end = croniter_ticks(cron, start, limit=400)
    assert spec.ticks_between(start, end) == theirs


# --- AssetOrTimeSchedule reads the same inputs ---------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cron", "expression"),
    [
        ("0 6 * * 1-5", "0 6 * * 1-5", "cron(0 6 ? * 2-6 *)"),
        ("@weekly", "@weekly", "cron(0 0 ? * 1 *)"),
        ("cron(0 6 ? * MON-FRI *)", "cron(0 6 ? * MON-FRI *)", "cron(0 6 ? * MON-FRI *)"),
        ("rate(15 minutes)", "rate(15 minutes)", "rate(15 minutes)"),
        (timedelta(hours=6), "rate(6 hours)", "rate(6 hours)"),
    ],
)
def test_asset_or_time_schedule_takes_every_form(value: Any, cron: str, expression: str) -> None:
    schedule = AssetOrTimeSchedule(value, Asset("s3://bucket/a"), timezone="Europe/Berlin")
    assert schedule.cron == cron
    assert schedule.eventbridge_expression() == expression
    assert schedule.spec == TimeSpec(value, "Europe/Berlin")
    assert schedule_from_json(schedule.to_json()) == schedule


def test_asset_or_time_schedule_refusals_name_the_class_and_field() -> None:
    with pytest.raises(
        ScheduleExpressionError, match=re.escape("AssetOrTimeSchedule: '@once': Airflow's @once")
    ):
        AssetOrTimeSchedule("@once", Asset("s3://bucket/a"))
    with pytest.raises(
        ScheduleExpressionError, match=r"AssetOrTimeSchedule: .*day-of-week: 8 is outside 0-7"
    ) as caught:
        AssetOrTimeSchedule("0 6 * * 8", Asset("s3://bucket/a"))
    assert caught.value.field == "day-of-week"


def test_asset_or_time_schedule_ticks_a_rate() -> None:
    schedule = AssetOrTimeSchedule(timedelta(hours=12), Asset("s3://bucket/a"))
    assert schedule.ticks_between(at(2026, 1, 1, 1), at(2026, 1, 2, 1)) == [
        at(2026, 1, 1, 12),
        at(2026, 1, 2),
    ]
