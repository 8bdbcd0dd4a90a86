"""The operator API's routes and authorisation, the alarms, and the stack outputs the CLI reads."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from assetflow.adapters.stack_outputs import OUTPUT_KEYS as STACK_OUTPUT_KEYS
from assetflow.cdk.stack import (
    OUTPUT_API_URL,
    OUTPUT_EMR_APPLICATION_ID,
    OUTPUT_EVENT_BUS_NAME,
    OUTPUT_QUEUE_URLS,
    OUTPUT_REGION,
    OUTPUT_RUNS_BUCKET,
    OUTPUT_TABLE_NAME,
)
from assetflow.routes import PERMISSIONS, ROUTES
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra

DESIGN_ROUTES = {
    "POST /assets/events",
    "GET /assets",
    "GET /assets/events",
    "GET /pipelines/{id}/queue",
    "DELETE /pipelines/{id}/queue",
    "GET /pipelines/{id}/runs",
    "GET /runs",
    "GET /runs/{run_id}",
    "GET /quarantine",
    "GET /catalog",
    "GET /openapi.json",
}


def test_every_design_route_exists_and_requires_iam(env: Synthesised) -> None:
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"] for r in env.of_type("AWS::ApiGatewayV2::Route").values()
    }
    assert DESIGN_ROUTES <= set(routes) == {r.key for r in ROUTES}
    for key, route in routes.items():
        assert route["AuthorizationType"] == "AWS_IAM", key


def _arn_route(resource: object) -> str:
    """``METHOD /path`` of an execute-api ARN as CloudFormation writes it (Fn::Join of the API's id)."""
    assert isinstance(resource, dict), resource
    parts = resource["Fn::Join"][1]
    tail = "".join(p for p in parts if isinstance(p, str)).rsplit("/$default/", 1)[1]
    method, _, path = tail.partition("/")
    return f"{method} /{path}"


def test_each_permission_is_a_managed_policy_invoking_its_routes_only(env: Synthesised) -> None:
    policies = {
        logical_id: resource["Properties"]
        for logical_id, resource in env.of_type("AWS::IAM::ManagedPolicy").items()
        if "operator API" in resource["Properties"].get("Description", "")
    }
    assert len(policies) == len(PERMISSIONS)
    outputs = env.template.to_json()["Outputs"]
    granted: dict[str, set[str]] = {}
    for permission in PERMISSIONS:
        output = outputs[f"Api{permission.capitalize()}PolicyArn"]
        logical_id = output["Value"]["Ref"]
        statements = policies[logical_id]["PolicyDocument"]["Statement"]
        assert [s["Action"] for s in statements] == ["execute-api:Invoke"]
        resources = statements[0]["Resource"]
        granted[permission] = {
            _arn_route(r) for r in (resources if isinstance(resources, list) else [resources])
        }
    for permission in PERMISSIONS:
        expected = {f"{r.method} {r.arn_path}" for r in ROUTES if r.permission == permission}
        assert granted[permission] == expected, permission
    assert "GET /assets" in granted["read"] and "POST /assets/events" in granted["emit"]
    assert "DELETE /pipelines/*/queue" in granted["operate"]


def test_api_integration_uses_payload_v2_and_the_stage_logs_access(env: Synthesised) -> None:
    env.template.has_resource_properties(
        "AWS::ApiGatewayV2::Integration", {"IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0"}
    )
    env.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "AccessLogSettings": Match.object_like({"DestinationArn": Match.any_value()}),
        },
    )


def _alarms(env: Synthesised) -> list[dict]:
    return [a["Properties"] for a in env.of_type("AWS::CloudWatch::Alarm").values()]


def test_every_dead_letter_queue_has_a_depth_alarm(env: Synthesised) -> None:
    service = env.stack.service
    dlqs = [w.dlq for w in service.ingest.watchers if w.dlq is not None]
    dlqs += [service.run_state.dlq, service.schedules.dlq, service.reconciliation.failures]
    watched = {
        str(d["Value"])
        for a in _alarms(env)
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        for d in a["Dimensions"]
    }
    for dlq in dlqs:
        assert str({"Fn::GetAtt": [env.logical_id(dlq), "QueueName"]}) in watched, dlq.node.path


