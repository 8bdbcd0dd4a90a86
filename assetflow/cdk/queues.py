"""Encrypted, TLS-only SQS queues: the watchers' queues and every dead-letter queue of the service."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from assetflow.cdk.nag import acknowledge


def dead_letter_queue(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey,
    retention: Duration,
    removal_policy: RemovalPolicy,
    fifo: bool = False,
) -> sqs.Queue:
    """A KMS-encrypted, TLS-only queue that holds what could not be processed, for operators to inspect."""
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        fifo=fifo or None,
        retention_period=retention,
        removal_policy=removal_policy,
    )
    acknowledge(
        queue, "AwsSolutions-SQS3", "This queue is itself a dead-letter queue; an alarm watches its depth."
    )
    return queue


def watched_queue(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey,
    dlq: sqs.IQueue,
    max_receive_count: int,
    visibility_timeout: Duration,
    retention: Duration,
    removal_policy: RemovalPolicy,
    fifo: bool = False,
) -> sqs.Queue:
    """A KMS-encrypted, TLS-only queue whose messages go to ``dlq`` after ``max_receive_count`` receives."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS,
        encryption_master_key=key,
        enforce_ssl=True,
        fifo=fifo or None,
        visibility_timeout=visibility_timeout,
        retention_period=retention,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=max_receive_count),
        removal_policy=removal_policy,
    )
