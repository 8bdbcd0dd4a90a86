"""Runs on EMR Serverless: the runs bucket, the Spark application, its job role and the job-state rule."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from assetflow.adapters.emr import JOB_STATE_DETAIL_TYPE, JOB_STATE_SOURCE, RUN_MOVING_STATES
from assetflow.adapters.extras import EXTRAS_PREFIX
from assetflow.cdk import table_access
from assetflow.cdk.config import EnvironmentConfig, split_location
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.grants import KEY_WRITE_ACTIONS, grant_objects
from assetflow.cdk.nag import acknowledge, wildcard_resource
from assetflow.cdk.queues import dead_letter_queue
from assetflow.cdk.table_access import grant_table_access
from assetflow_job.contract import CONTEXT_FILE, OUTLET_METADATA_FILE

RUN_STATE_HANDLER = "assetflow.functions.handle_job_state"
#: Run contexts and outlet metadata (read and written by functions and jobs).
RUNS_PREFIX = "runs/"
#: Job code: the Spark entry points, the job-side helper and the --py-files zip (read-only for jobs).
CODE_PREFIX = "code/"


class RunsBucket(Construct):
    """The bucket of run contexts (``runs/``) and job code (``code/``): KMS, TLS only, versioned, logged."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, config: EnvironmentConfig
    ) -> None:
        super().__init__(scope, construct_id)
        # Server access logs go to a bucket of their own; log delivery writes with S3-managed keys only.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(90))],
            removal_policy=config.removal_policy,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="runs-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireRunContexts", prefix=RUNS_PREFIX, expiration=config.runs_retention
                ),
                s3.LifecycleRule(id="ExpireOldVersions", noncurrent_version_expiration=Duration.days(30)),
                s3.LifecycleRule(id="AbortUploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
            ],
            removal_policy=config.removal_policy,
        )


