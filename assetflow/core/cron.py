"""Time schedules as EventBridge Scheduler runs them, written as Airflow users write them.

One value, :class:`TimeSpec`, is built from any of:

- an Airflow (croniter) five-field cron, ``"0 6 * * 1-5"`` (day-of-week 0-7, Sunday = 0 or 7);
- an Airflow preset: ``@hourly``, ``@daily`` (``@midnight``), ``@weekly``, ``@monthly``, ``@quarterly``,
  ``@yearly`` (``@annually``); ``@once`` and ``@continuous`` are refused, as EventBridge has no equivalent;
- a :class:`datetime.timedelta` of whole minutes, which becomes ``rate(...)``;
- EventBridge's own ``cron(minute hour day-of-month month day-of-week year)`` (day-of-week 1-7, Sunday = 1)
  and ``rate(value unit)``.

Everything is checked against EventBridge's rules on construction, so what the stack deploys is what was
validated here, and every refusal is a :class:`ScheduleExpressionError` naming the field and the fix. A
five-field cron is translated exactly or refused: its day numbers shift by one, and restricting both day
fields (which cron reads as either) is refused because EventBridge needs one of them to be ``?``.

The fire times come from the EventBridge expression itself, read in the schedule's IANA time zone as
EventBridge Scheduler does: a wall-clock time skipped when clocks go forward does not fire, a time repeated
when they go back fires once (the first), and ``rate(...)`` counts fixed elapsed time, unaffected by DST.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import cache
from types import MappingProxyType
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from assetflow.core.errors import DefinitionError, DocumentError

#: Airflow's cron presets and the five-field crons they stand for.
PRESETS: Mapping[str, str] = MappingProxyType(
    {
        "@hourly": "0 * * * *",
        "@daily": "0 0 * * *",
        "@midnight": "0 0 * * *",
        "@weekly": "0 0 * * 0",
        "@monthly": "0 0 1 * *",
        "@quarterly": "0 0 1 */3 *",
        "@yearly": "0 0 1 1 *",
        "@annually": "0 0 1 1 *",
    }
)

#: Airflow presets that EventBridge Scheduler cannot run, with what to write instead.
REFUSED_PRESETS: Mapping[str, str] = MappingProxyType(
    {
        "@once": "use schedule=None and start the run by hand (`assetflow runs trigger PIPELINE` or "
        "POST /pipelines/{id}/runs)",
        "@continuous": "EventBridge Scheduler's finest rate is one minute and it does not chain runs: schedule on "
        "assets to run on every event, or use rate(1 minute) (timedelta(minutes=1)) with max_active_runs=1",
    }
)

#: The years EventBridge's cron can name; a ``*`` year means these.
FIRST_YEAR, LAST_YEAR = 1970, 2199

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # the longest each month gets
_PART = re.compile(r"(?P<first>\*|\w+)(?:-(?P<last>\w+))?(?:/(?P<step>\w+))?", re.ASCII)
_RATE_UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
# How far next_after / last_at_or_before look, growing: most schedules answer in the first window.
_HORIZONS = (
    timedelta(hours=2),
    timedelta(days=2),
    timedelta(days=32),
    timedelta(days=367),
    timedelta(days=8 * 366),
    timedelta(days=(LAST_YEAR - FIRST_YEAR + 1) * 366),
)


class ScheduleExpressionError(DefinitionError):
    """A time schedule EventBridge Scheduler would refuse (or cannot express); the message says what to write.

    Attributes:
        field: the cron field at fault (``"minute"``, ``"day-of-week"``, ...), or None for the whole value.

    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _refuse(source: object, where: str | None, problem: str, fix: str) -> ScheduleExpressionError:
    prefix = f"{source!r}: " + (f"{where}: " if where else "")
    return ScheduleExpressionError(f"{prefix}{problem}; {fix}", where)


# --- fields -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """One cron field: its name, its range and the names it takes."""

    name: str
    low: int
    high: int
    names: Mapping[str, int] = field(default_factory=dict)
    #: where ``*`` and open steps end (cron's day-of-week ends at 6, its 7 repeats Sunday)
    star_high: int | None = None

    @property
    def top(self) -> int:
        return self.high if self.star_high is None else self.star_high


