"""Issue 20 in the stack: deadline checks from the tick function, dead letters counted by the sweep."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import Synthesised
from tests.infra.test_security import _role_statements_of_function

pytestmark = pytest.mark.infra


def _statements(env: Synthesised, function: Any) -> list[dict[str, Any]]:
    return _role_statements_of_function(env.resources, {"Ref": env.logical_id(function)})


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return actions if isinstance(actions, list) else [actions]


def test_the_tick_function_checks_deadlines_and_announces_misses(synthesised: dict[str, Synthesised]) -> None:
    env = synthesised["dev"]
    tick = env.stack.service.schedules.handler.function
    statements = _statements(env, tick)
    # It puts AssetLate on the bus, creates its next check in the wake-up group, records a miss once
    assert any("events:PutEvents" in _actions(s) for s in statements)
    assert any("scheduler:CreateSchedule" in _actions(s) for s in statements)
    writes = [s for s in statements if s.get("Sid") == "TableWrites"]
    assert any(
        "EXPECT#*" in s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] for s in writes
    )


def test_the_sweep_counts_each_sqs_watchers_dead_letters(synthesised: dict[str, Synthesised]) -> None:
    env = synthesised["dev"]
    service = env.stack.service
    sweep = env.resources[env.logical_id(service.reconciliation.handler.function)]["Properties"]
    variables = sweep["Environment"]["Variables"]
    resolved = json.dumps(variables["WATCHER_DEAD_LETTERS"])
    sqs_watchers = [w for w in service.ingest.watchers if w.dlq is not None]
    assert sqs_watchers
    for watcher in sqs_watchers:
        assert watcher.watcher in resolved and env.logical_id(watcher.dlq) in resolved
    statements = _statements(env, service.reconciliation.handler.function)
    assert any("sqs:GetQueueAttributes" in _actions(s) for s in statements)
