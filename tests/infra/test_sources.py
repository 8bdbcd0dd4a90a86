"""S3, EventBridge and Kinesis watchers on AWS: their rules, queues, mappings and least-privilege grants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assetflow.cdk.ingest import RULE_RETRY_ATTEMPTS
from assetflow.core.watchers import EventBridgePattern, KinesisStream, S3ObjectCreated
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _watchers(env: Synthesised, *kinds: type) -> list[tuple[str, Any]]:
    return [(n, w.source) for n, (w, _uri) in env.catalog.watchers.items() if isinstance(w.source, kinds)]


def _ingest(env: Synthesised, name: str) -> Any:
    return next(w for w in env.stack.service.ingest.watchers if w.watcher == name)


def _role_statements(env: Synthesised, role: Any) -> list[dict[str, Any]]:
    role_id = env.logical_id(role)
    return [
        statement
        for resource in env.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in resource["Properties"].get("Roles", [])
        for statement in _as_list(resource["Properties"]["PolicyDocument"]["Statement"])
    ]


def _mapping(env: Synthesised, function: Any) -> dict[str, Any]:
    function_id = env.logical_id(function)
    (found,) = [
        r["Properties"]
        for r in env.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return found


def test_each_s3_and_eventbridge_watcher_has_a_rule_feeding_its_own_queue(env: Synthesised) -> None:
    watchers = _watchers(env, S3ObjectCreated, EventBridgePattern)
    assert watchers
    for name, source in watchers:
        ingest = _ingest(env, name)
        rule = env.resources[env.logical_id(ingest.rule)]["Properties"]
        assert rule["EventPattern"] == source.event_pattern()
        assert rule["EventBusName"] == ("default" if isinstance(source, S3ObjectCreated) else source.bus)
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [env.logical_id(ingest.queue), "Arn"]}
        # What EventBridge cannot deliver after its retries goes to the watcher's DLQ, not nowhere.
        assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [env.logical_id(ingest.dlq), "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == RULE_RETRY_ATTEMPTS
        mapping = _mapping(env, ingest.function.function)
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == source.batch_size
        environment = env.resources[env.logical_id(ingest.function.function)]["Properties"]["Environment"]
        assert environment["Variables"]["WATCHER_NAME"] == name


def test_only_the_watchers_rule_may_send_to_its_queue_and_dlq(env: Synthesised) -> None:
    for name, _source in _watchers(env, S3ObjectCreated, EventBridgePattern):
        ingest = _ingest(env, name)
        rule_arn = {"Fn::GetAtt": [env.logical_id(ingest.rule), "Arn"]}
        for queue in (ingest.queue, ingest.dlq):
            queue_id = env.logical_id(queue)
            statements = [
                s
                for policy in env.of_type("AWS::SQS::QueuePolicy").values()
                if {"Ref": queue_id} in policy["Properties"]["Queues"]
                for s in policy["Properties"]["PolicyDocument"]["Statement"]
                if s.get("Principal") == {"Service": "events.amazonaws.com"}
            ]
            assert statements, (name, queue_id)
            for statement in statements:
                assert statement["Effect"] == "Allow" and statement["Action"] == "sqs:SendMessage"
                assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": rule_arn}}


def test_eventbridge_may_use_the_key_for_this_accounts_rules_only(env: Synthesised) -> None:
    key = env.resources[env.logical_id(env.stack.service.key)]["Properties"]["KeyPolicy"]
    (statement,) = [s for s in key["Statement"] if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert set(statement["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "rule/*" in json.dumps(statement["Condition"]["ArnLike"])


def test_the_stack_turns_on_the_watched_buckets_eventbridge_notifications_with_two_actions(
    env: Synthesised,
) -> None:
    buckets = sorted({s.bucket for _n, s in _watchers(env, S3ObjectCreated)})
    (resource,) = env.of_type("Custom::EventBridgeNotifications").values()
    assert resource["Properties"]["Buckets"] == buckets
    handler = env.stack.service.ingest.bucket_notifications
    assert resource["Properties"]["ServiceToken"] == {"Fn::GetAtt": [env.logical_id(handler.function), "Arn"]}
    statements = [
        s for s in _role_statements(env, handler.role) if "s3:PutBucketNotification" in json.dumps(s)
    ]
    (statement,) = statements
    assert sorted(_as_list(statement["Action"])) == ["s3:GetBucketNotification", "s3:PutBucketNotification"]
    resources = json.dumps(statement["Resource"])
    assert all(f":::{b}" in resources for b in buckets) and "*" not in resources


def test_kinesis_mappings_bisect_retry_expire_and_keep_failed_batches(env: Synthesised) -> None:
    watchers = _watchers(env, KinesisStream)
    assert watchers
    failures = env.logical_id(env.stack.service.failures.bucket)
    for name, source in watchers:
        ingest = _ingest(env, name)
        mapping = _mapping(env, ingest.function.function)
        assert mapping["BisectBatchOnFunctionError"] is True
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["MaximumRetryAttempts"] == env.config.stream_retry_attempts
        assert mapping["MaximumRecordAgeInSeconds"] == env.config.stream_max_record_age.to_seconds()
        assert mapping["StartingPosition"] == source.starting_position
        assert mapping["BatchSize"] == source.batch_size
        assert failures in json.dumps(mapping["DestinationConfig"]["OnFailure"]["Destination"])
        stream = env.resources[env.logical_id(ingest.stream)]["Properties"]
        assert stream["StreamEncryption"]["EncryptionType"] == "KMS"
        assert stream["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}


def test_kinesis_ingest_reads_its_own_stream_only(env: Synthesised) -> None:
    for name, _source in _watchers(env, KinesisStream):
        ingest = _ingest(env, name)
        stream_arn = {"Fn::GetAtt": [env.logical_id(ingest.stream), "Arn"]}
        reads = [
            s
            for s in _role_statements(env, ingest.function.role)
            if any(a.startswith("kinesis:") for a in _as_list(s["Action"]))
        ]
        assert any("kinesis:GetRecords" in _as_list(s["Action"]) for s in reads), name
        for statement in reads:
            actions = _as_list(statement["Action"])
            assert _as_list(statement["Resource"]) == [stream_arn], statement
            assert not any(a in ("kinesis:PutRecord", "kinesis:PutRecords", "kinesis:*") for a in actions)


def test_kinesis_streams_are_named_in_the_outputs(env: Synthesised) -> None:
    outputs = env.template.to_json()["Outputs"]
    streams = outputs["StreamNames"]["Value"]
    assert all(name in json.dumps(streams) for name, _s in _watchers(env, KinesisStream))


def test_an_existing_stream_is_read_with_decrypt_on_its_own_key_only(tmp_path: Any) -> None:
    import dataclasses

    from aws_cdk import App
    from aws_cdk.assertions import Template

    from assetflow import Asset, AssetWatcher, Catalog
    from assetflow.cdk.app_context import feature_flags
    from assetflow.cdk.config import ENVIRONMENTS
    from assetflow.cdk.stack import AssetflowStack
    from tests.infra.conftest import ROOT

    # Given a watcher of an existing stream encrypted with a customer managed key, named in the config
    stream_arn = "arn:aws:kinesis:us-east-1:123456789012:stream/partner-clicks"
    key_arn = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    catalog = Catalog.build(
        [Asset("x-a://clicks", watchers=[AssetWatcher("partner-clicks", KinesisStream(stream_arn))])]
    )
    config = dataclasses.replace(
        ENVIRONMENTS["dev"], name="existing", existing_stream_keys={stream_arn: key_arn}
    )
    app = App(outdir=str(tmp_path / "out"), context=feature_flags(ROOT))
    stack = AssetflowStack(
        app, "existing", catalog=catalog, config=config, project_root=ROOT, build_dir=tmp_path / "b"
    )
    template = Template.from_stack(stack).to_json()

    # Then the ingest role reads that stream and may decrypt with that key, and no stream is created
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::Kinesis::Stream"]
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    reads = [s for s in statements if "kinesis:GetRecords" in _as_list(s["Action"])]
    assert reads and all(_as_list(s["Resource"]) == [stream_arn] for s in reads)
    assert any(
        "kms:Decrypt" in _as_list(s["Action"]) and key_arn in json.dumps(s["Resource"]) for s in statements
    )
