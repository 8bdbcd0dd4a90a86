"""Ingest: SQS and Kafka watchers become queues with DLQs and event-source mappings with safe failure handling."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from assetflow.cdk.app_context import feature_flags
from assetflow.cdk.config import ENVIRONMENTS, ConfigError, KafkaSettings
from assetflow.cdk.ingest import VISIBILITY_TIMEOUT_FACTOR
from assetflow.cdk.stack import AssetflowStack
from assetflow.core.catalog import Catalog
from assetflow.core.watchers import EventBridgePattern, KafkaTopic, KinesisStream, S3ObjectCreated, SqsQueue
from tests.infra.conftest import ROOT, Synthesised

pytestmark = pytest.mark.infra


def _watchers(env: Synthesised, kind: type) -> list[tuple[str, object]]:
    return [
        (name, w.source) for name, (w, _uri) in env.catalog.watchers.items() if isinstance(w.source, kind)
    ]


def _ingest(env: Synthesised, name: str):
    return next(w for w in env.stack.service.ingest.watchers if w.watcher == name)


def _mappings_of(env: Synthesised, function) -> list[dict]:
    function_id = env.logical_id(function)
    return [
        r["Properties"]
        for r in env.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]


def test_the_example_catalog_has_every_kind_of_watcher(catalog: Catalog) -> None:
    kinds = {type(w.source) for w, _uri in catalog.watchers.values()}
    assert kinds == {SqsQueue, KafkaTopic, S3ObjectCreated, EventBridgePattern, KinesisStream}


def test_one_mapping_per_watcher(env: Synthesised) -> None:
    for name in env.catalog.watchers:
        assert len(_mappings_of(env, _ingest(env, name).function.function)) == 1, name


def test_sqs_mappings_report_partial_batch_failures_with_the_watchers_batching(env: Synthesised) -> None:
    for name, source in _watchers(env, SqsQueue):
        ingest = _ingest(env, name)
        (mapping,) = _mappings_of(env, ingest.function.function)
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == source.batch_size
        assert mapping.get("MaximumBatchingWindowInSeconds", 0) == source.max_batching_window_seconds
        assert mapping["EventSourceArn"] == {"Fn::GetAtt": [env.logical_id(ingest.queue), "Arn"]}


def test_watcher_queues_redrive_to_a_dlq_and_outlast_six_function_timeouts(env: Synthesised) -> None:
    timeout = env.config.ingest_timeout.to_seconds()
    for name, source in _watchers(env, SqsQueue):
        ingest = _ingest(env, name)
        queue = env.resources[env.logical_id(ingest.queue)]["Properties"]
        assert queue["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [env.logical_id(ingest.dlq), "Arn"]},
            "maxReceiveCount": env.config.max_receive_count,
        }
        assert queue["VisibilityTimeout"] >= VISIBILITY_TIMEOUT_FACTOR * timeout
        function = env.resources[env.logical_id(ingest.function.function)]["Properties"]
        assert function["Timeout"] == timeout
        assert function["Environment"]["Variables"]["WATCHER_NAME"] == name
        assert bool(queue.get("FifoQueue")) == bool(source.fifo)


def _assert_kafka_mappings(env: Synthesised) -> None:
    kafka = env.config.kafka
    watchers = _watchers(env, KafkaTopic)
    assert watchers
    for name, source in watchers:
        ingest = _ingest(env, name)
        (mapping,) = _mappings_of(env, ingest.function.function)
        assert mapping["Topics"] == [source.topic]
        assert mapping["StartingPosition"] == source.starting_position
        assert mapping["BatchSize"] == source.batch_size
        # The failed batch itself, records and all, goes to the failures bucket (tests/infra/test_failures.py).
        assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
            "Fn::GetAtt": [env.logical_id(env.stack.service.failures.bucket), "Arn"]
        }
        if kafka.provisioned:
            assert mapping["BisectBatchOnFunctionError"] is True
            assert mapping["MaximumRetryAttempts"] == kafka.retry_attempts
            assert mapping["MaximumRecordAgeInSeconds"] == kafka.max_record_age.to_seconds()
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            # Lambda honours the retry settings of Kafka mappings in provisioned mode only.
            assert mapping["ProvisionedPollerConfig"] == {
                "MinimumPollers": kafka.min_pollers,
                "MaximumPollers": kafka.max_pollers,
            }
        else:
            # On demand: no poller billed while the topic is idle, and a failed batch is retried until it
            # succeeds (the settings that bound retries exist in provisioned mode only).
            for setting in (
                "ProvisionedPollerConfig",
                "MaximumRetryAttempts",
                "MaximumRecordAgeInSeconds",
                "BisectBatchOnFunctionError",
            ):
                assert setting not in mapping, setting
        # No event-source filter: messages failing the watcher's filter are quarantined, never dropped.
        assert "FilterCriteria" not in mapping


def test_kafka_mappings_poll_on_demand_and_dead_letter(env: Synthesised) -> None:
    assert not env.config.kafka.provisioned  # the default: nothing billed while a topic is idle
    assert env.config.kafka.idle_usd_per_day == 0
    _assert_kafka_mappings(env)


def test_provisioned_kafka_mappings_bisect_retry_expire_and_dead_letter(
    catalog: Catalog, tmp_path: Path
) -> None:
    # Given an environment that asks for provisioned pollers (bounded retries, at a price)
    base = ENVIRONMENTS["prod"]
    config = dataclasses.replace(
        base, name="provisioned", kafka=dataclasses.replace(base.kafka, provisioned=True)
    )
    assert config.kafka.idle_usd_per_day == pytest.approx(config.kafka.min_pollers * 0.185 * 24)
    app = App(outdir=str(tmp_path / "out"), context=feature_flags(ROOT))
    stack = AssetflowStack(
        app, "provisioned", catalog=catalog, config=config, project_root=ROOT, build_dir=tmp_path / "build"
    )
    template = Template.from_stack(stack)
    env = Synthesised(config, catalog, stack, template, template.to_json()["Resources"], [], None)
    # Then every Kafka mapping bisects, retries, expires records and keeps its pollers
    _assert_kafka_mappings(env)


def test_kafka_watchers_without_a_cluster_use_the_environments_default_cluster(env: Synthesised) -> None:
    default = env.config.kafka.default_cluster
    assert default is not None
    for name, source in _watchers(env, KafkaTopic):
        if source.cluster is not None:
            continue
        (mapping,) = _mappings_of(env, _ingest(env, name).function.function)
        if default.is_msk:
            assert mapping["EventSourceArn"] == default.msk_cluster_arn
            assert mapping["AmazonManagedKafkaEventSourceConfig"]["ConsumerGroupId"]
        else:
            assert mapping["SelfManagedEventSource"]["Endpoints"]["KafkaBootstrapServers"] == list(
                default.bootstrap_servers
            )
            access = {(c["Type"], c["URI"]) for c in mapping["SourceAccessConfigurations"]}
            if default.secret_arn:
                assert (default.authentication, default.secret_arn) in access
            if default.vpc:
                assert ("VPC_SECURITY_GROUP", default.vpc.security_group_id) in access
                assert {("VPC_SUBNET", s) for s in default.vpc.subnet_ids} <= access


def test_msk_iam_access_names_the_cluster_topic_and_group(synthesised: dict[str, Synthesised]) -> None:
    env = synthesised["prod"]
    cluster_arn = env.config.kafka.default_cluster.msk_cluster_arn
    statements = {
        tuple(sorted(s["Action"] if isinstance(s["Action"], list) else [s["Action"]])): s["Resource"]
        for p in env.of_type("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "kafka-cluster" in str(s["Action"])
    }
    topic_arn = cluster_arn.replace(":cluster/", ":topic/") + "/sensor-readings"
    assert statements[("kafka-cluster:DescribeTopic", "kafka-cluster:ReadData")] == topic_arn
    assert (
        statements[("kafka-cluster:Connect", "kafka-cluster:DescribeClusterDynamicConfiguration")]
        == cluster_arn
    )
    group = statements[("kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup")]
    assert group == cluster_arn.replace(":cluster/", ":group/") + "/assetflow-prod.sensor-readings"


def test_a_default_cluster_watcher_without_a_default_cluster_fails_naming_the_watcher(
    catalog: Catalog, tmp_path: Path
) -> None:
    # Given an environment without a default Kafka cluster and a catalog whose Kafka watcher has cluster=None
    config = dataclasses.replace(
        ENVIRONMENTS["dev"], name="nokafka", kafka=KafkaSettings(default_cluster=None)
    )
    # When the stack is built, Then it fails before synthesis and names the watcher
    with pytest.raises(ConfigError, match=r"watcher 'sensor-readings'.*no default Kafka cluster"):
        AssetflowStack(
            App(context=feature_flags(ROOT)),
            "nokafka",
            catalog=catalog,
            config=config,
            project_root=ROOT,
            build_dir=tmp_path,
        )
