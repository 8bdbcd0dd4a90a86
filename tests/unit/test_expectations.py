"""Expected arrivals, late entries and asset health, with the clock as an input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assetflow import Asset, DefinitionError, ExpectedArrival, TimeSpec
from assetflow.core.entries import resolves
from assetflow.core.errors import DocumentError
from assetflow.core.events import AssetEvent
from assetflow.core.expectations import ArrivalStatus, arrival_status, asset_health, late_event

DAY = datetime(2026, 11, 21, tzinfo=UTC)


def at(hour: int, minute: int = 0, day: int = 21) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


DAILY = ExpectedArrival("0 6 * * *", grace=timedelta(hours=1))


def test_daily_file_on_time_late_and_fresh_again() -> None:
    yesterday_file = at(6, 30, day=20)
    # before today's deadline, yesterday's file satisfied yesterday's deadline
    before = arrival_status(DAILY, now=at(6, 59), last_event_at=yesterday_file)
    assert (before.late, before.deadline, before.next_deadline) == (False, at(7, day=20), at(7))
    # today's deadline passes with no new file: late; yesterday's file does not count for today
    missed = arrival_status(DAILY, now=at(7), last_event_at=yesterday_file)
    assert (missed.late, missed.deadline, missed.since, missed.next_deadline) == (
        True,
        at(7),
        at(7, day=20),
        at(7, day=22),
    )
    # an early file (before the tick, after yesterday's deadline) counts; a late file makes it fresh again
    assert not arrival_status(DAILY, now=at(7), last_event_at=at(5, 59)).late
    assert not arrival_status(DAILY, now=at(9), last_event_at=at(8)).late


def test_no_event_ever_is_late_at_the_first_deadline_only() -> None:
    assert arrival_status(DAILY, now=at(0)).late  # no start: data was due at every deadline so far
    first = ExpectedArrival(TimeSpec("0 6 * * *", start=at(0)), grace=timedelta(hours=1))
    assert arrival_status(first, now=at(6, 30)) == ArrivalStatus(False, None, None, None, at(7))
    assert arrival_status(first, now=at(7)).late


def test_a_deadline_with_zero_grace_is_the_tick() -> None:
    minutely = ExpectedArrival("* * * * *")
    status = arrival_status(minutely, now=at(10, 5), last_event_at=at(10, 4) + timedelta(seconds=30))
    assert (status.late, status.deadline, status.next_deadline) == (False, at(10, 5), at(10, 6))
    # an event at a deadline counts for that deadline, not for the next one
    assert arrival_status(minutely, now=at(10, 5), last_event_at=at(10, 4)).late


def test_keyed_expectation_asks_for_the_tick_s_key() -> None:
    expect = ExpectedArrival("0 6 * * *", grace=timedelta(hours=2), key_format="%Y-%m-%d", key_offset=-1)
    status = arrival_status(expect, now=at(8), arrived_keys={"2026-11-19"})
    assert (status.late, status.key) == (True, "2026-11-20")
    assert not arrival_status(expect, now=at(8), arrived_keys={"2026-11-20"}).late
    # in the expectation's time zone: 06:00 in Tokyo on the 21st is 21:00 UTC on the 20th
    tokyo = ExpectedArrival("0 6 * * *", timezone="Asia/Tokyo", key_format="%Y-%m-%d")
    assert arrival_status(tokyo, now=at(22, day=20)).key == "2026-11-21"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "0 6 * *"}, "ExpectedArrival: .*4 fields"),
        ({"cron": "@daily", "grace": timedelta(seconds=-1)}, "grace must be a timedelta of zero or more"),
        ({"cron": "@daily", "grace": 60}, "grace must be a timedelta"),
        ({"cron": "@daily", "key_format": "day"}, "strftime format"),
        ({"cron": "@daily", "key_format": "%Y/%m/%d"}, "must not contain '/'"),
        ({"cron": "@daily", "key_offset": 1}, "key_offset needs a key_format"),
        ({"cron": "@daily", "key_format": "%Y", "key_offset": 400}, "between -366 and 366"),
        ({"cron": TimeSpec("@daily", "Asia/Tokyo"), "timezone": "Europe/Berlin"}, "give the time zone once"),
    ],
)
def test_bad_expectations_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        ExpectedArrival(**kwargs)


def test_expectation_round_trip_and_equality() -> None:
    expect = ExpectedArrival(
        "0 6 * * 1-5", grace=timedelta(minutes=90), timezone="Europe/Berlin", key_format="%Y-%m-%d"
    )
    assert ExpectedArrival.from_json(expect.to_json()) == expect
    assert expect == ExpectedArrival(
        "0 6 * * 1-5", grace=timedelta(minutes=90), timezone="Europe/Berlin", key_format="%Y-%m-%d"
    )
    assert expect != DAILY
    with pytest.raises(DocumentError):
        ExpectedArrival.from_json({"time": {"source": "@daily", "timezone": "UTC"}})


def test_late_events_are_deterministic_and_answered() -> None:
    status = arrival_status(DAILY, now=at(7, 30), last_event_at=at(6, day=20))
    event = late_event("s3://b/k", status)
    assert event == late_event("s3://b/k", status)
    assert (event.asset, event.timestamp, event.source["type"], event.partition_key) == (
        "s3://b/k",
        at(7),
        "late",
        None,
    )
    in_flight = AssetEvent("s3://b/k", "e1", at(6, 45), source={"type": "watcher"})  # judged before it landed
    stale = AssetEvent("s3://b/k", "e0", at(6, 45, day=20), source={"type": "watcher"})
    assert resolves(in_flight, event) and not resolves(stale, event)
    with pytest.raises(ValueError, match="only a missed deadline"):
        late_event("s3://b/k", arrival_status(DAILY, now=at(7, 30), last_event_at=at(7)))


def test_keyed_late_events_are_answered_by_their_key() -> None:
    expect = ExpectedArrival("0 6 * * *", key_format="%Y-%m-%d")
    event = late_event("s3://b/k", arrival_status(expect, now=at(6, 1)))
    assert event.partition_key == "2026-11-21"
    answer = AssetEvent("s3://b/k", "e1", at(9), source={}, partition_key="2026-11-21")
    other = AssetEvent("s3://b/k", "e2", at(9), source={}, partition_key="2026-11-20")
    assert resolves(answer, event) and not resolves(other, event)


def test_health_in_one_word_most_urgent_first() -> None:
    now = at(8)
    assert asset_health(now=now) == "fresh"
    assert asset_health(now=now, expect=DAILY, last_event_at=at(6, 30)) == "fresh"
    assert asset_health(now=now, expect=DAILY, last_event_at=at(6, 30, day=20)) == "late"
    assert (
        asset_health(now=now, expect=DAILY, last_event_at=at(6, 30, day=20), last_quarantined_at=at(6, 40))
        == "quarantined_input"
    )
    assert (
        asset_health(now=now, last_event_at=at(6, 50), last_quarantined_at=at(6, 40)) == "fresh"
    )  # a good one came since
    assert asset_health(now=now, last_quarantined_at=at(6, 40)) == "quarantined_input"
    assert (
        asset_health(now=now, expect=DAILY, newest_check_failed=True, last_quarantined_at=at(6))
        == "check_failed"
    )
    with pytest.raises(ValueError, match="aware"):
        asset_health(now=datetime(2026, 1, 1), expect=DAILY)


def test_an_asset_carries_its_expectation() -> None:
    asset = Asset("daily_sales", "s3://sales/daily", expect=DAILY)
    assert asset.expect is DAILY


# The model: deadlines are tick + grace; the asset is late at `now` when the newest event is not after the
# deadline before the last one passed. Checked against brute-force tick lists for an hourly cron and a rate.
@settings(max_examples=300, deadline=None)
@given(
    spec=st.sampled_from(["0 * * * *", "*/20 * * * *", "0 6 * * *", "rate(45 minutes)"]),
    grace_min=st.integers(0, 90),
    now_min=st.integers(0, 3 * 24 * 60),
    last_min=st.one_of(st.none(), st.integers(-24 * 60, 3 * 24 * 60)),
)
def test_arrival_matches_a_tick_list(spec: str, grace_min: int, now_min: int, last_min: int | None) -> None:
    expect = ExpectedArrival(spec, grace=timedelta(minutes=grace_min))
    now = DAY + timedelta(minutes=now_min)
    last = None if last_min is None or last_min > now_min else DAY + timedelta(minutes=last_min)
    ticks = expect.spec.ticks_between(DAY - timedelta(days=3), DAY + timedelta(days=5))
    deadlines = [t + expect.grace for t in ticks]
    passed = [d for d in deadlines if d <= now]
    upcoming = [d for d in deadlines if d > now]
    status = arrival_status(expect, now=now, last_event_at=last)
    assert status.deadline == passed[-1]
    assert status.since == passed[-2]
    assert status.next_deadline == upcoming[0]
    assert status.late is (last is None or last <= passed[-2])
