"""The local runtime's resources, created from the catalog as the stack creates them on AWS."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.core.catalog import Catalog
from assetflow.core.uri import normalize_uri
from assetflow.core.watchers import (
    EventBridgePattern,
    KafkaTopic,
    KinesisStream,
    MskCluster,
    S3ObjectCreated,
    SqsQueue,
)
from assetflow.jobcode import PY_FILES_ARCHIVE, build_py_files_zip
from assetflow.versions import EMR_RELEASE_LABEL
from assetflow_dev.aws import LOCAL_ACCOUNT_ID, LOCAL_REGION, client

logger = logging.getLogger(__name__)

#: How many receives before SQS moves a message to its queue's DLQ (the dev stack's setting).
MAX_RECEIVE_COUNT = 3
#: The SQS visibility timeout of the watched queues, in seconds. The pollers hand failed messages back
#: sooner (after a second); this bounds how long a message stays hidden when its poller dies mid-batch.
VISIBILITY_TIMEOUT_SECONDS = 30
#: A local MSK cluster ARN: Kafka watchers on the default (MSK) cluster get this one as their event source.
LOCAL_MSK_ARN = f"arn:aws:kafka:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:cluster/assetflow-local/local-0000-0000"
#: The functions invoked asynchronously (EventBridge, Scheduler, the sweep's schedule): each has an on-failure
#: queue, as on AWS.
ASYNC_FUNCTIONS = ("run-state", "schedule-tick", "reconcile")


@dataclass(frozen=True)
class ResourceNames:
    """The names the runtime gives what the stack would name (one runtime per working directory)."""

    prefix: str = "assetflow-local"

    @property
    def table(self) -> str:
        """The events table."""
        return self.prefix

    @property
    def runs_bucket(self) -> str:
        """The bucket of run contexts, outlet metadata and job code."""
        return f"{self.prefix}-runs"

    @property
    def event_bus(self) -> str:
        """The listener bus that asset events are published on."""
        return self.prefix

    @property
    def application(self) -> str:
        """The EMR Serverless application."""
        return self.prefix

    @property
    def job_role_arn(self) -> str:
        """The jobs' execution role (moto checks only its form)."""
        return f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/{self.prefix}-jobs"

    def failure_queue(self, function: str) -> str:
        """The on-failure queue of an asynchronously invoked function (job state, ticks, the sweep)."""
        return f"{self.prefix}-{function}-failures"

    @property
    def failures_bucket(self) -> str:
        """The on-failure destination of the stream and Kafka mappings (failed batches, records and all)."""
        return f"{self.prefix}-failures"


@dataclass(frozen=True)
class QueueResource:
    """A watched SQS queue and its dead-letter queue."""

    watcher: str
    url: str
    arn: str
    dlq_url: str
    dlq_arn: str
    batch_size: int


@dataclass(frozen=True)
class TopicResource:
    """A watched Kafka topic, its consumer group and the event source its records carry."""

    watcher: str
    topic: str
    group_id: str
    event_source: str
    event_source_arn: str | None
    batch_size: int


@dataclass(frozen=True)
class RuleResource:
    """An EventBridge rule of an S3 or EventBridge watcher, which fills the watcher's queue."""

    watcher: str
    bus: str
    name: str
    pattern: Mapping[str, Any]


@dataclass(frozen=True)
class StreamResource:
    """A watched Kinesis data stream."""

    watcher: str
    stream: str
    arn: str
    batch_size: int
    starting_position: str


