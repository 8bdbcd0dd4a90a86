"""A batch's log line: one line for many items, shared facts said once, long lists split."""

from __future__ import annotations

import json
from typing import Any

from assetflow.functions._observe import LOG_LINE_BYTES, log_batch


class _Lines:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, message: str, *, extra: dict[str, Any]) -> None:
        self.lines.append((message, extra))


def test_the_facts_every_item_shares_are_said_once_beside_the_batch() -> None:
    logger = _Lines()
    items = [
        {"watcher": "orders", "asset": "s3://lake/a", "event_id": "ev-1"},
        {"watcher": "orders", "asset": "s3://lake/b", "event_id": "ev-2"},
    ]

    log_batch(logger, "messages stored as events", items, shared=("watcher", "asset"), count=2)

    ((message, extra),) = logger.lines
    assert message == "messages stored as events"
    assert extra["watcher"] == "orders" and extra["count"] == 2
    # The asset differs between items: it stays with each.
    assert extra["items"] == [
        {"asset": "s3://lake/a", "event_id": "ev-1"},
        {"asset": "s3://lake/b", "event_id": "ev-2"},
    ]
    assert "part" not in extra


def test_a_batch_too_long_for_one_line_is_split_in_parts_and_keeps_every_item() -> None:
    logger = _Lines()
    items = [{"event_id": f"ev-{n:05d}", "identity": "x" * 200} for n in range(1000)]

    log_batch(logger, "batch evaluated", items, events=1000)

    assert len(logger.lines) > 1
    assert all(len(json.dumps(extra["items"])) <= LOG_LINE_BYTES for _, extra in logger.lines)
    assert [extra["part"] for _, extra in logger.lines] == list(range(1, len(logger.lines) + 1))
    assert {extra["parts"] for _, extra in logger.lines} == {len(logger.lines)}
    assert [i["event_id"] for _, extra in logger.lines for i in extra["items"]] == [
        i["event_id"] for i in items
    ]
    assert all(extra["events"] == 1000 for _, extra in logger.lines)


def test_an_empty_batch_writes_no_line() -> None:
    logger = _Lines()
    log_batch(logger, "batch evaluated", [])
    assert logger.lines == []
