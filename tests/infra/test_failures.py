"""Every give-up of the stack ends somewhere replayable and alarmed (issue 14, items 2 and 6).

Stream and Kafka mappings: bisect, bounded retries and record age (for Kafka in provisioned mode, where Lambda
takes them), and the failures bucket as on-failure destination (the records themselves kept), with an alarm on
the mapping's deliveries there. Asynchronous
invocations (job state, ticks, the sweep): an on-failure queue after Lambda's retries, with a depth alarm.
Every function that has a destination: an alarm when Lambda cannot deliver to it. The sweep: scheduled, and
alarmed on what it repairs and on its own errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from assetflow.cdk.failures import FAILURE_PREFIX
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra


def _ref(value: Any) -> str | None:
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def _alarms(env: Synthesised) -> list[dict[str, Any]]:
    return [a["Properties"] for a in env.of_type("AWS::CloudWatch::Alarm").values()]


def _mappings(env: Synthesised, *, sqs: bool) -> dict[str, dict[str, Any]]:
    queues = set(env.of_type("AWS::SQS::Queue"))
    return {
        k: m["Properties"]
        for k, m in env.of_type("AWS::Lambda::EventSourceMapping").items()
        if (_ref(m["Properties"].get("EventSourceArn")) in queues) == sqs
    }


def test_stream_and_kafka_mappings_keep_failed_batches_whole_in_the_failures_bucket(env: Synthesised) -> None:
    bucket = env.logical_id(env.stack.service.failures.bucket)
    mappings = _mappings(env, sqs=False)
    assert len(mappings) == 1 + sum(w.kind in ("kafka", "kinesis") for w in env.stack.service.ingest.watchers)
    watched = {
        d["Value"]["Ref"]
        for a in _alarms(env)
        if a.get("MetricName") == "OnFailureDestinationDeliveredEventCount"
        for d in a["Dimensions"]
        if d["Name"] == "EventSourceMappingUUID"
    }
    for logical_id, mapping in mappings.items():
        assert _ref(mapping["DestinationConfig"]["OnFailure"]["Destination"]) == bucket, logical_id
        assert mapping["MetricsConfig"] == {"Metrics": ["EventCount"]}, logical_id
        assert logical_id in watched, f"{logical_id}: no alarm on its failed batches"
        # Lambda takes a Kafka mapping's error handling only in provisioned mode: on demand, a failed batch is
        # retried until it succeeds (the function stores what it can and quarantines the rest, so only an outage
        # holds a partition back), and the settings are left out rather than refused at deploy time.
        if "Topics" in mapping and not env.config.kafka.provisioned:
            assert not {"MaximumRetryAttempts", "BisectBatchOnFunctionError", "FunctionResponseTypes"} & set(
                mapping
            )
            continue
        assert mapping["MaximumRetryAttempts"] >= 1 and mapping["MaximumRecordAgeInSeconds"] > 0, logical_id
        assert mapping.get("BisectBatchOnFunctionError") is True, logical_id
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"], logical_id


def test_the_failures_bucket_is_private_encrypted_and_kept_within_the_dedupe_window(env: Synthesised) -> None:
    bucket = env.resources[env.logical_id(env.stack.service.failures.bucket)]["Properties"]
    rule = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert rule["SSEAlgorithm"] == "aws:kms"
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    (expiry,) = [r for r in bucket["LifecycleConfiguration"]["Rules"] if "ExpirationInDays" in r]
    assert expiry["ExpirationInDays"] == env.config.failure_retention.to_days() <= 14


def test_mapped_functions_may_only_put_their_failures_not_read_or_delete_them(env: Synthesised) -> None:
    bucket = env.logical_id(env.stack.service.failures.bucket)
    for policy in env.of_type("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            if not any(bucket in str(r) for r in resources):
                continue
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert set(actions) <= {"s3:PutObject", "s3:ListBucket"}, statement
            if "s3:PutObject" in actions:
                ours = [r for r in resources if bucket in str(r)]
                assert all(FAILURE_PREFIX in str(r) for r in ours), statement


def test_asynchronously_invoked_functions_keep_failed_events_in_an_alarmed_queue(env: Synthesised) -> None:
    service = env.stack.service
    configs = {
        _ref(c["Properties"]["FunctionName"]): c["Properties"]
        for c in env.of_type("AWS::Lambda::EventInvokeConfig").values()
    }
    depth_alarmed = {
        d["Value"]["Fn::GetAtt"][0]
        for a in _alarms(env)
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
        for d in a["Dimensions"]
    }
    for function, queue in (
        (service.run_state.handler, service.run_state.dlq),
        (service.schedules.handler, service.schedules.dlq),
        (service.reconciliation.handler, service.reconciliation.failures),
    ):
        config = configs[env.logical_id(function.function)]
        assert config["MaximumRetryAttempts"] == env.config.async_retry_attempts
        assert _ref(config["DestinationConfig"]["OnFailure"]["Destination"]) == env.logical_id(queue)
        assert env.logical_id(queue) in depth_alarmed


def test_every_function_with_a_destination_alarms_when_it_cannot_deliver_to_it(env: Synthesised) -> None:
    service = env.stack.service
    alarmed = {
        d["Value"]["Ref"]
        for a in _alarms(env)
        if a.get("MetricName") == "DestinationDeliveryFailures"
        for d in a["Dimensions"]
    }
    for function in service.functions:
        if function is service.api.handler:
            continue
        assert env.logical_id(function.function) in alarmed, function.node.path


def test_the_sweep_runs_on_a_schedule_and_alarms_on_its_repairs_and_errors(env: Synthesised) -> None:
    service = env.stack.service
    rule = env.resources[env.logical_id(service.reconciliation.rule)]["Properties"]
    minutes = int(env.config.reconcile_interval.to_minutes())
    assert rule["ScheduleExpression"] == f"rate({minutes} minutes)"
    assert _ref(rule["Targets"][0]["Arn"]) == env.logical_id(service.reconciliation.handler.function)
    sweep = {
        a["MetricName"]: a
        for a in _alarms(env)
        if a.get("Namespace") == "assetflow"
        and a["Dimensions"] == [{"Name": "service", "Value": "assetflow-reconcile"}]
    }
    assert set(sweep) == {"RunsRepaired", "SweepErrors"}
    assert all(a["Threshold"] == 1 for a in sweep.values())