@dataclass(frozen=True)
class LocalResources:
    """What `provision` created, by name and URL."""

    table: str
    stream_arn: str
    runs_bucket: str
    event_bus: str
    emr_application_id: str
    job_role_arn: str
    catalog_path: Path
    data_dir: Path
    path_map: Mapping[str, str]
    queues: Mapping[str, QueueResource] = field(default_factory=dict)
    topics: Mapping[str, TopicResource] = field(default_factory=dict)
    #: The rules of the S3 and EventBridge watchers (their queues are in ``queues``).
    rules: Mapping[str, RuleResource] = field(default_factory=dict)
    streams: Mapping[str, StreamResource] = field(default_factory=dict)
    #: The buckets S3 watchers watch (created, with their EventBridge notifications on).
    watched_buckets: tuple[str, ...] = ()
    failure_queues: Mapping[str, str] = field(default_factory=dict)
    failures_bucket: str = ""
    #: The KMS HMAC key of per-run secrets (moto's), as the stack's RunTokenKey.
    run_token_key: str = ""

    def to_json(self) -> dict[str, Any]:
        """The resources as `.assetflow/dev.json` lists them."""
        return {
            "table": self.table,
            "runs_bucket": self.runs_bucket,
            "event_bus": self.event_bus,
            "emr_application_id": self.emr_application_id,
            "queues": {
                w: {"url": q.url, "arn": q.arn, "dlq_url": q.dlq_url} for w, q in sorted(self.queues.items())
            },
            "topics": {
                w: {
                    "topic": t.topic,
                    "group_id": t.group_id,
                    "event_source": t.event_source,
                    "event_source_arn": t.event_source_arn,
                }
                for w, t in sorted(self.topics.items())
            },
            "rules": {w: {"bus": r.bus, "rule": r.name} for w, r in sorted(self.rules.items())},
            "streams": {w: {"stream": k.stream, "arn": k.arn} for w, k in sorted(self.streams.items())},
            "watched_buckets": list(self.watched_buckets),
            "data_dir": str(self.data_dir),
            "path_map": dict(self.path_map),
            "failures": {"bucket": self.failures_bucket, "queues": dict(sorted(self.failure_queues.items()))},
        }


def data_buckets(catalog: Catalog) -> list[str]:
    """The S3 buckets the catalog's asset URIs name (their data lives in local folders)."""
    buckets = set()
    for uri in catalog.assets:
        # The host alone: Airflow's rules let an s3:// URI carry a user name or a port.
        bucket = urllib.parse.urlsplit(normalize_uri(uri)).hostname if uri.startswith("s3://") else None
        if bucket:
            buckets.add(bucket)
    return sorted(buckets)


def local_path_map(catalog: Catalog, data_dir: Path) -> dict[str, str]:
    """Map each data bucket of the catalog (``s3://bucket``) to a folder under ``data_dir``."""
    return {f"s3://{bucket}": str((data_dir / bucket).resolve()) for bucket in data_buckets(catalog)}


def provision(
    catalog: Catalog,
    *,
    dynamodb_endpoint: str,
    moto_endpoint: str,
    kafka: Any | None,
    work_dir: Path,
    names: ResourceNames | None = None,
    repo_root: Path | None = None,
) -> LocalResources:
    """Create the table with its stream, the queues with DLQs, the buckets, the bus, the topics and EMR app.

    Idempotent: what exists already is reused. ``kafka`` is a started `TansuBroker` (None when the catalog
    has no Kafka watcher). Job code (entry points and the ``--py-files`` zip) is uploaded under
    ``s3://<runs bucket>/code/`` as the stack's deployment does, for the ``emr-api`` launcher.

    Raises:
        botocore.exceptions.ClientError: an emulator refused a request.
    """
    names = names or ResourceNames()
    work_dir.mkdir(parents=True, exist_ok=True)
    catalog_path = work_dir / "catalog.json"
    catalog_path.write_text(json.dumps(catalog.to_document(), sort_keys=True))
    data_dir = (work_dir / "data").resolve()
    path_map = local_path_map(catalog, data_dir)
    for folder in path_map.values():
        Path(folder).mkdir(parents=True, exist_ok=True)

    store = DynamoDbStore(client("dynamodb", dynamodb_endpoint), names.table)
    store.create_table()
    stream_arn = store.stream_arn()

    s3 = client("s3", moto_endpoint)
    _create_bucket(s3, names.runs_bucket)
    if repo_root is not None:
        upload_job_code(s3, names.runs_bucket, catalog, repo_root, work_dir)
    events = client("events", moto_endpoint)
    if names.event_bus not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=names.event_bus)

    sqs = client("sqs", moto_endpoint)
    queues: dict[str, QueueResource] = {}
    topics: dict[str, TopicResource] = {}
    rules: dict[str, RuleResource] = {}
    streams: dict[str, StreamResource] = {}
    watched: set[str] = set()
    for name, (watcher, _asset) in catalog.watchers.items():
        source = watcher.source
        if isinstance(source, SqsQueue):
            queues[name] = _create_watched_queue(sqs, name, source)
        elif isinstance(source, KafkaTopic):
            topics[name] = _topic_resource(name, source, names)
        elif isinstance(source, S3ObjectCreated | EventBridgePattern):
            if isinstance(source, S3ObjectCreated) and source.bucket not in watched:
                _watch_bucket(s3, source.bucket)
                watched.add(source.bucket)
            queues[name], rules[name] = _create_rule_queue(sqs, events, name, source, names)
        elif isinstance(source, KinesisStream):
            streams[name] = _create_stream(client("kinesis", moto_endpoint), name, source)
    if topics:
        if kafka is None:
            raise ValueError("the catalog has Kafka watchers but no broker was started")
        kafka.create_topics(sorted({t.topic for t in topics.values()}))
    failure_queues = {
        function: _create_queue(sqs, names.failure_queue(function), {})[0] for function in ASYNC_FUNCTIONS
    }
    _create_bucket(s3, names.failures_bucket)
    emr = client("emr-serverless", moto_endpoint)
    application_id = _emr_application(emr, names.application)
    run_token_key = _hmac_key(client("kms", moto_endpoint), names.prefix)
    logger.info(
        "local resources ready",
        extra={
            "table": names.table,
            "queues": sorted(queues),
            "topics": sorted(topics),
            "rules": sorted(rules),
            "streams": sorted(streams),
        },
    )
    return LocalResources(
        table=names.table,
        stream_arn=stream_arn,
        runs_bucket=names.runs_bucket,
        event_bus=names.event_bus,
        emr_application_id=application_id,
        job_role_arn=names.job_role_arn,
        catalog_path=catalog_path,
        data_dir=data_dir,
        path_map=path_map,
        queues=queues,
        topics=topics,
        rules=rules,
        streams=streams,
        watched_buckets=tuple(sorted(watched)),
        failure_queues=failure_queues,
        failures_bucket=names.failures_bucket,
        run_token_key=run_token_key,
    )


