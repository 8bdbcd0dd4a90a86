"""Ingest: one function per watcher, fed by its SQS queue, Kafka topic, EventBridge rule or Kinesis stream."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from assetflow.adapters.extras import EXTRAS_PREFIX
from assetflow.cdk.config import ConfigError, EnvironmentConfig, KafkaClusterConfig
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.grants import KEY_WRITE_ACTIONS
from assetflow.cdk.nag import acknowledge, acknowledge_dlq_sender, wildcard_resource
from assetflow.cdk.queues import dead_letter_queue, watched_queue
from assetflow.core.catalog import Catalog
from assetflow.core.watchers import EventBridgePattern, KafkaTopic, KinesisStream, S3ObjectCreated, SqsQueue

SQS_HANDLER = "assetflow.functions.handle_sqs_messages"
KAFKA_HANDLER = "assetflow.functions.handle_kafka_records"
KINESIS_HANDLER = "assetflow.functions.handle_kinesis_records"
NOTIFICATIONS_HANDLER = "assetflow.functions.handle_bucket_notifications"
#: How long, and how many times, EventBridge retries delivering to a watcher's queue (its own defaults); then
#: the event goes to the watcher's DLQ.
RULE_RETRY_ATTEMPTS = 185
RULE_MAX_EVENT_AGE = Duration.hours(24)
#: AWS's guidance for SQS event sources: visibility timeout at least six times the function timeout.
VISIBILITY_TIMEOUT_FACTOR = 6
_MSK_CLUSTER_ARN = re.compile(r"^(arn:[^:]+:kafka:[^:]+:\d{12}):cluster/([^/]+)/([^/]+)$")
# Actions Lambda's Kafka pollers use to reach a cluster's brokers through elastic network interfaces.
_ENI_DESCRIBE_ACTIONS = (
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)


@dataclass(frozen=True)
class WatcherIngest:
    """What one watcher's ingest is made of, for grants, alarms and stack outputs."""

    watcher: str
    kind: str
    function: ServiceFunction
    queue: sqs.IQueue | None
    dlq: sqs.Queue | None
    #: The EventBridge rule of an S3 or EventBridge watcher.
    rule: events.CfnRule | None = None
    #: The stream of a Kinesis watcher.
    stream: kinesis.IStream | None = None


