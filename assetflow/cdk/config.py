"""Typed per-environment settings: environments differ only in these values, passed in keyword-only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_logs as logs

from assetflow.versions import EMR_RELEASE_LABEL

_S3_LOCATION = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/([^*?]*))?$")

#: The listener event types an environment may subscribe to.
LISTENER_EVENT_TYPES = ("AssetCreated", "AssetAliasCreated", "AssetChanged", "AssetEventEmitted", "AssetLate")

#: Lambda's own log levels (its advanced logging controls, with the JSON log format).
SystemLogLevelName = Literal["DEBUG", "INFO", "WARN"]
SYSTEM_LOG_LEVELS: tuple[SystemLogLevelName, ...] = ("DEBUG", "INFO", "WARN")

KafkaAuthentication = Literal[
    "SASL_SCRAM_512_AUTH", "SASL_SCRAM_256_AUTH", "BASIC_AUTH", "CLIENT_CERTIFICATE_TLS_AUTH"
]


class ConfigError(ValueError):
    """An environment configuration is inconsistent, or names an environment that does not exist."""


@dataclass(frozen=True, kw_only=True)
class KafkaVpcAccess:
    """Where Lambda's Kafka pollers reach a self-managed cluster inside a VPC (imported, never looked up)."""

    vpc_id: str
    availability_zones: tuple[str, ...]
    subnet_ids: tuple[str, ...]
    security_group_id: str

    def __post_init__(self) -> None:
        if not self.subnet_ids or len(self.subnet_ids) != len(self.availability_zones):
            raise ConfigError("KafkaVpcAccess: give one availability zone per subnet id")


@dataclass(frozen=True, kw_only=True)
class KafkaClusterConfig:
    """A Kafka cluster and how Lambda authenticates to it.

    An MSK cluster (``msk_cluster_arn``) uses IAM authentication unless ``secret_arn`` names a SASL/SCRAM
    secret; MSK serves both only over TLS. A self-managed cluster (``bootstrap_servers``) needs ``secret_arn``,
    the secret of ``authentication``: Lambda speaks SASL (SCRAM or PLAIN) only over TLS and mutual TLS is TLS,
    while a mapping without an authentication method would read the topic in plain text. ``vpc`` adds the
    network access of a cluster reached inside a VPC; ``root_ca_secret_arn`` names the brokers' private CA.
    """

    msk_cluster_arn: str | None = None
    bootstrap_servers: tuple[str, ...] = ()
    secret_arn: str | None = None
    authentication: KafkaAuthentication = "SASL_SCRAM_512_AUTH"
    root_ca_secret_arn: str | None = None
    vpc: KafkaVpcAccess | None = None

    def __post_init__(self) -> None:
        if (self.msk_cluster_arn is None) == (not self.bootstrap_servers):
            raise ConfigError("KafkaClusterConfig: give exactly one of msk_cluster_arn and bootstrap_servers")
        if self.bootstrap_servers and self.secret_arn is None:
            raise ConfigError(
                "KafkaClusterConfig: a self-managed cluster needs secret_arn (its SASL/SCRAM, SASL/PLAIN or "
                "client-certificate secret): without authentication Lambda reads the topic over plain text, "
                "never TLS; add vpc as well for brokers inside a VPC"
            )
        if self.msk_cluster_arn is not None and self.vpc is not None:
            raise ConfigError("KafkaClusterConfig: MSK clusters bring their own network settings; drop vpc")

    @property
    def is_msk(self) -> bool:
        """Whether this is an Amazon MSK cluster."""
        return self.msk_cluster_arn is not None

    def matches(self, cluster_doc: Mapping[str, object]) -> bool:
        """Whether a catalog cluster document (``{"type": "msk" | "self_managed", ...}``) names this cluster."""
        if cluster_doc.get("type") == "msk":
            return cluster_doc.get("cluster_arn") == self.msk_cluster_arn
        servers = cluster_doc.get("bootstrap_servers")
        return isinstance(servers, list) and sorted(servers) == sorted(self.bootstrap_servers)


#: What a provisioned Kafka poller costs while it exists, traffic or not (us-east-1, AWS Price List API,
#: checked 2026-11-21 in benchmarks/cost.py): $0.185 an event poller unit hour, about $4.44 a day each.
KAFKA_POLLER_USD_PER_HOUR = 0.185