class SparkApplication(Construct):
    """The EMR Serverless Spark application and the job execution role its runs assume.

    The role reaches exactly the configured data locations, ``runs/`` (read/write) and ``code/`` (read) of
    the runs bucket, and the events of ``inlet_uris`` in the table (read, for ``inlet_events``; every asset's
    when None).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        runs: RunsBucket,
        table: dynamodb.ITable,
        job_code: Path | None,
        inlet_uris: Sequence[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        emr = config.emr
        self.application = emrserverless.CfnApplication(
            self,
            "Application",
            release_label=emr.release_label,
            type="SPARK",
            architecture="X86_64",
            auto_start_configuration=emrserverless.CfnApplication.AutoStartConfigurationProperty(
                enabled=True
            ),
            auto_stop_configuration=emrserverless.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=emr.idle_timeout_minutes
            ),
            maximum_capacity=emrserverless.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=emr.max_cpu, memory=emr.max_memory, disk=emr.max_disk
            ),
        )
        stack = Stack.of(self)
        self.job_role = iam.Role(
            self,
            "JobRole",
            description="Execution role of assetflow's Spark jobs on EMR Serverless",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnEquals": {"aws:SourceArn": self.application.attr_arn},
                },
            ),
        )
        self._grant_run_objects(runs)
        grant_objects(runs.bucket, self.job_role, CODE_PREFIX, write=False)
        grant_objects(runs.bucket, self.job_role, EXTRAS_PREFIX, write=False)
        # inlet_events reads the events of the pipelines' declared inlets from the table (only theirs).
        grant_table_access(table, self.job_role, table_access.job(inlet_uris), sid="InletEvents")

        acknowledge(
            self.job_role,
            wildcard_resource(runs.bucket, f"/{CODE_PREFIX}*"),
            "Jobs read their entry point and the --py-files archive under code/ (read only).",
        )
        acknowledge(
            self.job_role,
            wildcard_resource(runs.bucket, f"/{EXTRAS_PREFIX}*"),
            "Jobs read the extras of their triggering and inlet events that are stored by reference under "
            "extras/, one key per event (ids unknown in advance; read only).",
        )
        self._grant_data_locations(config)
        # Per-run secrets (assetflow/adapters/run_tokens.py): an HMAC key that only the functions may use.
        # HMAC keys cannot rotate: a rotated key would move every run's outlet metadata.
        self.run_token_key = kms.Key(
            self,
            "RunTokenKey",
            description="HMAC key of assetflow's per-run secrets (where a run's outlet metadata goes)",
            key_spec=kms.KeySpec.HMAC_256,
            key_usage=kms.KeyUsage.GENERATE_VERIFY_MAC,
            removal_policy=config.removal_policy,
            pending_window=Duration.days(7),
        )
        acknowledge(
            self.run_token_key,
            "AwsSolutions-KMS5",
            "HMAC keys do not support rotation (KMS); rotating it would also move every run's outlet metadata.",
        )
        self.code_deployment: s3deploy.BucketDeployment | None = None
        if job_code is not None:
            self.code_deployment = self._deploy_job_code(job_code, runs, config)

    def _grant_run_objects(self, runs: RunsBucket) -> None:
        """Read run contexts, write outlet metadata: nothing else under ``runs/``, and no listing of it.

        A run's outlet metadata is read from under its own token (``RunTokens``), which the job's arguments
        alone name: without a listing a job cannot find another run's place, and a run context (which any job
        may read) is not writable by jobs.
        """
        contexts = runs.bucket.arn_for_objects(f"{RUNS_PREFIX}*/{CONTEXT_FILE}")
        metadata = runs.bucket.arn_for_objects(f"{RUNS_PREFIX}*/{OUTLET_METADATA_FILE}")
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(sid="ReadRunContexts", actions=["s3:GetObject"], resources=[contexts])
        )
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteOutletMetadata",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[metadata],
            )
        )
        if runs.bucket.encryption_key is not None:
            runs.bucket.encryption_key.grant(self.job_role, *KEY_WRITE_ACTIONS)
        for suffix, why in (
            (
                f"/{RUNS_PREFIX}*/{CONTEXT_FILE}",
                "Jobs read their run context (one per run; ids made at run time).",
            ),
            (
                f"/{RUNS_PREFIX}*/{OUTLET_METADATA_FILE}",
                "Jobs write their outlet metadata under their run's secret token (made at run time).",
            ),
        ):
            acknowledge(self.job_role, wildcard_resource(runs.bucket, suffix), why)

    @property
    def application_arn(self) -> str:
        """The application's ARN (``StartJobRun`` is allowed on it and nothing else)."""
        return self.application.attr_arn

    @property
    def job_runs_arn(self) -> str:
        """The ARN pattern of the application's job runs."""
        return f"{self.application.attr_arn}/jobruns/*"

    def _deploy_job_code(
        self, job_code: Path, runs: RunsBucket, config: EnvironmentConfig
    ) -> s3deploy.BucketDeployment:
        # The copying function gets a role and log group of ours, so no AWS managed policy is attached.
        logs_ = logs.LogGroup(
            self, "JobCodeDeployLogs", retention=config.log_retention, removal_policy=config.removal_policy
        )
        role = iam.Role(
            self,
            "JobCodeDeployRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Copies assetflow's job code into the runs bucket's code/ prefix",
        )
        logs_.grant_write(role)
        deployment = s3deploy.BucketDeployment(
            self,
            "JobCode",
            sources=[s3deploy.Source.asset(str(job_code))],
            destination_bucket=runs.bucket,
            destination_key_prefix=CODE_PREFIX,
            prune=True,
            retain_on_delete=False,
            memory_limit=512,
            role=role,
            log_group=logs_,
        )
        stack = Stack.of(self)
        reason = (
            "BucketDeployment's own grants: it reads the CDK asset bucket and syncs code/ of the runs bucket "
            "(s3 sync needs object and listing actions, and the bucket's key)."
        )
        for finding in (
            "Action::s3:GetObject*",
            "Action::s3:GetBucket*",
            "Action::s3:List*",
            "Action::s3:DeleteObject*",
            "Action::s3:Abort*",
            "Action::kms:GenerateDataKey*",
            "Action::kms:ReEncrypt*",
        ):
            acknowledge(role, f"AwsSolutions-IAM5[{finding}]", reason)
        acknowledge(role, wildcard_resource(runs.bucket, "/*"), reason)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*]",
            reason,
        )
        for child in stack.node.children:
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge(
                    child, "AwsSolutions-L1", "BucketDeployment's handler runtime is chosen by aws-cdk-lib."
                )
        return deployment

    def _grant_data_locations(self, config: EnvironmentConfig) -> None:
        stack = Stack.of(self)
        for locations, actions in (
            (config.data_read_locations, ["s3:GetObject"]),
            (
                config.data_write_locations,
                ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            ),
        ):
            by_bucket: dict[str, list[str]] = {}
            for location in locations:
                bucket, prefix = split_location(location)
                by_bucket.setdefault(bucket, []).append(prefix)
            for bucket, prefixes in sorted(by_bucket.items()):
                bucket_arn = f"arn:{stack.partition}:s3:::{bucket}"
                self.job_role.add_to_principal_policy(
                    iam.PolicyStatement(
                        actions=actions, resources=[f"{bucket_arn}/{p}*" for p in sorted(set(prefixes))]
                    )
                )
                for p in sorted(set(prefixes)):
                    acknowledge(
                        self.job_role,
                        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{bucket}/{p}*]",
                        "A data location the environment config names (data_read_locations/data_write_locations).",
                    )
                listing = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
                if "" not in prefixes:
                    listing.add_condition(
                        "StringLike", {"s3:prefix": [f"{p}*" for p in sorted(set(prefixes))]}
                    )
                self.job_role.add_to_principal_policy(listing)


