"""Where the service's give-ups land, with enough to replay them: ``assetflow replay-failures`` reads them back.

- Stream and Kafka event-source mappings: after their retries (bisected to the failing record, bounded by a
  maximum record age) Lambda writes the failed batch to the **failures bucket** under
  ``aws/lambda/<mapping id>/...``: the invocation record *and the records themselves* (an SQS or SNS
  destination would get the batch's sequence numbers only, which a replay cannot read back after the
  stream's 24 hours).
- Asynchronously invoked functions (job state, ticks, the sweep): after Lambda's two retries the invocation
  record, with the event (``requestPayload``), goes to a queue (EventBridge and Scheduler put what they could
  not deliver at all in the same queue).
- Watched SQS queues keep their own dead-letter queues (the messages themselves).

Each destination has an alarm (``Alarms``); the runbook is docs/runbook-failures.md.
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.functions import ServiceFunction
from assetflow.cdk.nag import acknowledge, acknowledge_dlq_sender, wildcard_resource

#: Lambda's object keys for an event-source mapping's failed batches (``aws/lambda/<ESM UUID>/<shard>/...``).
FAILURE_PREFIX = "aws/lambda/"


class FailureStore(Construct):
    """The failures bucket: KMS, TLS only, private, logged, kept ``failure_retention`` (within the dedupe window)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        config: EnvironmentConfig,
        access_logs: s3.IBucket,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = key
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=access_logs,
            server_access_logs_prefix="failures-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(id="ExpireFailures", expiration=config.failure_retention),
                s3.LifecycleRule(id="AbortUploads", abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            removal_policy=config.removal_policy,
            auto_delete_objects=False,
        )

    def for_mapping(self) -> lambda_.IEventSourceDlq:
        """The on-failure destination of a stream or Kafka event-source mapping: this bucket, writes only."""
        return BatchesToBucket(self.bucket, self.key)


@jsii.implements(lambda_.IEventSourceDlq)
class BatchesToBucket:
    """An S3 on-failure destination granting what Lambda needs and no more.

    CDK's ``S3OnFailureDestination`` grants read, write and delete on the whole bucket; Lambda needs to put its
    objects under ``aws/lambda/`` and to list the bucket (s3:PutObject, s3:ListBucket, and kms:GenerateDataKey
    on the bucket's key).
    """

    def __init__(self, bucket: s3.IBucket, key: kms.IKey) -> None:
        self._bucket = bucket
        self._key = key

    def bind(
        self, target: lambda_.IEventSourceMapping, target_handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        """Grant the function's role the writes, and name the bucket as the destination."""
        iam.Grant.add_to_principal(
            grantee=target_handler,
            actions=["s3:PutObject"],
            resource_arns=[self._bucket.arn_for_objects(f"{FAILURE_PREFIX}*")],
        )
        iam.Grant.add_to_principal(
            grantee=target_handler, actions=["s3:ListBucket"], resource_arns=[self._bucket.bucket_arn]
        )
        self._key.grant(target_handler, "kms:GenerateDataKey", "kms:Encrypt")
        role = target_handler.role
        if isinstance(role, Construct):
            acknowledge(
                role,
                wildcard_resource(self._bucket, f"/{FAILURE_PREFIX}*"),
                "Lambda writes a failed batch under aws/lambda/<mapping id>/<shard>/<date>/<uuid>; the keys are "
                "made by Lambda.",
            )
        return lambda_.DlqDestinationConfig(destination=self._bucket.bucket_arn)


def keep_async_failures(function: ServiceFunction, queue: sqs.IQueue, *, config: EnvironmentConfig) -> None:
    """Send an asynchronous invocation that still fails after Lambda's retries to ``queue``, event and all.

    Without it Lambda drops the event after two retries: a job's state change would be lost and its run stay
    ``running`` for ever (or until the sweep).
    """
    function.function.configure_async_invoke(
        on_failure=destinations.SqsDestination(queue),
        retry_attempts=config.async_retry_attempts,
        max_event_age=config.async_max_event_age,
    )
    acknowledge_dlq_sender(function)


__all__ = ["FAILURE_PREFIX", "BatchesToBucket", "FailureStore", "keep_async_failures"]