@dataclass(frozen=True, kw_only=True)
class KafkaSettings:
    """Kafka event-source mappings: the default cluster, the access settings of named ones, error handling.

    By default a mapping polls on demand: it costs nothing while the topic is idle, and Lambda retries a
    failed batch until it succeeds (the ingest function quarantines bad records itself, so only an outage
    holds a partition back; nothing is committed past a record that is neither stored nor quarantined).
    ``provisioned`` keeps ``min_pollers``..``max_pollers`` pollers per mapping instead, which Lambda needs to
    honour ``retry_attempts``, ``max_record_age``, bisection and partial batch responses on Kafka mappings;
    each minimum poller costs ``KAFKA_POLLER_USD_PER_HOUR`` ($0.185 an hour, about $4.44 a day) around the
    clock, traffic or not.
    """

    default_cluster: KafkaClusterConfig | None = None
    clusters: tuple[KafkaClusterConfig, ...] = ()
    provisioned: bool = False
    min_pollers: int = 1
    max_pollers: int = 2
    retry_attempts: int = 3
    max_record_age: Duration = field(default_factory=lambda: Duration.hours(6))

    @property
    def idle_usd_per_day(self) -> float:
        """What one Kafka mapping costs a day with no traffic."""
        return self.min_pollers * KAFKA_POLLER_USD_PER_HOUR * 24 if self.provisioned else 0.0

    def access_for(self, cluster_doc: Mapping[str, object]) -> KafkaClusterConfig | None:
        """The configured access settings of a cluster named in the catalog, if any."""
        return next((c for c in self.clusters if c.matches(cluster_doc)), None)


@dataclass(frozen=True, kw_only=True)
class EmrSettings:
    """The EMR Serverless application: release, capacity ceiling and idle stop."""

    release_label: str = EMR_RELEASE_LABEL
    max_cpu: str = "16 vCPU"
    max_memory: str = "64 GB"
    max_disk: str = "200 GB"
    idle_timeout_minutes: int = 15


@dataclass(frozen=True, kw_only=True)
class EnvironmentConfig:
    """Everything that differs between environments; the constructs read nothing else.

    ``data_read_locations`` and ``data_write_locations`` are ``s3://bucket/prefix/`` locations the Spark
    jobs may read (and write); the job role gets exactly those. ``existing_queue_keys`` maps the ARN of an
    existing queue a watcher names to the ARN of the KMS key that encrypts it, if any;
    ``existing_stream_keys`` the same for an existing Kinesis stream encrypted with a customer managed key.
    """

    name: str
    account: str | None = None
    region: str | None = None
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    #: What Lambda itself logs per invocation (its START, END and REPORT lines are INFO): "WARN" keeps only
    #: its warnings and errors (timeouts, crashes), "INFO" every invocation's lines, about 350 bytes each,
    #: some $0.35 a million messages in CloudWatch Logs (benchmarks/cost.py). Duration and errors stay in
    #: Lambda's metrics either way; the functions' own logs are unaffected (INFO).
    system_log_level: SystemLogLevelName = "WARN"
    powertools_layer_version: int = 37
    # Ingest (SQS and Kafka watchers)
    ingest_timeout: Duration = field(default_factory=lambda: Duration.seconds(30))
    ingest_memory_mb: int = 256
    max_receive_count: int = 5
    queue_retention: Duration = field(default_factory=lambda: Duration.days(4))
    dlq_retention: Duration = field(default_factory=lambda: Duration.days(14))
    existing_queue_keys: Mapping[str, str] = field(default_factory=dict)
    existing_stream_keys: Mapping[str, str] = field(default_factory=dict)
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    # Evaluator (the table's stream)
    evaluator_timeout: Duration = field(default_factory=lambda: Duration.seconds(60))
    evaluator_memory_mb: int = 512
    stream_batch_size: int = 100
    stream_parallelization_factor: int = 1
    stream_retry_attempts: int = 5
    stream_max_record_age: Duration = field(default_factory=lambda: Duration.hours(6))
    #: The listener event types published on the bus (EventBridge bills each entry): any of AssetCreated,
    #: AssetAliasCreated, AssetChanged, AssetEventEmitted, AssetLate. None are published by default.
    listener_events: tuple[str, ...] = ()
    #: Assets whose events spread over several partitions ({uri: n}): one partition key takes at most 1,000
    #: write units a second, so an asset past ~300 events a second needs more (benchmarks/load_model.py).
    event_shards: Mapping[str, int] = field(default_factory=dict)
    # Runs on EMR Serverless
    emr: EmrSettings = field(default_factory=EmrSettings)
    data_read_locations: tuple[str, ...] = ()
    data_write_locations: tuple[str, ...] = ()
    runs_retention: Duration = field(default_factory=lambda: Duration.days(90))
    # Give-ups: failed batches and invocations kept for `assetflow replay-failures` (within the 15-day dedupe
    # window, so that a replay is still recognised), Lambda's retries of asynchronous invocations
    failure_retention: Duration = field(default_factory=lambda: Duration.days(14))
    async_retry_attempts: int = 2
    async_max_event_age: Duration = field(default_factory=lambda: Duration.hours(6))
    # The reconciliation sweep
    reconcile_interval: Duration = field(default_factory=lambda: Duration.minutes(5))
    # Alarms
    alarm_topic_arn: str | None = None
    iterator_age_alarm: Duration = field(default_factory=lambda: Duration.minutes(5))

    def __post_init__(self) -> None:
        for location in (*self.data_read_locations, *self.data_write_locations):
            if not _S3_LOCATION.match(location):
                raise ConfigError(
                    f"{self.name}: data location {location!r} must be s3://bucket/ or s3://bucket/prefix/ "
                    "(no wildcards)"
                )
        if self.system_log_level not in SYSTEM_LOG_LEVELS:
            raise ConfigError(
                f"{self.name}: system_log_level must be one of {', '.join(SYSTEM_LOG_LEVELS)}, "
                f"not {self.system_log_level!r}"
            )
        if self.max_receive_count < 1:
            raise ConfigError(f"{self.name}: max_receive_count must be at least 1")
        if self.failure_retention.to_days() > 14:
            raise ConfigError(
                f"{self.name}: failure_retention must be at most 14 days: a replay must come while the 15-day "
                "dedupe records of what the failed batch did store still exist"
            )
        unknown = sorted(set(self.listener_events) - set(LISTENER_EVENT_TYPES))
        if unknown:
            raise ConfigError(
                f"{self.name}: unknown listener_events {unknown}; known: {', '.join(LISTENER_EVENT_TYPES)}"
            )
        if any(not isinstance(n, int) or n < 1 for n in self.event_shards.values()):
            raise ConfigError(f"{self.name}: event_shards maps asset URIs to shard counts of 1 or more")

    @property
    def destroy_on_delete(self) -> bool:
        """Whether stateful resources go with the stack (development environments)."""
        return self.removal_policy == RemovalPolicy.DESTROY