def test_alarms_on_quarantine_evaluator_errors_and_iterator_age(env: Synthesised) -> None:
    service = env.stack.service
    evaluator = {"Ref": env.logical_id(service.evaluator.handler.function)}
    alarms = _alarms(env)
    assert any(
        a.get("Namespace") == "assetflow"
        and a.get("MetricName") == "QuarantinedMessages"
        and a["Dimensions"] == [{"Name": "service", "Value": service.ingest_service_name}]
        for a in alarms
    )
    ingest_env = {
        env.resources[env.logical_id(w.function.function)]["Properties"]["Environment"]["Variables"][
            "POWERTOOLS_SERVICE_NAME"
        ]
        for w in service.ingest.watchers
    }
    assert ingest_env == {service.ingest_service_name}
    by_metric = {(a["MetricName"], str(a["Dimensions"])): a for a in alarms if "MetricName" in a}
    errors = by_metric[("Errors", str([{"Name": "FunctionName", "Value": evaluator}]))]
    age = by_metric[("IteratorAge", str([{"Name": "FunctionName", "Value": evaluator}]))]
    assert errors["Threshold"] == 1
    assert age["Threshold"] == env.config.iterator_age_alarm.to_milliseconds()


def test_alarm_actions_follow_the_config(env: Synthesised) -> None:
    for alarm in _alarms(env):
        if env.config.alarm_topic_arn:
            assert alarm["AlarmActions"] == [env.config.alarm_topic_arn]
        else:
            assert "AlarmActions" not in alarm


def test_outputs_the_cli_reads(env: Synthesised) -> None:
    outputs = env.template.to_json()["Outputs"]
    for key in (
        OUTPUT_TABLE_NAME,
        OUTPUT_API_URL,
        OUTPUT_EVENT_BUS_NAME,
        OUTPUT_RUNS_BUCKET,
        OUTPUT_EMR_APPLICATION_ID,
        OUTPUT_REGION,
        OUTPUT_QUEUE_URLS,
    ):
        assert key in outputs, key
    # The CLI's --env reads these keys (assetflow/adapters/stack_outputs.py).
    assert set(STACK_OUTPUT_KEYS) <= set(outputs)
    service = env.stack.service
    assert outputs[OUTPUT_TABLE_NAME]["Value"] == {"Ref": env.logical_id(service.event_store.table)}
    assert outputs[OUTPUT_EMR_APPLICATION_ID]["Value"] == {
        "Fn::GetAtt": [env.logical_id(service.spark.application), "ApplicationId"]
    }
    for ingest in service.ingest.watchers:
        if ingest.queue is not None:
            key = f"QueueUrl{service.watcher_output_id(ingest.watcher)}"
            assert outputs[key]["Value"] == {"Ref": env.logical_id(ingest.queue)}


def test_functions_get_generated_names_through_environment_variables(env: Synthesised) -> None:
    service = env.stack.service
    for function in service.functions:
        variables = env.resources[env.logical_id(function.function)]["Properties"]["Environment"]["Variables"]
        assert variables["TABLE_NAME"] == {"Ref": env.logical_id(service.event_store.table)}
        assert variables["EVENT_BUS_NAME"] == {"Ref": env.logical_id(service.event_bus)}
        assert variables["RUNS_BUCKET"] == {"Ref": env.logical_id(service.runs.bucket)}
        assert variables["EMR_APPLICATION_ID"] == {
            "Fn::GetAtt": [env.logical_id(service.spark.application), "ApplicationId"]
        }
        assert variables["EMR_JOB_ROLE_ARN"] == {
            "Fn::GetAtt": [env.logical_id(service.spark.job_role), "Arn"]
        }
        assert variables["CATALOG_PATH"] == "/var/task/catalog.json"
        assert variables["POWERTOOLS_SERVICE_NAME"].startswith("assetflow-")
        assert variables["ASSETFLOW_ENV"] == env.config.name
        assert variables["CODE_PREFIX"] == "code/"


def test_functions_run_python_312_with_the_pinned_powertools_layer(env: Synthesised) -> None:
    for logical_id, function in env.of_type("AWS::Lambda::Function").items():
        props = function["Properties"]
        if "Custom::CDKBucketDeployment" in logical_id or props.get("Handler", "").startswith("index."):
            continue
        assert props["Runtime"] == "python3.12", logical_id
        assert props["TracingConfig"] == {"Mode": "Active"}
        # JSON logs, and Lambda's own START/END/REPORT lines only at the environment's system log level.
        assert {k: v for k, v in props["LoggingConfig"].items() if k != "LogGroup"} == {
            "LogFormat": "JSON",
            "SystemLogLevel": env.config.system_log_level,
            "ApplicationLogLevel": "INFO",
        }, logical_id
        (layer,) = props["Layers"]
        assert (
            f":layer:AWSLambdaPowertoolsPythonV3-python312-x86_64:{env.config.powertools_layer_version}"
            in str(layer)
        )
