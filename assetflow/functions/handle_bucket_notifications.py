"""The stack's custom resource: turn on the EventBridge notifications of the buckets that S3 watchers watch."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "assetflow-bucket-notifications"
logger = Logger(service=SERVICE)
PHYSICAL_ID = "assetflow-eventbridge-notifications"

Respond = Callable[[dict[str, Any], str, str, str], None]


def enable_eventbridge(s3: Any, bucket: str) -> bool:
    """Turn a bucket's EventBridge notifications on, keeping its other notifications; whether it changed.

    Raises:
        botocore.exceptions.ClientError: S3 refused (no such bucket, no access).
    """
    current = s3.get_bucket_notification_configuration(Bucket=bucket)
    current.pop("ResponseMetadata", None)
    if "EventBridgeConfiguration" in current:
        return False
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={**current, "EventBridgeConfiguration": {}},
        # The bucket's other destinations were validated when they were set.
        SkipDestinationValidation=True,
    )
    return True


def send_response(event: dict[str, Any], status: str, physical_id: str, reason: str) -> None:
    """Answer CloudFormation at the request's pre-signed URL (what the cfn-response module does)."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:3000] or status,
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": {},
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - CloudFormation's https pre-signed URL
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30):  # noqa: S310
        pass


@logger.inject_lambda_context
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, s3: Any = None, respond: Respond | None = None
) -> None:
    """Create and Update turn the watched buckets' EventBridge notifications on; Delete leaves them on.

    Leaving them on is safe: a bucket's events reach EventBridge only where a rule asks for them, at no cost
    otherwise, and other consumers of the bucket may rely on them. Every request is answered, failed or not,
    so that a stack never waits an hour on this resource.
    """
    answer = respond or send_response
    buckets = [str(b) for b in (event.get("ResourceProperties") or {}).get("Buckets") or []]
    status, reason = "SUCCESS", ""
    try:
        if event.get("RequestType") in ("Create", "Update"):
            if s3 is None:
                import boto3

                s3 = boto3.client("s3")
            for bucket in buckets:
                changed = enable_eventbridge(s3, bucket)
                logger.info(
                    "bucket notifications", extra={"bucket": bucket, "eventbridge_turned_on": changed}
                )
    except Exception as exc:
        logger.exception("could not turn the EventBridge notifications on", extra={"buckets": buckets})
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
    answer(event, status, event.get("PhysicalResourceId") or PHYSICAL_ID, reason)