_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DOM = _Field("day-of-month", 1, 31)
_MONTH = _Field("month", 1, 12, {n: i + 1 for i, n in enumerate(_MONTH_NAMES)})
_CRON_DOW = _Field("day-of-week", 0, 7, {n: i for i, n in enumerate(_DAY_NAMES)}, star_high=6)
_EB_DOW = _Field("day-of-week", 1, 7, {n: i + 1 for i, n in enumerate(_DAY_NAMES)})
_YEAR = _Field("year", FIRST_YEAR, LAST_YEAR)


@dataclass(frozen=True)
class _Part:
    """One comma-separated item of a field: its canonical text and the values it names."""

    text: str
    values: tuple[int, ...]
    wrapped: bool  # a backwards range such as 22-2, read as 22-23 and 0-2
    named: bool  # names only, no step (kept as names in EventBridge's form)
    single: bool = False  # a range of one value, such as 5-5


def _value(f: _Field, token: str, source: str) -> int:
    if token.isdigit():
        value = int(token)
    elif token in f.names:
        value = f.names[token]
    else:
        kinds = f"a number {f.low}-{f.high} or one of {', '.join(f.names)}" if f.names else "a number"
        raise _refuse(source, f.name, f"{token!r} is not {kinds}", f"write {kinds}")
    if not f.low <= value <= f.high:
        raise _refuse(source, f.name, f"{value} is outside {f.low}-{f.high}", f"use {f.low}-{f.high}")
    return value


def _token(f: _Field, text: str, value: int) -> str:
    """A value as EventBridge gets it: names stay names, numbers lose leading zeros."""
    return text if text in f.names else str(value)


def _parse_part(f: _Field, piece: str, source: str, *, wrap: bool) -> _Part:
    match = _PART.fullmatch(piece)
    if match is None:
        raise _refuse(
            source,
            f.name,
            f"{piece!r} is not a value, a range (a-b), a step (*/n, a/n, a-b/n) or a list (a,b)",
            f"write for example {f.low}, {f.low}-{f.top}, */2 or {f.low},{f.top}",
        )
    first, last, step_text = match["first"], match["last"], match["step"]
    step = 1
    if step_text is not None:
        span = f.top - f.low
        if not step_text.isdigit() or int(step_text) == 0:
            raise _refuse(
                source, f.name, f"the step in {piece!r} must be a whole number 1-{span}", "write e.g. */2"
            )
        if int(step_text) > span:
            raise _refuse(
                source,
                f.name,
                f"the step in {piece!r} is larger than {span}, so it only ever names the first value",
                f"write {first if first != '*' else f.low}",
            )
        step = int(step_text)
    if first == "*":
        if last is not None:
            raise _refuse(
                source, f.name, f"{piece!r} is not a range", f"write a range as a-b, e.g. {f.low}-{f.top}"
            )
        low, high = f.low, f.top
    else:
        low = _value(f, first, source)
        high = _value(f, last, source) if last is not None else (f.top if step_text is not None else low)
    if low > high:
        if last is None:
            raise _refuse(
                source, f.name, f"{piece!r} starts after {f.top}", f"start the step at {f.low}-{f.top}"
            )
        if not wrap:
            raise _refuse(
                source,
                f.name,
                f"the range {piece!r} runs backwards, which EventBridge does not read as wrapping around",
                f"write it as two ranges: {low}-{f.high},{f.low}-{high}",
            )
        if step_text is not None:
            raise _refuse(
                source,
                f.name,
                f"the backwards range in {piece!r} cannot take a step",
                "list the values instead",
            )
        values = (*range(low, f.top + 1), *range(f.low, high + 1))
        return _Part(_compress(values), values, True, False)

    if first == "*":
        text = "*"
    elif last is not None:
        text = f"{_token(f, first, low)}-{_token(f, last, high)}"
    else:
        text = _token(f, first, low)
    if step_text is not None:
        text += f"/{step}"
    named = step_text is None and first in f.names and (last is None or last in f.names)
    return _Part(text, tuple(range(low, high + 1, step)), False, named, last is not None and low == high)


def _parse_list(f: _Field, text: str, source: str, *, wrap: bool) -> list[_Part]:
    pieces = text.split(",")
    if any(not piece for piece in pieces):
        raise _refuse(
            source, f.name, f"{text!r} has an empty list item", "separate values with single commas"
        )
    return [_parse_part(f, piece, source, wrap=wrap) for piece in pieces]


def _compress(values: Iterable[int]) -> str:
    """``1,2,3,5`` as ``1-3,5``: runs of three or more become ranges."""
    ordered = sorted(set(values))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ordered[i]}-{ordered[j]}")
        else:
            out.extend(str(v) for v in ordered[i : j + 1])
        i = j + 1
    return ",".join(out)


