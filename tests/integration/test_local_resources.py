"""The local runtime's resources, created from the example catalog on the emulators as the stack creates them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assetflow.loader import load_catalog
from assetflow_dev import TansuBroker
from assetflow_dev.resources import MAX_RECEIVE_COUNT, LocalResources, ResourceNames

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def names() -> ResourceNames:
    return ResourceNames(prefix=f"af-{uuid.uuid4().hex[:8]}")


def test_provision_creates_what_the_stack_would(
    provisioned: Callable[..., LocalResources],
    kafka_broker: TansuBroker,
    sqs_client: Any,
    s3_client: Any,
    dynamodb_client: Any,
    emr_serverless_client: Any,
    names: ResourceNames,
) -> None:
    # Given
    catalog = load_catalog(str(REPO_ROOT / "pipelines"))

    # When: provisioned twice (a restart reuses what exists)
    for _ in range(2):
        resources = provisioned(catalog, names=names, kafka=kafka_broker, repo_root=REPO_ROOT)

    # Then: the table with its stream
    table = dynamodb_client.describe_table(TableName=names.table)["Table"]
    assert table["StreamSpecification"]["StreamViewType"] in {"NEW_IMAGE", "NEW_AND_OLD_IMAGES"}
    assert resources.stream_arn == table["LatestStreamArn"]
    # the watched queue with its DLQ and redrive policy
    queue = resources.queues["deliveries"]
    attributes = sqs_client.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["All"])["Attributes"]
    assert json.loads(attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": queue.dlq_arn,
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }
    # the topic, with an MSK event source for the default cluster
    topic = resources.topics["sensor-readings"]
    assert topic.topic in kafka_broker.list_topics()
    assert topic.event_source == "aws:kafka"
    assert topic.event_source_arn and topic.event_source_arn.startswith("arn:aws:kafka:")
    # the runs bucket with the job code, and the EMR Serverless application
    keys = {o["Key"] for o in s3_client.list_objects_v2(Bucket=names.runs_bucket)["Contents"]}
    assert {"code/assetflow_jobs.zip", "code/spark_jobs/deliveries_etl.py"} <= keys
    application = emr_serverless_client.get_application(applicationId=resources.emr_application_id)
    assert application["application"]["name"] == names.application
    # the catalog document and the data folders of the s3:// assets
    assert json.loads(resources.catalog_path.read_text())["pipelines"]
    assert set(resources.path_map) == {"s3://assetflow-demo", "s3://assetflow-demo-inbox"}
    # the S3, EventBridge and Kinesis watchers' bucket, rules (with their queues) and stream
    assert resources.watched_buckets == ("assetflow-demo-inbox",)
    assert set(resources.rules) == {"inbox-files", "shop-orders"} <= set(resources.queues)
    assert set(resources.streams) == {"web-clicks"}
    assert Path(resources.path_map["s3://assetflow-demo"]).is_dir()
    # where give-ups go: a queue per asynchronously invoked function, a bucket for failed stream/Kafka batches
    assert set(resources.failure_queues) == {"run-state", "schedule-tick", "reconcile"}
    assert resources.failures_bucket in {b["Name"] for b in s3_client.list_buckets()["Buckets"]}


def test_a_watched_queue_keeps_its_batch_size_above_ten_as_lambda_does_with_a_window(
    provisioned: Callable[..., LocalResources], names: ResourceNames
) -> None:
    from assetflow import Asset, AssetWatcher, Catalog, SqsQueue

    name = f"burst-{uuid.uuid4().hex[:8]}"
    catalog = Catalog.build(
        [
            Asset(
                "x-a://burst",
                watchers=[
                    AssetWatcher("burst", SqsQueue(name, batch_size=500, max_batching_window_seconds=1))
                ],
            ),
            Asset(
                "x-a://ordered", watchers=[AssetWatcher("ordered", SqsQueue(f"{name}.fifo", batch_size=10))]
            ),
        ]
    )

    resources = provisioned(catalog, names=names)

    assert (resources.queues["burst"].batch_size, resources.queues["ordered"].batch_size) == (500, 10)
