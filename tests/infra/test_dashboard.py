"""The dashboard: each stage's metrics as the functions publish them, every function, the table and the DLQs."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.conftest import Synthesised


def _body(env: Synthesised) -> str:
    (dashboard,) = env.of_type("AWS::CloudWatch::Dashboard").values()
    body: Any = dashboard["Properties"]["DashboardBody"]
    # CloudFormation joins the body from literals and references: the literal parts hold the metric names.
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def test_the_dashboard_shows_every_stage_metric_under_the_functions_service_names(env: Synthesised) -> None:
    body = _body(env)
    for name in (
        "EventsStored",
        "QuarantinedMessages",
        "EventsEvaluated",
        "RunsCreated",
        "RunsSubmitted",
        "EvaluationLatency",
        "EventToRunLatency",
        "MessageToRunLatency",
    ):
        assert f'"{name}"' in body, name
    assert '"service","assetflow-ingest"' in body and '"service","assetflow-evaluator"' in body
    assert "IteratorAge" in body and "WriteThrottleEvents" in body


def test_the_dashboard_graphs_every_function_and_every_dead_letter_queue(env: Synthesised) -> None:
    body = _body(env)
    for function in env.stack.service.functions:
        assert env.logical_id(function.function) in body, function.node.path
    service = env.stack.service
    # (the evaluator's failed batches go to the failures bucket, counted by its mapping's alarm)
    queues = [w.dlq for w in service.ingest.watchers if w.dlq] + [
        service.run_state.dlq,
        service.schedules.dlq,
        service.reconciliation.failures,
    ]
    for queue in queues:
        assert env.logical_id(queue) in body, queue.node.path