# --- day rules ----------------------------------------------------------------------------------


def _month_length(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


class _DayRule(Protocol):
    def matches(self, day: date) -> bool: ...


@dataclass(frozen=True)
class _EveryDay:
    def matches(self, day: date) -> bool:
        return True


@dataclass(frozen=True)
class _MonthDays:
    days: frozenset[int]

    def matches(self, day: date) -> bool:
        return day.day in self.days


@dataclass(frozen=True)
class _LastDay:
    def matches(self, day: date) -> bool:
        return day.day == _month_length(day)


@dataclass(frozen=True)
class _LastWeekday:
    def matches(self, day: date) -> bool:
        last = day.replace(day=_month_length(day))
        return day == last - timedelta(days=max(0, last.weekday() - 4))


@dataclass(frozen=True)
class _NearestWeekday:
    """``15W``: the weekday nearest the 15th, never leaving the month (``1W`` on a Saturday is the 3rd)."""

    nth: int

    def matches(self, day: date) -> bool:
        target = day.replace(day=self.nth)
        if target.weekday() == 5:
            target += timedelta(days=2 if self.nth == 1 else -1)
        elif target.weekday() == 6:
            target += timedelta(days=-2 if self.nth == _month_length(day) else 1)
        return day == target


@dataclass(frozen=True)
class _Weekdays:
    weekdays: frozenset[int]  # Python's numbering, Monday = 0

    def matches(self, day: date) -> bool:
        return day.weekday() in self.weekdays


@dataclass(frozen=True)
class _LastOfMonth:
    """``6L``: the last Friday of the month."""

    weekday: int

    def matches(self, day: date) -> bool:
        return day.weekday() == self.weekday and day.day + 7 > _month_length(day)


@dataclass(frozen=True)
class _NthOfMonth:
    """``6#3``: the third Friday of the month (no fire in a month without one)."""

    weekday: int
    nth: int

    def matches(self, day: date) -> bool:
        return day.weekday() == self.weekday and (day.day - 1) // 7 + 1 == self.nth


def _eb_weekday(value: int) -> int:
    """EventBridge's day number (Sunday = 1) as Python's (Monday = 0)."""
    return (value - 2) % 7


@dataclass(frozen=True)
class _CronRule:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: _DayRule
    months: frozenset[int]
    years: frozenset[int]

    def ticks(self, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
        # walk local dates (one either side, for offsets), then the wall-clock times of each matching day
        first = max(after.astimezone(zone).date() - timedelta(days=1), date(FIRST_YEAR, 1, 1))
        last = min(until.astimezone(zone).date() + timedelta(days=1), date(LAST_YEAR, 12, 31))
        ticks: list[datetime] = []
        year, month = first.year, first.month
        while (year, month) <= (last.year, last.month):
            if year in self.years and month in self.months:
                for number in range(1, calendar.monthrange(year, month)[1] + 1):
                    day = date(year, month, number)
                    if first <= day <= last and self.days.matches(day):
                        ticks.extend(self._times(day, zone, after, until))
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return ticks

    def _times(self, day: date, zone: ZoneInfo, after: datetime, until: datetime) -> Iterable[datetime]:
        for hour in self.hours:
            for minute in self.minutes:
                wall = datetime(day.year, day.month, day.day, hour, minute)
                tick = wall.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first of a repeated time
                if tick.astimezone(zone).replace(tzinfo=None) != wall:
                    continue  # skipped when the clocks went forward
                if after < tick <= until:
                    yield tick


# --- EventBridge's cron -------------------------------------------------------------------------


def _plain(f: _Field, text: str, source: str) -> tuple[str, frozenset[int]]:
    if "?" in text:
        raise _refuse(
            source, f.name, "'?' is only for day-of-month or day-of-week", "write * for every value"
        )
    parts = _parse_list(f, text, source, wrap=False)
    return ",".join(p.text for p in parts), frozenset(v for p in parts for v in p.values)


def _eventbridge_dom(text: str, months: frozenset[int], source: str) -> tuple[str, _DayRule]:
    if text == "*":
        return "*", _EveryDay()
    if text == "L":
        return "L", _LastDay()
    if text == "LW":
        return "LW", _LastWeekday()
    nearest = re.fullmatch(r"([0-9]+)W", text)
    if nearest:
        nth = int(nearest[1])
        if not 1 <= nth <= 28:
            raise _refuse(
                source,
                _DOM.name,
                f"{text!r}: W takes a day 1-28 (months differ on what {nth}W means when they are shorter)",
                "write LW for the last weekday of the month, or a day up to 28W",
            )
        return f"{nth}W", _NearestWeekday(nth)
    if "#" in text:
        raise _refuse(
            source, _DOM.name, f"'#' in {text!r} is for day-of-week", "write e.g. 2#1 (first Monday) there"
        )
    if re.fullmatch(r"L-\d+", text):
        raise _refuse(
            source,
            _DOM.name,
            f"{text!r} (an offset from the last day) is not in EventBridge's cron",
            "use L or LW",
        )
    if "L" in text or "W" in text:
        raise _refuse(
            source,
            _DOM.name,
            f"in {text!r}, L and W must stand alone: L (last day), LW (last weekday) or one nW such as 15W",
            "drop them from the list or range, or use two schedules",
        )
    canonical, days = _plain(_DOM, text, source)
    if not any(min(days) <= _MONTH_DAYS[m - 1] for m in months):
        names = ", ".join(_MONTH_NAMES[m - 1] for m in sorted(months))
        raise _refuse(
            source,
            _DOM.name,
            f"{canonical} never falls in {names}, so this schedule would never run",
            "pick days those months have, or L for the last day of the month",
        )
    return canonical, _MonthDays(days)


def _eventbridge_dow(text: str, source: str) -> tuple[str, _DayRule]:
    where = _EB_DOW.name
    if text == "*":
        return "*", _EveryDay()
    if text == "L":  # the last day of the week
        return "L", _Weekdays(frozenset({_eb_weekday(7)}))
    if "#" in text:
        nth = re.fullmatch(r"(\w+)#(\w+)", text, re.ASCII)
        if "," in text or nth is None:
            raise _refuse(
                source,
                where,
                f"{text!r}: with '#' the field holds exactly one expression (EventBridge reads a list as several)",
                "use one n#k such as 2#1, and a second schedule for another day",
            )
        day = _value(_EB_DOW, nth[1], source)
        if not nth[2].isdigit() or not 1 <= int(nth[2]) <= 5:
            raise _refuse(source, where, f"in {text!r} the occurrence must be 1-5", f"write e.g. {nth[1]}#1")
        return f"{_token(_EB_DOW, nth[1], day)}#{int(nth[2])}", _NthOfMonth(_eb_weekday(day), int(nth[2]))
    last = re.fullmatch(r"(\w+)L", text, re.ASCII)
    if last:
        day = _value(_EB_DOW, last[1], source)
        return f"{_token(_EB_DOW, last[1], day)}L", _LastOfMonth(_eb_weekday(day))
    if "L" in text:  # no day name holds an L
        raise _refuse(
            source,
            where,
            f"in {text!r}, L must stand alone (L = Saturday) or follow one day (6L = the last Friday)",
            "drop it from the list or range",
        )
    if "/" in text:
        named = (v for p in _parse_list(_EB_DOW, text, source, wrap=False) for v in p.values)
        raise _refuse(
            source,
            where,
            f"{text!r}: EventBridge's day-of-week takes no '/' step",
            f"list the days instead: {_compress(named)}",
        )
    canonical, days = _plain(_EB_DOW, text, source)
    return canonical, _Weekdays(frozenset(_eb_weekday(d) for d in days))


def _parse_eventbridge(fields: list[str], source: str) -> tuple[str, _CronRule]:
    minute, hour, dom, month, dow, year = (f.upper() for f in fields)
    minute_text, minutes = _plain(_MINUTE, minute, source)
    hour_text, hours = _plain(_HOUR, hour, source)
    month_text, months = _plain(_MONTH, month, source)
    year_text, years = _plain(_YEAR, year, source)
    if dom == "?" and dow == "?":
        raise _refuse(
            source,
            "day-of-week",
            "day-of-month and day-of-week are both '?'",
            f"restrict one of them, e.g. cron({minute_text} {hour_text} * {month_text} ? {year_text}) for every day",
        )
    if dom != "?" and dow != "?":
        where, fix = "day-of-month", "keep one of them and write '?' in the other"
        if dow == "*":
            where = "day-of-week"
            fix = (
                f"write '?' in day-of-week: cron({minute_text} {hour_text} {dom} {month_text} ? {year_text})"
            )
        elif dom == "*":
            fix = (
                f"write '?' in day-of-month: cron({minute_text} {hour_text} ? {month_text} {dow} {year_text})"
            )
        raise _refuse(
            source, where, "one of day-of-month and day-of-week must be '?' in EventBridge's cron", fix
        )
    if dow == "?":
        dom_text, days = _eventbridge_dom(dom, months, source)
        dow_text = "?"
    else:
        dow_text, days = _eventbridge_dow(dow, source)
        dom_text = "?"
    expression = f"cron({minute_text} {hour_text} {dom_text} {month_text} {dow_text} {year_text})"
    return expression, _CronRule(tuple(sorted(minutes)), tuple(sorted(hours)), days, months, years)


# --- Airflow's five-field cron ------------------------------------------------------------------


def _cron_parts(f: _Field, text: str, source: str) -> list[_Part]:
    parts = _parse_list(f, text, source, wrap=True)
    for part in parts:
        if part.single:
            raise _refuse(
                source,
                f.name,
                f"{part.text!r} is a range of one value, which croniter (Airflow) reads as every value and "
                f"cron as {part.values[0]} alone",
                f"write {part.values[0]} or *",
            )
    return parts


def _cron_plain(f: _Field, text: str, source: str) -> tuple[str, frozenset[int]]:
    if "?" in text:
        raise _refuse(
            source, f.name, "'?' is only for day-of-month or day-of-week", "write * for every value"
        )
    parts = _cron_parts(f, text, source)
    return ",".join(p.text for p in parts), frozenset(v for p in parts for v in p.values)


def _cron_dom(text: str, source: str) -> tuple[str, bool]:
    """The day-of-month in EventBridge's syntax, and whether it names every day."""
    if any(mark in text for mark in "LW#"):
        return text, False  # the same syntax in both forms: EventBridge's parser checks it
    canonical, days = _cron_plain(_DOM, text, source)
    return canonical, days == frozenset(range(1, 32))


def _cron_dow(text: str, source: str) -> tuple[str, bool]:
    """The day-of-week in EventBridge's syntax (Sunday 0/7 becomes 1), and whether it names every day."""
    where = _CRON_DOW.name
    if "#" in text:
        nth = re.fullmatch(r"(\w+)#(\w+)", text, re.ASCII)
        if "," in text or nth is None:
            raise _refuse(
                source,
                where,
                f"{text!r}: with '#' the field holds exactly one expression (EventBridge reads a list as several)",
                "use one n#k such as 1#1, and a second schedule for another day",
            )
        day = _value(_CRON_DOW, nth[1], source)
        if not nth[2].isdigit() or not 1 <= int(nth[2]) <= 5:
            raise _refuse(source, where, f"in {text!r} the occurrence must be 1-5", f"write e.g. {nth[1]}#1")
        return f"{day % 7 + 1}#{int(nth[2])}", False
    last = re.fullmatch(r"L(\w+)|(\w+)L", text, re.ASCII)
    if last:
        day = _value(_CRON_DOW, last[1] or last[2], source)
        return f"{day % 7 + 1}L", False
    if "L" in text:
        raise _refuse(
            source,
            where,
            f"{text!r}: L in day-of-week names the last of one day in the month",
            "write L5 (or 5L) for the last Friday, or 6 for every Saturday",
        )
    parts = _cron_parts(_CRON_DOW, text, source)
    names = [p.text for p in parts if p.named and not p.wrapped]
    numbers = {v % 7 + 1 for p in parts if not (p.named and not p.wrapped) for v in p.values}
    every = {v % 7 for p in parts for v in p.values} == set(range(7))
    return ",".join(([_compress(numbers)] if numbers else []) + names), every


def _translate_cron(fields: list[str], source: str) -> list[str]:
    minute, hour, dom, month, dow = (f.upper() for f in fields)
    minute_text, _ = _cron_plain(_MINUTE, minute, source)
    hour_text, _ = _cron_plain(_HOUR, hour, source)
    month_text, _ = _cron_plain(_MONTH, month, source)
    dom_free, dow_free = dom in ("*", "?"), dow in ("*", "?")
    dom_text, dom_every = ("*", True) if dom_free else _cron_dom(dom, source)
    dow_text, dow_every = ("*", True) if dow_free else _cron_dow(dow, source)
    if dow_free:
        days = (dom_text, "?")
    elif dom_free:
        days = ("*", "?") if dow_every else ("?", dow_text)
    elif dom_every or dow_every:
        days = ("*", "?")  # cron reads two restricted day fields as either: one naming every day is every day
    else:
        raise _refuse(
            source,
            "day-of-month",
            f"restricts both day-of-month and day-of-week ({dom} and {dow}); cron runs when either matches, "
            "which EventBridge Scheduler cannot express",
            "write * in one of them (or use two schedules, one per field)",
        )
    return [minute_text, hour_text, days[0], month_text, days[1], "*"]


# --- rates --------------------------------------------------------------------------------------


def _rate_text(count: int, unit: str) -> str:
    return f"rate({count} {unit}{'' if count == 1 else 's'})"


def _parse_rate(inner: str, source: str) -> tuple[str, timedelta]:
    words = inner.split()
    if len(words) != 2:
        raise _refuse(
            source, None, "rate(...) takes a value and a unit", "write e.g. rate(5 minutes) or rate(1 day)"
        )
    value, unit = words[0], words[1].lower()
    if not re.fullmatch(r"[0-9]+", value) or int(value) == 0:
        raise _refuse(
            source,
            "rate",
            f"the value {value!r} is not a positive whole number",
            "write e.g. rate(5 minutes)",
        )
    count = int(value)
    singular = unit.removesuffix("s")
    if singular in ("second", "sec"):
        raise _refuse(
            source, "rate", "EventBridge Scheduler's finest rate is one minute", "write rate(1 minute)"
        )
    if singular == "week":
        raise _refuse(source, "rate", "EventBridge has no week unit", f"write {_rate_text(7 * count, 'day')}")
    if singular in ("month", "year"):
        raise _refuse(
            source,
            "rate",
            f"EventBridge has no {singular} unit ({singular}s vary in length)",
            "use a cron such as @monthly, @yearly or cron(0 0 1 * ? *)",
        )
    if singular not in _RATE_UNITS:
        raise _refuse(source, "rate", f"{unit!r} is not a unit", "use minute(s), hour(s) or day(s)")
    if unit != (singular if count == 1 else singular + "s"):
        raise _refuse(
            source,
            "rate",
            f"the unit must be {'singular' if count == 1 else 'plural'} for {count}",
            f"write {_rate_text(count, singular)}",
        )
    try:
        return _rate_text(count, singular), count * _RATE_UNITS[singular]
    except OverflowError:
        raise _refuse(
            source, "rate", f"{count} {unit} is too long an interval", "use a cron for rare runs"
        ) from None


def _rate_from_timedelta(delta: timedelta) -> tuple[str, timedelta]:
    minute = timedelta(minutes=1)
    if delta <= timedelta(0):
        raise _refuse(delta, "rate", "the interval must be positive", "use e.g. timedelta(hours=1)")
    if delta < minute:
        raise _refuse(
            delta, "rate", "EventBridge Scheduler's finest rate is one minute", "use timedelta(minutes=1)"
        )
    if delta % minute:
        below = delta // minute
        raise _refuse(
            delta,
            "rate",
            "EventBridge rates are whole minutes, hours or days",
            f"use timedelta(minutes={below}) or timedelta(minutes={below + 1})",
        )
    minutes = delta // minute
    if minutes % (24 * 60) == 0:
        return _rate_text(minutes // (24 * 60), "day"), delta
    if minutes % 60 == 0:
        return _rate_text(minutes // 60, "hour"), delta
    return _rate_text(minutes, "minute"), delta


# --- time zones ---------------------------------------------------------------------------------


@cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def _zone(name: object) -> ZoneInfo:
    """The IANA zone called ``name``.

    Raises:
        ScheduleExpressionError: not an IANA time zone name.

    """
    problem = ScheduleExpressionError(
        f"unknown time zone {name!r}; use an IANA name such as 'UTC', 'Europe/Berlin' or 'America/New_York'",
        "timezone",
    )
    if not isinstance(name, str) or not name or (_known_zones() and name not in _known_zones()):
        raise problem
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise problem from exc


# --- the value ----------------------------------------------------------------------------------


def _parse(value: object) -> tuple[str, str, _CronRule | timedelta]:
    """``(source, expression, plan)`` of what a user wrote: the plan is a cron's rule or a rate's interval."""
    if isinstance(value, timedelta):
        expression, interval = _rate_from_timedelta(value)
        return expression, expression, interval
    if not isinstance(value, str):
        raise ScheduleExpressionError(
            f"a time schedule is a cron such as '0 6 * * *', a preset such as '@daily', a timedelta, "
            f"cron(...) or rate(...); got {type(value).__name__}"
        )
    text = " ".join(value.split())
    lower = text.lower()
    if not text:
        raise _refuse(
            value,
            None,
            "the schedule is empty",
            "write a cron such as '0 6 * * *' or a preset such as '@daily'",
        )
    if text.startswith("@"):
        if lower in REFUSED_PRESETS:
            raise _refuse(
                value,
                None,
                f"Airflow's {lower} has no EventBridge Scheduler equivalent",
                REFUSED_PRESETS[lower],
            )
        if lower not in PRESETS:
            raise _refuse(value, None, "unknown preset", f"use one of {', '.join(PRESETS)}, or a cron")
        expression, rule = _parse_eventbridge(_translate_cron(PRESETS[lower].split(), value), value)
        return lower, expression, rule
    wrapped = re.fullmatch(r"(cron|rate|at)\((.*)\)", lower)
    if wrapped is None and re.match(r"(cron|rate|at)\(", lower):
        raise _refuse(value, None, "the closing ')' is missing", f"write {text})")
    if wrapped:
        inner = text[len(wrapped[1]) + 1 : -1]
        if wrapped[1] == "rate":
            expression, interval = _parse_rate(inner, value)
            return expression, expression, interval
        if wrapped[1] == "at":
            raise _refuse(
                value,
                None,
                "one-time at(...) schedules do not recur",
                "use schedule=None and start the run by hand (`assetflow runs trigger PIPELINE`)",
            )
        fields = inner.split()
        if len(fields) != 6:
            fix = {
                5: f"add the year: cron({' '.join(fields)} *)",
                7: "EventBridge has no seconds field: drop the first field",
            }.get(len(fields), "write minute hour day-of-month month day-of-week year")
            raise _refuse(value, None, f"cron(...) takes six fields, not {len(fields)}", fix)
        expression, rule = _parse_eventbridge(fields, value)
        return expression, expression, rule
    fields = text.split()
    if len(fields) == 5:
        expression, rule = _parse_eventbridge(_translate_cron(fields, value), value)
        return text, expression, rule
    if len(fields) == 6:
        raise _refuse(
            value,
            None,
            "six fields outside cron(...) are ambiguous (croniter reads the first as seconds)",
            "wrap EventBridge's six fields in cron(...), e.g. cron(0 6 * * ? *), or write Airflow's five fields",
        )
    raise _refuse(
        value,
        None,
        f"{len(fields)} fields is not a cron",
        "write five fields (minute hour day-of-month month day-of-week), a preset such as '@daily', "
        "cron(...) with six fields or rate(...)",
    )


@dataclass(frozen=True)
class TimeSpec:
    """A validated time schedule: its EventBridge Scheduler expression, its time zone and its fire times.

    ``TimeSpec("0 6 * * 1-5", "Europe/Berlin")`` is 06:00 Berlin time on weekdays and deploys as
    ``cron(0 6 ? * 2-6 *)`` in that zone; ``TimeSpec(timedelta(minutes=30))`` is ``rate(30 minutes)``.

    Two specs are equal when they fire alike: same expression, zone and start (``"@daily"`` equals
    ``"0 0 * * *"``); ``source`` keeps what was written.

    ``start`` (aware) is when the schedule begins, EventBridge Scheduler's ``StartDate``: no fire comes
    before it, and a rate fires at ``start`` and every interval after. A rate without ``start`` counts from
    1970-01-01T00:00Z, so ``rate(1 hour)`` fires on the hour (EventBridge Scheduler, given no StartDate,
    counts from the schedule's creation instead: pass ``start`` as StartDate to make both agree).

    Raises:
        ScheduleExpressionError: the schedule, the time zone or the start is invalid; the message names the
            field and what to write instead.

    """

    value: InitVar[str | timedelta]
    timezone: str = "UTC"
    start: datetime | None = None
    #: What was written, normalised (spaces collapsed, presets in lower case, EventBridge's forms canonical).
    source: str = field(init=False, compare=False)
    #: The EventBridge Scheduler expression: ``cron(m h dom mon dow year)`` or ``rate(n unit)``.
    expression: str = field(init=False)
    _plan: _CronRule | timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self, value: str | timedelta) -> None:
        source, expression, plan = _parse(value)
        _zone(self.timezone)
        start = self.start
        if start is not None:
            if not isinstance(start, datetime) or start.tzinfo is None or start.utcoffset() is None:
                raise ScheduleExpressionError(
                    f"start {start!r} must be a timezone-aware datetime, e.g. datetime(2026, 1, 1, tzinfo=UTC)",
                    "start",
                )
            object.__setattr__(self, "start", start.astimezone(UTC))
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "expression", expression)
        object.__setattr__(self, "_plan", plan)

    @property
    def kind(self) -> Literal["cron", "rate"]:
        """``"cron"`` or ``"rate"``, as the EventBridge expression begins."""
        return "rate" if isinstance(self._plan, timedelta) else "cron"

    @property
    def interval(self) -> timedelta | None:
        """A rate's interval, or None for a cron."""
        return self._plan if isinstance(self._plan, timedelta) else None

    def eventbridge_expression(self) -> str:
        """The EventBridge Scheduler expression (also :attr:`expression`), to deploy with :attr:`timezone`."""
        return self.expression

    def ticks_between(self, after: datetime, until: datetime) -> list[datetime]:
        """The fire times in ``(after, until]`` as aware UTC datetimes, oldest first.

        A cron is matched against wall-clock times in :attr:`timezone`, as EventBridge Scheduler does: a
        time skipped when the clocks go forward does not fire, a time repeated when they go back fires once
        (at its first occurrence). A rate fires every :attr:`interval` of elapsed time.

        Raises:
            ValueError: either bound is a naive datetime.

        """
        if (
            after.tzinfo is None
            or until.tzinfo is None
            or after.utcoffset() is None
            or until.utcoffset() is None
        ):
            raise ValueError("ticks_between needs aware datetimes")
        after, until = after.astimezone(UTC), until.astimezone(UTC)
        if self.start is not None:
            after = max(after, self.start - timedelta(microseconds=1))
        if until <= after:
            return []
        plan = self._plan
        if isinstance(plan, timedelta):
            anchor = self.start or _EPOCH
            tick = anchor + max(0, (after - anchor) // plan + 1) * plan
            ticks: list[datetime] = []
            while tick <= until:
                ticks.append(tick)
                tick += plan
            return ticks
        after = max(after, _EPOCH)
        until = min(until, datetime(LAST_YEAR + 1, 1, 1, tzinfo=UTC))
        if until <= after:
            return []
        return plan.ticks(_zone(self.timezone), after, until)

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after ``moment`` (aware), or None when the schedule never fires again.

        Raises:
            ValueError: ``moment`` is naive.

        """
        for horizon in _HORIZONS:
            ticks = self.ticks_between(moment, moment + horizon)
            if ticks:
                return ticks[0]
        return None

    def last_at_or_before(self, moment: datetime) -> datetime | None:
        """The last fire time at or before ``moment`` (aware), or None when the schedule never fired.

        Raises:
            ValueError: ``moment`` is naive.

        """
        for horizon in _HORIZONS:
            ticks = self.ticks_between(moment - horizon, moment)
            if ticks:
                return ticks[-1]
        return None

    def shifted(self, tick: datetime, steps: int) -> datetime | None:
        """The fire time ``steps`` fires after (or, negative, before) the fire time ``tick``; None past the ends.

        Raises:
            ValueError: ``tick`` is naive.

        """
        moment: datetime | None = tick
        for _ in range(abs(steps)):
            if moment is None:
                return None
            moment = (
                self.next_after(moment)
                if steps > 0
                else self.last_at_or_before(moment - timedelta(microseconds=1))
            )
        return moment

    def to_json(self) -> dict[str, Any]:
        """``{"source", "expression", "timezone", "start"}`` (``start`` ISO-8601 UTC, or null)."""
        return {
            "source": self.source,
            "expression": self.expression,
            "timezone": self.timezone,
            "start": None if self.start is None else self.start.isoformat().replace("+00:00", "Z"),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TimeSpec:
        """Rebuild a spec from :meth:`to_json`'s document.

        Raises:
            DocumentError: the document is malformed, or its expression is not what its source reads as now.

        """
        try:
            start = doc.get("start")
            spec = cls(
                doc["source"],
                doc["timezone"],
                start=None if start is None else datetime.fromisoformat(start.replace("Z", "+00:00")),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise DocumentError(f"invalid time schedule document: {exc}") from exc
        if "expression" in doc and doc["expression"] != spec.expression:
            raise DocumentError(
                f"time schedule {spec.source!r} was saved as {doc['expression']!r} but now reads as "
                f"{spec.expression!r}; rebuild the catalog"
            )
        return spec
