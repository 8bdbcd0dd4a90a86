"""``AssetflowService``: every capability of assetflow in one construct, wired and granted where they meet."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from assetflow.adapters.extras import EXTRAS_PREFIX
from assetflow.cdk import table_access
from assetflow.cdk.alarms import QUARANTINE_NAMESPACE, Alarms
from assetflow.cdk.api import OperatorApi
from assetflow.cdk.bundle import (
    CATALOG_FILE,
    LambdaBundle,
    build_job_code,
    build_lambda_bundle,
    default_build_dir,
)
from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.dashboard import ServiceDashboard
from assetflow.cdk.evaluator import Evaluator
from assetflow.cdk.event_store import EventStore
from assetflow.cdk.failures import FailureStore, keep_async_failures
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction, powertools_layer_arn
from assetflow.cdk.grants import grant_objects
from assetflow.cdk.ingest import Ingest, WatcherIngest, grant_extras_writes, watcher_id
from assetflow.cdk.nag import acknowledge, wildcard_resource
from assetflow.cdk.reconcile import Reconciliation
from assetflow.cdk.runs import CODE_PREFIX, RUNS_PREFIX, RunsBucket, RunStateRule, SparkApplication
from assetflow.cdk.schedules import TimeSchedules
from assetflow.cdk.table_access import grant_table_access
from assetflow.core.catalog import Catalog
from assetflow.core.conditions import Asset
from assetflow.core.scheduler import routes_on_content

#: Where Lambda unpacks the code asset.
LAMBDA_TASK_ROOT = "/var/task"
INGEST_SERVICE = "assetflow-ingest"
RECONCILE_SERVICE = "assetflow-reconcile"


class AssetflowService(Construct):
    """The whole service for one environment, generated from a compiled catalog.

    For teams with their own CDK app: ``AssetflowService(stack, "Assetflow", catalog=load_catalog(...),
    config=EnvironmentConfig(...), project_root=Path(...))``. ``project_root`` holds the jobs' entry points
    (paths in the catalog are relative to it). The functions' third-party dependencies are pip-installed
    into the code asset once (cached under ``build_dir``); ``vendor_dependencies=False`` skips that for an
    offline synth (an earlier vendoring's cache is still used), which cannot be deployed.

    Raises:
        ConfigError: the catalog needs something the environment does not configure (a Kafka cluster).
        BundleError: the code assets cannot be assembled.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalog: Catalog,
        config: EnvironmentConfig,
        project_root: Path,
        build_dir: Path | None = None,
        vendor_dependencies: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        # Teams embedding the service may lack this cdk.json flag; without it the access-log bucket would need
        # ACLs, which S3 turns off on new buckets. Context set here applies to this subtree only.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self.catalog = catalog
        self.config = config
        build = build_dir or default_build_dir(project_root)
        # Job code first: a missing entry point fails before anything is vendored or written.
        job_code = build_job_code(
            project_root, [p.job.entry_point for p in catalog.pipelines.values()], build_dir=build
        )
        bundle = build_lambda_bundle(catalog.to_document(), build_dir=build, vendor=vendor_dependencies)

        self._stores(job_code)
        self._functions(self._function_defaults(bundle))
        self._grant()
        self._alarm()
        self.dashboard = ServiceDashboard(self, "Dashboard", service=self)
        if not bundle.vendored:
            Annotations.of(self).add_warning_v2(
                "assetflow:unvendoredDependencies",
                "The Lambda code asset has no third-party dependencies (croniter, jsonschema): fine for synth and "
                "tests, broken on AWS. Synthesise without `-c vendor=false` to deploy (see docs/deploy.md).",
            )

    def _stores(self, job_code: Path | None) -> None:
        """The key, the table, the listener bus, the runs bucket and the Spark application."""
        self.key = kms.Key(
            self,
            "DataKey",
            description="Encrypts assetflow's table, queues and runs bucket",
            enable_key_rotation=True,
            removal_policy=self.config.removal_policy,
            pending_window=Duration.days(7),
        )
        self.event_store = EventStore(
            self, "EventStore", key=self.key, removal_policy=self.config.removal_policy
        )
        self.event_bus = events.EventBus(
            self,
            "ListenerBus",
            description="assetflow listener events: asset created, alias created, asset changed, event emitted",
        )
        self.runs = RunsBucket(self, "Runs", key=self.key, config=self.config)
        self.failures = FailureStore(
            self, "Failures", key=self.key, config=self.config, access_logs=self.runs.access_logs
        )
        self.spark = SparkApplication(
            self,
            "Spark",
            config=self.config,
            runs=self.runs,
            table=self.event_store.table,
            job_code=job_code,
            inlet_uris=declared_inlets(self.catalog),
        )

    def _function_defaults(self, bundle: LambdaBundle) -> FunctionDefaults:
        """What every function shares: the code asset, the Powertools layer, the environment, the logs."""
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", powertools_layer_arn(self, self.config.powertools_layer_version)
        )
        return FunctionDefaults(
            code=lambda_.Code.from_asset(str(bundle.path)),
            layers=[layer],
            environment={
                "ASSETFLOW_ENV": self.config.name,
                "TABLE_NAME": self.event_store.table.table_name,
                "EVENT_BUS_NAME": self.event_bus.event_bus_name,
                "RUNS_BUCKET": self.runs.bucket.bucket_name,
                "CODE_PREFIX": CODE_PREFIX,
                "EMR_APPLICATION_ID": self.spark.application.attr_application_id,
                "EMR_JOB_ROLE_ARN": self.spark.job_role.role_arn,
                "RUN_TOKEN_KEY": self.spark.run_token_key.key_arn,
                "CATALOG_PATH": f"{LAMBDA_TASK_ROOT}/{CATALOG_FILE}",
                "POWERTOOLS_METRICS_NAMESPACE": QUARANTINE_NAMESPACE,
                "LISTENER_EVENTS": ",".join(self.config.listener_events),
                **(
                    {"ASSETFLOW_EVENT_SHARDS": json.dumps(dict(self.config.event_shards), sort_keys=True)}
                    if self.config.event_shards
                    else {}
                ),
            },
            log_retention=self.config.log_retention,
            removal_policy=self.config.removal_policy,
            system_log_level=self.config.system_log_level,
        )

    def _functions(self, defaults: FunctionDefaults) -> None:
        """Ingest per watcher, the evaluator, the run-state rule, the time schedules and the API."""
        # The functions' Powertools service names (their Logger/Metrics use the same ones); the quarantine
        # alarm's metric carries the ingest one as its only dimension.
        self.ingest_service_name = INGEST_SERVICE
        self.ingest = Ingest(
            self,
            "Ingest",
            catalog=self.catalog,
            config=self.config,
            defaults=defaults,
            key=self.key,
            service=self.ingest_service_name,
            extras_bucket=self.runs.bucket,
            kafka_failures=self.failures.for_mapping(),
        )
        self.evaluator = Evaluator(
            self,
            "Evaluator",
            table=self.event_store.table,
            config=self.config,
            defaults=defaults,
            service="assetflow-evaluator",
            on_failure=self.failures.for_mapping(),
        )
        self.run_state = RunStateRule(
            self,
            "RunState",
            application_id=self.spark.application.attr_application_id,
            config=self.config,
            defaults=defaults,
            key=self.key,
            service="assetflow-run-state",
        )
        self.schedules = TimeSchedules(
            self,
            "Schedules",
            catalog=self.catalog,
            config=self.config,
            defaults=defaults,
            key=self.key,
            service="assetflow-schedule-tick",
        )
        # Job state changes and ticks come asynchronously: after Lambda's retries they go to the queues that
        # EventBridge and Scheduler already dead-letter into, with the event.
        keep_async_failures(self.run_state.handler, self.run_state.dlq, config=self.config)
        keep_async_failures(self.schedules.handler, self.schedules.dlq, config=self.config)
        self.reconciliation = Reconciliation(
            self,
            "Reconciliation",
            config=self.config,
            defaults=defaults,
            key=self.key,
            service=RECONCILE_SERVICE,
        )
        self.api = OperatorApi(
            self,
            "Api",
            config=self.config,
            defaults=defaults,
            service="assetflow-api",
            extras_bucket=self.runs.bucket,
        )

    @property
    def functions(self) -> list[ServiceFunction]:
        """Every function of the service."""
        return [
            *(w.function for w in self.ingest.watchers),
            self.evaluator.handler,
            self.run_state.handler,
            self.schedules.handler,
            self.reconciliation.handler,
            self.api.handler,
        ]

    def watcher_output_id(self, watcher: str) -> str:
        """The stable identifier of a watcher in construct ids and stack output keys."""
        return watcher_id(watcher, self.catalog)

    def _grant(self) -> None:
        table = self.event_store.table
        # Each function only the table actions and partitions it uses (assetflow/cdk/table_access.py).
        for ingest in self.ingest.watchers:
            grant_table_access(table, ingest.function.role, self._ingest_access(ingest))
        for function, access in (
            (self.evaluator.handler, table_access.EVALUATOR),
            (self.run_state.handler, table_access.RUN_STATE),
            (self.schedules.handler, table_access.TICK),
            (self.reconciliation.handler, table_access.RECONCILE),
            (self.api.handler, table_access.API),
        ):
            grant_table_access(table, function.role, access)
        # Listener events come from the evaluator (asset and alias events) and run state (outlets) only, from
        # the sweep when it finishes a run whose state change was lost, and from the tick function (AssetLate).
        for function in (
            self.evaluator.handler,
            self.run_state.handler,
            self.reconciliation.handler,
            self.schedules.handler,
        ):
            self.event_bus.grant_put_events_to(function.role)
        # Runs start from the evaluator, from run state (a pipeline held at max_active_runs), from ticks and from
        # the sweep; the API too: manual, replayed and backfilled runs, cancels (CancelJobRun), unpause.
        starters = (
            self.evaluator.handler,
            self.run_state.handler,
            self.schedules.handler,
            self.reconciliation.handler,
            self.api.handler,
        )
        for function in starters:
            self._grant_start_runs(function.role)
        # Whatever evaluates queues may need a one-shot re-evaluation at a debounce or max-wait deadline.
        self.schedules.grant_wake_ups(*starters)
        # The sweep counts each SQS watcher's dead letters (what ingest gave up on) for `assetflow reconcile`.
        dead_letters = {
            w.watcher: {"queue_arn": w.queue.queue_arn, "dlq_url": w.dlq.queue_url}
            for w in self.ingest.watchers
            if w.queue is not None and w.dlq is not None
        }
        if dead_letters:
            self.reconciliation.handler.function.add_environment(
                "WATCHER_DEAD_LETTERS", Stack.of(self).to_json_string(dead_letters)
            )
            for w in self.ingest.watchers:
                if w.dlq is not None:
                    w.dlq.grant(self.reconciliation.handler.role, "sqs:GetQueueAttributes")
        # A successful run's outlet extras over the inline limit are kept by reference, as ingest's are.
        for function in (self.run_state.handler, self.reconciliation.handler):
            grant_extras_writes(self.runs.bucket, function)
        # Routing on content (a.where(...), key=) reads a large extra back; so does explain re-checking skips.
        if any(routes_on_content(p) for p in self.catalog.pipelines.values()):
            for function in (self.evaluator.handler, self.api.handler):
                grant_objects(self.runs.bucket, function.role, EXTRAS_PREFIX, write=False)
                acknowledge(
                    function.role,
                    wildcard_resource(self.runs.bucket, f"/{EXTRAS_PREFIX}*"),
                    "Large extras are read back from extras/<event id>/<sha256>.json; the keys are made per message.",
                )

    def _ingest_access(self, ingest: WatcherIngest) -> table_access.TableAccess:
        """A watcher's ingest: its asset's events, and the dedupe records of its own source's identities."""
        # Every asset the watcher feeds (one source may feed several assets).
        uris = self.catalog.watcher_assets[ingest.watcher]
        # SQS identities are ``sqs:<the queue's ARN>:<message id>``, Kafka's ``kafka:...``; an S3 or EventBridge
        # watcher's are ``s3:<watcher>:`` or ``eventbridge:<watcher>:`` (its queue's for what is no EventBridge
        # event), a Kinesis watcher's ``kinesis:<watcher>:`` (adapters/messages.py).
        prefixes = {
            "sqs": [f"sqs:{ingest.queue.queue_arn}:"] if ingest.queue is not None else [],
            "kafka": ["kafka:"],
            "s3": [f"s3:{ingest.watcher}:", f"sqs:{ingest.queue.queue_arn}:" if ingest.queue else ""],
            "eventbridge": [
                f"eventbridge:{ingest.watcher}:",
                f"sqs:{ingest.queue.queue_arn}:" if ingest.queue else "",
            ],
            "kinesis": [f"kinesis:{ingest.watcher}:"],
        }[ingest.kind]
        return table_access.ingest(uris, [p for p in prefixes if p], batched_puts=ingest.kind == "sqs")

    def _grant_start_runs(self, role: iam.IRole) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="StartJobRuns",
                actions=["emr-serverless:StartJobRun"],
                resources=[self.spark.application_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FollowJobRuns",
                # StartJobRun tags each job run with its run id (tag-on-create needs TagResource on it).
                actions=[
                    "emr-serverless:GetJobRun",
                    "emr-serverless:CancelJobRun",
                    "emr-serverless:TagResource",
                ],
                resources=[self.spark.job_runs_arn],
            )
        )
        # A run's secret (where its job writes its outlet metadata) is made when it is submitted and when its
        # outlets are read: the functions may make it, the jobs may not.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="MakeRunTokens", actions=["kms:GenerateMac"], resources=[self.spark.run_token_key.key_arn]
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassJobRole",
                actions=["iam:PassRole"],
                resources=[self.spark.job_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
            )
        )
        # Run contexts are written before a job starts and outlet metadata read after it ends.
        grant_objects(self.runs.bucket, role, RUNS_PREFIX, write=True)
        acknowledge(
            role,
            wildcard_resource(self.runs.bucket, f"/{RUNS_PREFIX}*"),
            "Run contexts and outlet metadata live under runs/<pipeline>/<run id>/; run ids are made at run time.",
        )
        acknowledge(
            role,
            wildcard_resource(self.spark.application, "/jobruns/*"),
            "Get/Cancel/TagResource on this application's job runs only; their ids are made by StartJobRun.",
        )

    def _alarm(self) -> None:
        self.alarms = Alarms(self, "Alarms", topic_arn=self.config.alarm_topic_arn)
        for ingest in self.ingest.watchers:
            if ingest.dlq is not None:
                self.alarms.dead_letters(
                    f"DeadLetters{self.watcher_output_id(ingest.watcher)}",
                    ingest.dlq,
                    what=f"watcher {ingest.watcher} ({ingest.kind})",
                )
        self.alarms.failed_batches(
            "FailedBatchesEvaluator", mapping_id(self.evaluator.handler), what="the evaluator's stream"
        )
        for ingest in self.ingest.watchers:
            if ingest.kind in ("kafka", "kinesis") and ingest.dlq is None:
                self.alarms.failed_batches(
                    f"FailedBatches{self.watcher_output_id(ingest.watcher)}",
                    mapping_id(ingest.function),
                    what=f"watcher {ingest.watcher} ({ingest.kind})",
                )
        self.alarms.dead_letters(
            "DeadLettersRunState", self.run_state.dlq, what="the job-state rule and function"
        )
        self.alarms.dead_letters(
            "DeadLettersSchedules", self.schedules.dlq, what="the time schedules and ticks"
        )
        self.alarms.dead_letters(
            "DeadLettersReconcile", self.reconciliation.failures, what="the reconciliation sweep"
        )
        for function in self.functions:
            if function is not self.api.handler:
                name = function.node.scope.node.id if function.node.scope else function.node.id
                self.alarms.destination_failures(
                    f"DestinationFailures{name}", function.function, what=function.function.function_name
                )
        self.alarms.sweep(
            "SweepRepairs",
            service=RECONCILE_SERVICE,
            metric_name="RunsRepaired",
            description="The reconciliation sweep repaired runs (lost state changes, refused submissions, "
            "missed releases): see its logs and docs/runbook-failures.md",
        )
        self.alarms.sweep(
            "SweepErrors",
            service=RECONCILE_SERVICE,
            metric_name="SweepErrors",
            description="The reconciliation sweep failed on some runs or pipelines: see its logs",
        )
        if self.ingest.watchers:
            self.alarms.quarantined_messages("QuarantinedMessages", service=self.ingest_service_name)
        self.alarms.function_errors("EvaluatorErrors", self.evaluator.handler.function, what="The evaluator")
        self.alarms.iterator_age(
            "EvaluatorIteratorAge", self.evaluator.handler.function, limit=self.config.iterator_age_alarm
        )


def mapping_id(function: ServiceFunction) -> str:
    """The id (UUID) of a function's one event-source mapping (its ``Ref``), which its metrics are keyed by.

    Raises:
        ValueError: the function has no event-source mapping, or more than one.
    """
    found = [c for c in function.function.node.find_all() if isinstance(c, lambda_.CfnEventSourceMapping)]
    if len(found) != 1:
        raise ValueError(f"{function.node.path} has {len(found)} event-source mappings, not one")
    return found[0].ref


#: Inlet URIs longer than this in all (the job role's inline policy holds about 10 KB) let jobs read every
#: asset's events instead.
_MAX_INLET_POLICY_CHARS = 4000


def declared_inlets(catalog: Catalog) -> list[str] | None:
    """The asset inlets of every pipeline, whose events jobs may read (None: every asset's).

    None when a pipeline has an alias inlet (resolved at run time) or the URIs are too long for the policy.
    """
    uris: set[str] = set()
    for pipeline in catalog.pipelines.values():
        for inlet in pipeline.inlets:
            if not isinstance(inlet, Asset):
                return None
            uris.add(inlet.uri)
    return sorted(uris) if sum(len(u) for u in uris) <= _MAX_INLET_POLICY_CHARS else None