def _create_bucket(s3: Any, bucket: str) -> None:
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)


def _create_queue(sqs: Any, name: str, attributes: Mapping[str, str]) -> tuple[str, str]:
    attributes = dict(attributes)
    if name.endswith(".fifo"):
        attributes["FifoQueue"] = "true"
    try:
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except sqs.exceptions.QueueNameExists:
        # It exists with other settings (an older definition): bring it to these, as a stack update would.
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        changeable = {k: v for k, v in attributes.items() if k != "FifoQueue"}
        if changeable:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=changeable)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return str(url), str(arn)


def _create_watched_queue(sqs: Any, watcher: str, source: SqsQueue) -> QueueResource:
    queue_name = source.queue_name
    base = queue_name.removesuffix(".fifo")
    dlq_name = f"{base}-dlq.fifo" if source.fifo else f"{base}-dlq"
    dlq_url, dlq_arn = _create_queue(sqs, dlq_name, {"MessageRetentionPeriod": str(14 * 24 * 3600)})
    attributes = {
        "VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}),
    }
    if source.fifo:
        attributes["ContentBasedDeduplication"] = "false"
    url, arn = _create_queue(sqs, queue_name, attributes)
    return QueueResource(
        watcher=watcher,
        url=url,
        arn=arn,
        dlq_url=dlq_url,
        dlq_arn=dlq_arn,
        batch_size=source.batch_size,
    )


def bounded_name(prefix: str, watcher: str, suffix: str, limit: int) -> str:
    """``<prefix>-<watcher><suffix>`` in the characters queue and rule names allow, cut to ``limit`` with a hash."""
    name = f"{prefix}-{watcher.replace('.', '-')}{suffix}"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(watcher.encode()).hexdigest()[:8]
    return f"{name[: limit - len(suffix) - 9]}-{digest}{suffix}"


def _watch_bucket(s3: Any, bucket: str) -> None:
    """Create a watched bucket and turn its EventBridge notifications on, keeping its other notifications."""
    _create_bucket(s3, bucket)
    current = s3.get_bucket_notification_configuration(Bucket=bucket)
    current.pop("ResponseMetadata", None)
    if "EventBridgeConfiguration" not in current:
        s3.put_bucket_notification_configuration(
            Bucket=bucket, NotificationConfiguration={**current, "EventBridgeConfiguration": {}}
        )