def split_location(location: str) -> tuple[str, str]:
    """The bucket and key prefix of an ``s3://bucket/prefix/`` location (prefix ``""`` for a whole bucket)."""
    match = _S3_LOCATION.match(location)
    if match is None:
        raise ConfigError(f"not an S3 location: {location!r}")
    return match.group(1), match.group(3) or ""


# Example values: replace the account-specific ARNs and ids with your own before deploying (docs/deploy.md).
DEV = EnvironmentConfig(
    name="dev",
    removal_policy=RemovalPolicy.DESTROY,
    log_retention=logs.RetentionDays.ONE_WEEK,
    system_log_level="INFO",
    max_receive_count=3,
    kafka=KafkaSettings(
        default_cluster=KafkaClusterConfig(
            bootstrap_servers=("kafka-1.dev.example.internal:9096", "kafka-2.dev.example.internal:9096"),
            secret_arn="arn:aws:secretsmanager:eu-west-1:111122223333:secret:assetflow/dev/kafka-AbCdEf",  # noqa: S106 (an ARN, not a secret)
            vpc=KafkaVpcAccess(
                vpc_id="vpc-0123456789abcdef0",
                availability_zones=("eu-west-1a", "eu-west-1b"),
                subnet_ids=("subnet-0123456789abcdef0", "subnet-0fedcba9876543210"),
                security_group_id="sg-0123456789abcdef0",
            ),
        ),
        min_pollers=1,
        max_pollers=1,
    ),
    stream_retry_attempts=3,
    stream_max_record_age=Duration.hours(1),
    listener_events=("AssetCreated", "AssetAliasCreated"),
    emr=EmrSettings(max_cpu="8 vCPU", max_memory="32 GB", max_disk="100 GB", idle_timeout_minutes=5),
    data_read_locations=("s3://assetflow-demo/",),
    data_write_locations=("s3://assetflow-demo/",),
    runs_retention=Duration.days(14),
    iterator_age_alarm=Duration.minutes(15),
)

PROD = EnvironmentConfig(
    name="prod",
    removal_policy=RemovalPolicy.RETAIN,
    log_retention=logs.RetentionDays.THREE_MONTHS,
    max_receive_count=5,
    kafka=KafkaSettings(
        default_cluster=KafkaClusterConfig(
            msk_cluster_arn=(
                "arn:aws:kafka:eu-west-1:111122223333:cluster/assetflow-prod/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b-7"
            ),
        ),
        min_pollers=1,
        max_pollers=4,
    ),
    stream_parallelization_factor=2,
    listener_events=("AssetCreated", "AssetAliasCreated"),
    emr=EmrSettings(max_cpu="64 vCPU", max_memory="256 GB", max_disk="1000 GB", idle_timeout_minutes=15),
    data_read_locations=(
        "s3://assetflow-demo/landing/",
        "s3://assetflow-demo/curated/",
        "s3://assetflow-demo/iot/",
    ),
    data_write_locations=(
        "s3://assetflow-demo/curated/",
        "s3://assetflow-demo/iot/",
        "s3://assetflow-demo/reports/",
        "s3://assetflow-demo/audit/",
        "s3://assetflow-demo/exports/",
    ),
    runs_retention=Duration.days(400),
    alarm_topic_arn="arn:aws:sns:eu-west-1:111122223333:assetflow-prod-alarms",
    iterator_age_alarm=Duration.minutes(5),
)

ENVIRONMENTS: Mapping[str, EnvironmentConfig] = {c.name: c for c in (DEV, PROD)}


def config_for(name: str) -> EnvironmentConfig:
    """The configuration of a named environment.

    Raises:
        ConfigError: no environment has that name.
    """
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise ConfigError(
            f"unknown environment {name!r}; pass -c env=<name> with one of: {', '.join(sorted(ENVIRONMENTS))}"
        ) from None
