"""The operator actions' request bodies: validated at the door, with a message that says what to fix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from assetflow.usecases.operate import (
    parse_backfill_request,
    parse_cancel_request,
    parse_stale_backfill_request,
    parse_time,
    parse_trigger_request,
)
from assetflow.usecases.requests import PayloadTooLargeError, RequestError


def test_trigger_bodies() -> None:
    assert parse_trigger_request(None).conf is None
    assert parse_trigger_request({}).partition_key is None
    request = parse_trigger_request({"conf": {"full_refresh": True}, "partition_key": "2026-11-21"})
    assert (dict(request.conf or {}), request.partition_key) == ({"full_refresh": True}, "2026-11-21")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "must be a JSON object"),
        ({"colour": "red"}, "unknown fields"),
        ({"conf": [1, 2]}, "conf must be a JSON object"),
        ({"conf": "x"}, "conf must be a JSON object"),
        ({"partition_key": ""}, "partition_key"),
        ({"partition_key": 7}, "partition_key"),
    ],
)
def test_bad_trigger_bodies_are_refused(body: object, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        parse_trigger_request(body)


def test_a_huge_conf_is_refused() -> None:
    with pytest.raises(PayloadTooLargeError):
        parse_trigger_request({"conf": {"blob": "x" * 200_000}})


def test_cancel_bodies() -> None:
    assert parse_cancel_request(None) is False
    assert parse_cancel_request({"requeue": True}) is True
    with pytest.raises(RequestError, match="true or false"):
        parse_cancel_request({"requeue": "yes"})
    with pytest.raises(RequestError, match="unknown fields"):
        parse_cancel_request({"force": True})


def test_times_and_backfill_bodies() -> None:
    assert parse_time("2026-11-21", "start") == datetime(2026, 11, 21, tzinfo=UTC)
    assert parse_time("2026-11-21T10:00:00Z", "start") == datetime(2026, 11, 21, 10, tzinfo=UTC)
    assert parse_time("2026-11-21T12:00:00+02:00", "end") == datetime(
        2026, 11, 21, 12, tzinfo=timezone(timedelta(hours=2))
    )
    start, end, dry = parse_backfill_request({"start": "2026-11-20", "end": "2026-11-21", "dry_run": True})
    assert (end - start, dry) == (timedelta(days=1), True)
    for body, message in (
        ({"end": "2026-11-21"}, "start is required"),
        ({"start": "yesterday", "end": "2026-11-21"}, "not an ISO-8601 time"),
        ({"start": "2026-11-20T10:00:00", "end": "2026-11-21"}, "no time zone"),
        ({"start": "2026-11-20", "end": "2026-11-21", "dry_run": 1}, "dry_run must be true or false"),
    ):
        with pytest.raises(RequestError, match=message):
            parse_backfill_request(body)


def test_a_stale_backfill_body_takes_an_optional_window() -> None:
    assert parse_stale_backfill_request({"start": "2026-11-20", "end": "2026-11-21"}) is None
    assert parse_stale_backfill_request({"stale": False, "start": "2026-11-20"}) is None
    assert parse_stale_backfill_request({"stale": True}) == (None, None, False)
    start, end, dry = (
        parse_stale_backfill_request({"stale": True, "start": "2026-11-20", "dry_run": True}) or ()
    )
    assert (start, end, dry) == (datetime(2026, 11, 20, tzinfo=UTC), None, True)
    for body, message in (
        ({"stale": "yes"}, "stale must be true or false"),
        ({"stale": True, "dry_run": 1}, "dry_run must be true or false"),
        ({"stale": True, "start": "2026-11-21", "end": "2026-11-20"}, "the window is empty"),
        ({"stale": True, "start": "yesterday"}, "not an ISO-8601 time"),
        ({"stale": True, "code": "2"}, "unknown"),
    ):
        with pytest.raises(RequestError, match=message):
            parse_stale_backfill_request(body)