def _create_rule_queue(
    sqs: Any, events: Any, watcher: str, source: S3ObjectCreated | EventBridgePattern, names: ResourceNames
) -> tuple[QueueResource, RuleResource]:
    """The watcher's queue (with its DLQ) and the rule that puts its events there, as the stack makes them."""
    queue_name = bounded_name(names.prefix, watcher, "-events", 76)  # its DLQ adds "-dlq"
    queue = _create_watched_queue(sqs, watcher, SqsQueue(queue_name, batch_size=source.batch_size))
    bus = "default" if isinstance(source, S3ObjectCreated) else source.bus_name
    if bus not in {b["Name"] for b in events.list_event_buses()["EventBuses"]}:
        events.create_event_bus(Name=bus)
    rule = bounded_name(names.prefix, watcher, "", 64)
    pattern = source.event_pattern()
    events.put_rule(Name=rule, EventBusName=bus, EventPattern=json.dumps(pattern), State="ENABLED")
    events.put_targets(Rule=rule, EventBusName=bus, Targets=[{"Id": "ingest-queue", "Arn": queue.arn}])
    return queue, RuleResource(watcher=watcher, bus=bus, name=rule, pattern=pattern)


def _create_stream(kinesis: Any, watcher: str, source: KinesisStream) -> StreamResource:
    """The watched stream (one shard, as a new on-demand stream starts small); an existing one is reused."""
    name = source.stream_name
    with contextlib.suppress(kinesis.exceptions.ResourceInUseException):
        kinesis.create_stream(StreamName=name, ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    return StreamResource(
        watcher=watcher,
        stream=name,
        arn=str(arn),
        batch_size=source.batch_size,
        starting_position=source.starting_position,
    )


def _topic_resource(watcher: str, source: KafkaTopic, names: ResourceNames) -> TopicResource:
    # Every cluster is the one local broker. MSK (and the default cluster) records carry an MSK ARN; a
    # self-managed cluster's carry only their bootstrap servers, as Lambda sends them.
    msk = source.cluster is None or isinstance(source.cluster, MskCluster)
    arn = None
    if msk:
        arn = source.cluster.cluster_arn if isinstance(source.cluster, MskCluster) else LOCAL_MSK_ARN
    return TopicResource(
        watcher=watcher,
        topic=source.topic,
        group_id=source.consumer_group_id or f"{names.prefix}.{watcher}",
        event_source="aws:kafka" if msk else "SelfManagedKafka",
        event_source_arn=arn,
        batch_size=source.batch_size,
    )


def _hmac_key(kms: Any, prefix: str) -> str:
    """The HMAC key of the runs' tokens: an alias names it, so a restarted runtime on the same moto reuses it."""
    alias = f"alias/{prefix}-run-tokens"
    with contextlib.suppress(kms.exceptions.NotFoundException):
        return str(kms.describe_key(KeyId=alias)["KeyMetadata"]["Arn"])
    key = kms.create_key(
        KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC", Description="assetflow local run tokens"
    )["KeyMetadata"]
    kms.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
    return str(key["Arn"])


def _emr_application(emr: Any, name: str) -> str:
    for page in emr.get_paginator("list_applications").paginate():
        for application in page["applications"]:
            if application["name"] == name and application["state"] not in {"TERMINATED", "TERMINATING"}:
                return str(application["id"])
    answer = emr.create_application(name=name, releaseLabel=EMR_RELEASE_LABEL, type="SPARK")
    return str(answer["applicationId"])


def upload_job_code(s3: Any, bucket: str, catalog: Catalog, repo_root: Path, work_dir: Path) -> Path:
    """Upload every pipeline's entry point and the ``--py-files`` zip under ``code/``; return the zip's path."""
    entry_points = list(_entry_points(catalog))
    archive = build_py_files_zip(work_dir / PY_FILES_ARCHIVE, repo_root, entry_points)
    s3.upload_file(str(archive), bucket, f"code/{PY_FILES_ARCHIVE}")
    for entry_point in entry_points:
        path = repo_root / entry_point
        if path.is_file():
            s3.upload_file(str(path), bucket, f"code/{entry_point}")
    return archive


def _entry_points(catalog: Catalog) -> Iterable[str]:
    return sorted(
        {p.job.entry_point for p in catalog.pipelines.values() if not p.job.entry_point.startswith("s3://")}
    )