class RunStateRule(Construct):
    """The rule for this application's job state changes and the run-state function it invokes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        application_id: str,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        key: kms.IKey,
        service: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = ServiceFunction(
            self,
            "Handler",
            defaults=defaults,
            handler_module=RUN_STATE_HANDLER,
            description="assetflow run state: records job state changes and emits a successful run's outlets",
            service=service,
            timeout=config.evaluator_timeout,
            memory_mb=config.evaluator_memory_mb,
        )
        # EventBridge encrypts what it dead-letters with its own service principal, which needs the key
        # policy's consent. A key of its own keeps that consent off the service's data key (naming the
        # rule's ARN in the policy would make the key depend on the rule, and the rule on the queue's key).
        self.dlq_key = kms.Key(
            self,
            "DeadLetterKey",
            description="Encrypts the dead letters of assetflow's job-state rule",
            enable_key_rotation=True,
            removal_policy=config.removal_policy,
            pending_window=Duration.days(7),
        )
        stack = Stack.of(self)
        self.dlq_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeDeadLetters",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                # In a key policy "*" is this key.
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
        self.dlq = dead_letter_queue(
            self,
            "DeadLetters",
            key=self.dlq_key,
            retention=config.dlq_retention,
            removal_policy=config.removal_policy,
        )
        self.rule = events.Rule(
            self,
            "Rule",
            description="EMR Serverless job run state changes of assetflow's application",
            event_pattern=events.EventPattern(
                source=[JOB_STATE_SOURCE],
                detail_type=[JOB_STATE_DETAIL_TYPE],
                # Only the states that move a run: a run is created queued, so SUBMITTED, PENDING, SCHEDULED
                # and QUEUED would invoke the function for nothing (three invocations a run).
                detail={"applicationId": [application_id], "state": list(RUN_MOVING_STATES)},
            ),
        )
        self.rule.add_target(
            targets.LambdaFunction(
                self.handler.function,
                dead_letter_queue=self.dlq,
                retry_attempts=8,
                max_event_age=Duration.hours(6),
            )
        )