class Ingest(Construct):
    """Every watcher of the catalog: a queue with its DLQ (or an existing queue), or a Kafka mapping.

    Content filters and schemas are applied by the functions, which quarantine what fails them: an
    event-source filter would drop such messages silently, so none is set here. With ``extras_bucket`` (the
    runs bucket, which the functions know as RUNS_BUCKET) each function may store large extras by reference.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalog: Catalog,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        key: kms.IKey,
        service: str,
        extras_bucket: s3.IBucket | None = None,
        kafka_failures: lambda_.IEventSourceDlq | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._kafka_failures = kafka_failures
        self._config = config
        self._defaults = defaults
        self._key = key
        self._service = service
        self._extras_bucket = extras_bucket
        self._rules_use_key = False
        self.watchers: list[WatcherIngest] = []
        #: The buckets S3 watchers watch, whose EventBridge notifications the stack turns on.
        self.watched_buckets: set[str] = set()
        self.bucket_notifications: ServiceFunction | None = None
        for name, (watcher, _asset) in catalog.watchers.items():
            holder = Construct(self, f"Watcher{watcher_id(name, catalog)}")
            if isinstance(watcher.source, SqsQueue):
                self.watchers.append(self._sqs(holder, name, watcher.source))
            elif isinstance(watcher.source, KafkaTopic):
                self.watchers.append(self._kafka(holder, name, watcher.source))
            elif isinstance(watcher.source, S3ObjectCreated | EventBridgePattern):
                self.watchers.append(self._rule_fed(holder, name, watcher.source))
            else:
                self.watchers.append(self._kinesis(holder, name, watcher.source))
        if self.watched_buckets:
            self._turn_on_bucket_notifications(sorted(self.watched_buckets))

    def _function(self, scope: Construct, name: str, handler: str, kind: str) -> ServiceFunction:
        ingest = ServiceFunction(
            scope,
            "Ingest",
            defaults=self._defaults,
            handler_module=handler,
            description=f"assetflow ingest of watcher {name} ({kind})",
            service=self._service,
            timeout=self._config.ingest_timeout,
            memory_mb=self._config.ingest_memory_mb,
            environment={"WATCHER_NAME": name},
        )
        if self._extras_bucket is not None:
            grant_extras_writes(self._extras_bucket, ingest)
        return ingest

    def _sqs(self, scope: Construct, name: str, source: SqsQueue) -> WatcherIngest:
        config = self._config
        ingest = self._function(scope, name, SQS_HANDLER, "sqs")
        dlq: sqs.Queue | None = None
        queue: sqs.IQueue
        if source.arn is not None:
            key_arn = config.existing_queue_keys.get(source.arn)
            queue = sqs.Queue.from_queue_attributes(
                scope,
                "ExistingQueue",
                queue_arn=source.arn,
                key_arn=key_arn,
                fifo=bool(source.fifo),
            )
        else:
            queue, dlq = self._own_queue(
                scope, fifo=bool(source.fifo), window_seconds=source.max_batching_window_seconds
            )
        _read_queue(ingest, queue, source.batch_size, source.max_batching_window_seconds)
        return WatcherIngest(watcher=name, kind="sqs", function=ingest, queue=queue, dlq=dlq)

    def _own_queue(
        self, scope: Construct, *, fifo: bool = False, window_seconds: int = 0
    ) -> tuple[sqs.Queue, sqs.Queue]:
        """A queue the stack makes for a watcher, with its DLQ: encrypted, redriven after the receive count.

        Its visibility timeout outlasts the ingest function's timeout and the mapping's batching window.
        """
        config = self._config
        dlq = dead_letter_queue(
            scope,
            "DeadLetters",
            key=self._key,
            retention=config.dlq_retention,
            removal_policy=config.removal_policy,
            fifo=fifo,
        )
        visibility = config.ingest_timeout.to_seconds() * VISIBILITY_TIMEOUT_FACTOR
        queue = watched_queue(
            scope,
            "Queue",
            key=self._key,
            dlq=dlq,
            max_receive_count=config.max_receive_count,
            visibility_timeout=Duration.seconds(visibility + window_seconds),
            retention=config.queue_retention,
            removal_policy=config.removal_policy,
            fifo=fifo,
        )
        return queue, dlq

    def _rule_fed(
        self, scope: Construct, name: str, source: S3ObjectCreated | EventBridgePattern
    ) -> WatcherIngest:
        """An EventBridge rule (the source's pattern) feeding a queue of the watcher's, read by the SQS ingest.

        The queue buffers what EventBridge delivers (at least once) so that ingest gets batches, partial
        batch failures and retries; what keeps failing, and what EventBridge cannot deliver to the queue after
        its retries, goes to the watcher's DLQ, both as the EventBridge event itself (one replay path).
        """
        kind = "s3" if isinstance(source, S3ObjectCreated) else "eventbridge"
        ingest = self._function(scope, name, SQS_HANDLER, kind)
        queue, dlq = self._own_queue(scope)
        bus = "default"
        if isinstance(source, S3ObjectCreated):
            # S3 sends every event of the bucket to the account's default bus; the rule picks this watcher's.
            self.watched_buckets.add(source.bucket)
        else:
            bus = source.bus  # a name or an ARN: EventBusName takes both
        rule = events.CfnRule(
            scope,
            "Rule",
            description=f"assetflow watcher {name} ({kind})",
            event_bus_name=bus,
            event_pattern=source.event_pattern(),
            state="ENABLED",
            targets=[
                events.CfnRule.TargetProperty(
                    id="IngestQueue",
                    arn=queue.queue_arn,
                    dead_letter_config=events.CfnRule.DeadLetterConfigProperty(arn=dlq.queue_arn),
                    retry_policy=events.CfnRule.RetryPolicyProperty(
                        maximum_event_age_in_seconds=int(RULE_MAX_EVENT_AGE.to_seconds()),
                        maximum_retry_attempts=RULE_RETRY_ATTEMPTS,
                    ),
                )
            ],
        )
        # EventBridge may send to the queue and to its DLQ for this rule only, and use the key to do it.
        for target in (queue, dlq):
            target.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="RuleDelivers",
                    principals=[iam.ServicePrincipal("events.amazonaws.com")],
                    actions=["sqs:SendMessage"],
                    resources=[target.queue_arn],
                    conditions={"ArnEquals": {"aws:SourceArn": rule.attr_arn}},
                )
            )
        self._let_rules_use_key()
        _read_queue(ingest, queue, source.batch_size)
        return WatcherIngest(watcher=name, kind=kind, function=ingest, queue=queue, dlq=dlq, rule=rule)

    def _turn_on_bucket_notifications(self, buckets: Sequence[str]) -> None:
        """Turn the watched buckets' EventBridge notifications on, keeping their other notifications.

        A custom resource served by a function of the stack's own (with this stack's defaults).

        CDK's ``enable_event_bridge_notification`` on an imported bucket deploys its own handler with an AWS
        managed policy and no log retention; this one gets the two S3 actions on these buckets only.
        """
        handler = ServiceFunction(
            self,
            "BucketNotifications",
            defaults=self._defaults,
            handler_module=NOTIFICATIONS_HANDLER,
            description="assetflow: turns on the EventBridge notifications of the buckets S3 watchers watch",
            service="assetflow-bucket-notifications",
            timeout=Duration.seconds(60),
        )
        stack = Stack.of(self)
        handler.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="TurnOnEventBridgeNotifications",
                actions=["s3:GetBucketNotification", "s3:PutBucketNotification"],
                resources=[
                    stack.format_arn(service="s3", region="", account="", resource=b) for b in buckets
                ],
            )
        )
        CustomResource(
            self,
            "WatchedBucketNotifications",
            service_token=handler.function.function_arn,
            resource_type="Custom::EventBridgeNotifications",
            properties={"Buckets": list(buckets)},
        )
        self.bucket_notifications = handler

    def _let_rules_use_key(self) -> None:
        """Let this account's EventBridge rules encrypt what they send to the watchers' queues (once per stack).

        The condition names the account's rules, not each rule: a rule's ARN in the key's policy would make a
        cycle (the key, the queue it encrypts, the rule that targets the queue).
        """
        if self._rules_use_key:
            return
        self._rules_use_key = True
        stack = Stack.of(self)
        self._key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesDeliverToWatcherQueues",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="events", resource="rule", resource_name="*"
                        )
                    },
                },
            )
        )

    def _kinesis(self, scope: Construct, name: str, source: KinesisStream) -> WatcherIngest:
        """A Kinesis mapping with bisection, retries, a maximum record age and the failures bucket, as Kafka's."""
        config = self._config
        ingest = self._function(scope, name, KINESIS_HANDLER, "kinesis")
        stream: kinesis.IStream
        if source.arn is not None:
            key_arn = config.existing_stream_keys.get(source.arn)
            # A stream encrypted with a customer managed key: reading it needs kms:Decrypt on that key, which
            # the mapping grants when the stream names its key.
            stream = kinesis.Stream.from_stream_attributes(
                scope,
                "ExistingStream",
                stream_arn=source.arn,
                encryption_key=kms.Key.from_key_arn(scope, "ExistingStreamKey", key_arn) if key_arn else None,
            )
        else:
            stream = kinesis.Stream(
                scope,
                "Stream",
                encryption=kinesis.StreamEncryption.KMS,
                encryption_key=self._key,
                stream_mode=kinesis.StreamMode.ON_DEMAND,
                removal_policy=config.removal_policy,
            )
            acknowledge(
                stream,
                "AwsSolutions-KDS3",
                "The stream is encrypted with the stack's customer managed key (rotated), not the aws/kinesis key.",
            )
        dlq: sqs.Queue | None = None
        on_failure: lambda_.IEventSourceDlq
        if self._kafka_failures is not None:
            on_failure = self._kafka_failures
        else:
            dlq = dead_letter_queue(
                scope,
                "DeadLetters",
                key=self._key,
                retention=config.dlq_retention,
                removal_policy=config.removal_policy,
            )
            on_failure = sources.SqsDlq(dlq)
        ingest.function.add_event_source(
            sources.KinesisEventSource(
                stream,
                starting_position=lambda_.StartingPosition[source.starting_position],
                batch_size=source.batch_size,
                max_batching_window=(
                    Duration.seconds(source.max_batching_window_seconds)
                    if source.max_batching_window_seconds
                    else None
                ),
                bisect_batch_on_error=True,
                retry_attempts=config.stream_retry_attempts,
                max_record_age=config.stream_max_record_age,
                report_batch_item_failures=True,
                on_failure=on_failure,
                # OnFailureDestinationDeliveredEventCount, which the failed-batches alarm watches.
                metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            )
        )
        if dlq is not None:
            acknowledge_dlq_sender(ingest)
        return WatcherIngest(
            watcher=name, kind="kinesis", function=ingest, queue=None, dlq=dlq, stream=stream
        )

    def _cluster(self, name: str, source: KafkaTopic) -> KafkaClusterConfig:
        kafka = self._config.kafka
        if source.cluster is None:
            if kafka.default_cluster is None:
                raise ConfigError(
                    f"watcher {name!r} reads Kafka topic {source.topic!r} from the environment's default cluster "
                    f"(cluster=None), but environment {self._config.name!r} has no default Kafka cluster: set "
                    "kafka=KafkaSettings(default_cluster=...) in assetflow/cdk/config.py or give the watcher a cluster"
                )
            return kafka.default_cluster
        cluster_doc = source.cluster.to_json()
        access = kafka.access_for(cluster_doc)
        if access is not None:
            return access
        if cluster_doc["type"] == "msk":
            return KafkaClusterConfig(msk_cluster_arn=cluster_doc["cluster_arn"])
        raise ConfigError(
            f"watcher {name!r} reads Kafka topic {source.topic!r} from self-managed brokers "
            f"{cluster_doc['bootstrap_servers']}, but environment {self._config.name!r} has no access settings for "
            "them: add a KafkaClusterConfig with those bootstrap_servers and a secret_arn or vpc to kafka.clusters"
        )

    def _kafka(self, scope: Construct, name: str, source: KafkaTopic) -> WatcherIngest:
        config = self._config
        cluster = self._cluster(name, source)
        ingest = self._function(scope, name, KAFKA_HANDLER, "kafka")
        # A batch that keeps failing goes, records and all, to the failures bucket (an SQS destination would get
        # its offsets only); without one, an SQS queue of its own (the offsets, to read back from the topic).
        dlq: sqs.Queue | None = None
        on_failure: lambda_.IEventSourceDlq
        if self._kafka_failures is not None:
            on_failure = self._kafka_failures
        else:
            dlq = dead_letter_queue(
                scope,
                "DeadLetters",
                key=self._key,
                retention=config.dlq_retention,
                removal_policy=config.removal_policy,
            )
            on_failure = sources.SqsDlq(dlq)
        # Lambda's default group id is the mapping's UUID, unknown here; a fixed one lets IAM name the group.
        group_id = source.consumer_group_id or f"{Stack.of(self).stack_name}.{name}"
        secret = (
            secretsmanager.Secret.from_secret_complete_arn(scope, "KafkaSecret", cluster.secret_arn)
            if cluster.secret_arn
            else None
        )
        common: dict[str, Any] = {
            "topic": source.topic,
            "starting_position": lambda_.StartingPosition[source.starting_position],
            "batch_size": source.batch_size,
            "consumer_group_id": group_id,
            "secret": secret,
            "on_failure": on_failure,
            "metrics_config": lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
        }
        if config.kafka.provisioned:
            # Lambda applies these error-handling settings to Kafka mappings only in provisioned mode, whose
            # minimum pollers are billed around the clock (KafkaSettings); on demand, a failed batch is retried
            # until it succeeds and an idle topic costs nothing.
            common |= {
                "bisect_batch_on_error": True,
                "retry_attempts": config.kafka.retry_attempts,
                "max_record_age": config.kafka.max_record_age,
                "report_batch_item_failures": True,
                "provisioned_poller_config": sources.ProvisionedPollerConfig(
                    minimum_pollers=config.kafka.min_pollers, maximum_pollers=config.kafka.max_pollers
                ),
            }
        if cluster.msk_cluster_arn is not None:
            event_source: lambda_.IEventSource = sources.ManagedKafkaEventSource(
                cluster_arn=cluster.msk_cluster_arn, **common
            )
            if secret is None:
                self._grant_msk_iam_access(ingest.role, cluster.msk_cluster_arn, source.topic, group_id)
            self._grant_msk_trigger(ingest, cluster.msk_cluster_arn)
        else:
            event_source = sources.SelfManagedKafkaEventSource(
                bootstrap_servers=list(cluster.bootstrap_servers),
                authentication_method=sources.AuthenticationMethod[cluster.authentication],
                root_ca_certificate=(
                    secretsmanager.Secret.from_secret_complete_arn(
                        scope, "KafkaRootCa", cluster.root_ca_secret_arn
                    )
                    if cluster.root_ca_secret_arn
                    else None
                ),
                **self._vpc_access(scope, ingest, cluster),
                **common,
            )
        ingest.function.add_event_source(event_source)
        if dlq is not None:
            acknowledge_dlq_sender(ingest)
        return WatcherIngest(watcher=name, kind="kafka", function=ingest, queue=None, dlq=dlq)

    def _vpc_access(
        self, scope: Construct, ingest: ServiceFunction, cluster: KafkaClusterConfig
    ) -> dict[str, Any]:
        """The VPC settings of a self-managed Kafka mapping (none for brokers reached over the internet)."""
        if cluster.vpc is None:
            return {}
        access = cluster.vpc
        vpc = ec2.Vpc.from_vpc_attributes(
            scope, "KafkaVpc", vpc_id=access.vpc_id, availability_zones=list(access.availability_zones)
        )
        subnets = [
            ec2.Subnet.from_subnet_attributes(scope, f"KafkaSubnet{i}", subnet_id=sid, availability_zone=az)
            for i, (sid, az) in enumerate(zip(access.subnet_ids, access.availability_zones, strict=True))
        ]
        for subnet in subnets:
            acknowledge(
                subnet,
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "Only the subnet id is passed to the Kafka mapping; its route table is never read.",
            )
        stack = Stack.of(scope)
        self._grant_network_interfaces(
            ingest,
            subnet_arns=[
                stack.format_arn(service="ec2", resource=f"subnet/{sid}") for sid in access.subnet_ids
            ],
            security_group_arns=[
                stack.format_arn(service="ec2", resource=f"security-group/{access.security_group_id}")
            ],
        )
        return {
            "vpc": vpc,
            "vpc_subnets": ec2.SubnetSelection(subnets=subnets),
            "security_group": ec2.SecurityGroup.from_security_group_id(
                scope, "KafkaSecurityGroup", access.security_group_id, mutable=False
            ),
        }

    @staticmethod
    def _grant_msk_iam_access(role: iam.IRole, cluster_arn: str, topic: str, group_id: str) -> None:
        match = _MSK_CLUSTER_ARN.match(cluster_arn)
        if match is None:
            raise ConfigError(f"not an MSK cluster ARN: {cluster_arn!r}")
        prefix, cluster_name, cluster_uuid = match.groups()
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ConnectToCluster",
                actions=["kafka-cluster:Connect", "kafka-cluster:DescribeClusterDynamicConfiguration"],
                resources=[cluster_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadWatchedTopic",
                actions=["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"],
                resources=[f"{prefix}:topic/{cluster_name}/{cluster_uuid}/{topic}"],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="JoinConsumerGroup",
                actions=["kafka-cluster:DescribeGroup", "kafka-cluster:AlterGroup"],
                resources=[f"{prefix}:group/{cluster_name}/{cluster_uuid}/{group_id}"],
            )
        )

    @classmethod
    def _grant_msk_trigger(cls, ingest: ServiceFunction, cluster_arn: str) -> None:
        """What Lambda's MSK trigger needs, scoped: cluster discovery on the cluster, the pollers' interfaces.

        ManagedKafkaEventSource attaches AWSLambdaMSKExecutionRole (every action on '*') when it binds; the
        template drops it (a deletion override, which applies at synthesis whatever the order) and this grants
        its actions instead. The MSK cluster's subnets and security groups are not in the configuration, so
        the interfaces are granted on the account's subnets and security groups of this region (still not
        '*'). Logs go to the function's own log group, which ``ServiceFunction`` already grants.

        Raises:
            TypeError: the function's role is not one this stack defines.
        """
        role = ingest.role.node.default_child
        if not isinstance(role, iam.CfnRole):
            raise TypeError(f"ingest role {ingest.role.node.path} is not a CfnRole")
        role.add_property_deletion_override("ManagedPolicyArns")
        acknowledge(
            ingest,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSLambdaMSKExecutionRole]",
            "ManagedKafkaEventSource attaches AWS's policy for MSK triggers; the template drops it and grants its "
            "actions on the cluster, the account's interfaces and the function's log group.",
        )
        stack = Stack.of(ingest.role)
        ingest.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DiscoverMskCluster",
                actions=["kafka:DescribeCluster", "kafka:DescribeClusterV2", "kafka:GetBootstrapBrokers"],
                resources=[cluster_arn],
            )
        )
        cls._grant_network_interfaces(
            ingest,
            subnet_arns=[stack.format_arn(service="ec2", resource="subnet", resource_name="*")],
            security_group_arns=[
                stack.format_arn(service="ec2", resource="security-group", resource_name="*")
            ],
        )
        for kind in ("subnet", "security-group"):
            acknowledge(
                ingest,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:{kind}/*]",
                "The MSK cluster's subnets and security groups are not in the configuration; the trigger's "
                "interfaces may use any of this account's in the region.",
            )

    @staticmethod
    def _grant_network_interfaces(
        ingest: ServiceFunction, *, subnet_arns: Sequence[str], security_group_arns: Sequence[str]
    ) -> None:
        """Let the Kafka pollers create and delete their network interfaces in these subnets and groups."""
        role = ingest.role
        stack = Stack.of(role)

        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DescribeKafkaNetwork",
                actions=list(_ENI_DESCRIBE_ACTIONS),
                # EC2's Describe* actions support no resource-level permissions.
                resources=["*"],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ManagePollerInterfaces",
                actions=["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"],
                resources=[
                    stack.format_arn(service="ec2", resource="network-interface", resource_name="*"),
                    *subnet_arns,
                    *security_group_arns,
                ],
            )
        )
        acknowledge(
            ingest,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:"
            "network-interface/*]",
            "Lambda's Kafka pollers create and delete their own network interfaces, whose ids are not known "
            "in advance; creation is also limited to the granted subnets and security groups.",
        )
        acknowledge(
            ingest,
            "AwsSolutions-IAM5[Resource::*]",
            "Besides X-Ray, the pollers' ec2:Describe* calls (network interfaces, VPCs, subnets, security groups) "
            "support no resource-level permissions.",
        )


def _read_queue(ingest: ServiceFunction, queue: sqs.IQueue, batch_size: int, window_seconds: int = 0) -> None:
    """The ingest function's SQS mapping on a watcher's queue, reporting partial batch failures."""
    ingest.function.add_event_source(
        sources.SqsEventSource(
            queue,
            batch_size=batch_size,
            max_batching_window=Duration.seconds(window_seconds) if window_seconds else None,
            report_batch_item_failures=True,
        )
    )


def grant_extras_writes(bucket: s3.IBucket, function: ServiceFunction) -> None:
    """Let ``function`` store extras by reference: put objects under ``extras/`` of ``bucket``, with its key."""
    iam.Grant.add_to_principal(
        grantee=function.role,
        actions=["s3:PutObject"],
        resource_arns=[bucket.arn_for_objects(f"{EXTRAS_PREFIX}*")],
    )
    if bucket.encryption_key is not None:
        bucket.encryption_key.grant(function.role, *KEY_WRITE_ACTIONS)
    acknowledge(
        function,
        wildcard_resource(bucket, f"/{EXTRAS_PREFIX}*"),
        "Large extras are stored under extras/<event id>/<sha256>.json; the keys are made per message.",
    )


def watcher_id(name: str, catalog: Catalog) -> str:
    """``sensor-readings`` → ``SensorReadings``: the watcher's part of construct ids and output keys.

    Raises:
        ConfigError: two watcher names give the same id (they differ only in punctuation or case).
    """
    ident = _pascal(name)
    clashes = sorted(other for other in catalog.watchers if other != name and _pascal(other) == ident)
    if clashes:
        raise ConfigError(
            f"watchers {name!r} and {clashes[0]!r} differ only in punctuation or case; rename one so their "
            "stack resources and outputs can be told apart"
        )
    return ident


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)
