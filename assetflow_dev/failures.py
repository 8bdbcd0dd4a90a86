"""The local runtime's give-up paths, as Lambda's on-failure destinations are on AWS.

- A stream or Kafka batch that failed its retries: the pollers hand over Lambda's on-failure record (with the
  batch's records in ``payload``, as an S3 destination gets them); ``S3FailureSink`` writes it to the local
  failures bucket under ``aws/lambda/<mapping>/<shard or partition>/YYYY/MM/DD/<time>-<uuid>``, Lambda's
  key layout.
- An asynchronous invocation (a job state change, a tick, a sweep) that still fails after Lambda's two
  retries: ``AsyncInvocation`` writes Lambda's invocation record (with ``requestPayload``) to the function's
  on-failure queue.

``assetflow replay-failures`` reads both back, here as on AWS.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from assetflow_dev.pollers import function_arn, lambda_context

logger = logging.getLogger(__name__)

#: Lambda's own prefix for the objects an event-source mapping's S3 destination writes.
FAILURE_PREFIX = "aws/lambda/"
#: Lambda retries a failed asynchronous invocation twice (after about a minute, then two); locally sooner.
ASYNC_RETRIES = 2
ASYNC_RETRY_PAUSE_SECONDS = 0.5


def _iso_millis(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class S3FailureSink:
    """Writes an event-source mapping's on-failure records to the failures bucket, as Lambda's S3 destination.

    Raises what S3 raises: the poller then keeps the batch (it is not given up until a destination took it).
    """

    def __init__(
        self, s3: Any, bucket: str, mapping_id: str, *, observe: Callable[[str], None] | None = None
    ) -> None:
        self._s3 = s3
        self.bucket = bucket
        self.mapping_id = mapping_id
        self._observe = observe or (lambda line: None)

    def __call__(self, record: dict[str, Any]) -> None:
        """Keep one on-failure record (its key names the shard or the first partition of the batch)."""
        info = (
            record.get("DDBStreamBatchInfo")
            or record.get("KinesisBatchInfo")
            or record.get("KafkaBatchInfo")
            or {}
        )
        where = str(info.get("shardId") or next(iter(info.get("recordsInfo") or {"batch": None})))
        now = datetime.now(UTC)
        key = (
            f"{FAILURE_PREFIX}{self.mapping_id}/{where}/{now:%Y/%m/%d}/{now:%Y-%m-%dT%H.%M.%S}-{uuid.uuid4()}"
        )
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(record, default=str).encode())
        self._observe(f"{self.mapping_id}: a batch failed its retries; kept in s3://{self.bucket}/{key}")


class AsyncInvocation:
    """A function invoked asynchronously, as Lambda does it: retried twice, then kept in its on-failure queue.

    ``__call__`` never raises for a failing function (as an asynchronous invoke returns 202 once accepted):
    it raises only when the on-failure queue itself cannot take the record, so that the caller (the
    launcher's state reports, the ticker) tries the delivery again rather than lose the event.
    """

    def __init__(
        self,
        handler: Callable[[dict[str, Any], Any], Any],
        *,
        function_name: str,
        sqs: Any,
        queue_url: str,
        retries: int = ASYNC_RETRIES,
        pause: float = ASYNC_RETRY_PAUSE_SECONDS,
        observe: Callable[[str], None] | None = None,
    ) -> None:
        self.handler = handler
        self.function_name = function_name
        self._sqs = sqs
        self.queue_url = queue_url
        self.retries = retries
        self.pause = pause
        self._observe = observe or (lambda line: None)
        self.kept = 0
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any = None) -> Any:
        """Invoke, retrying; after the last retry keep the invocation record in the queue and return None."""
        error: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.pause * attempt)
            try:
                return self.handler(event, context or lambda_context(self.function_name))
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:
                error = exc
                # The type only: a message can quote the event.
                logger.warning(
                    "asynchronous invocation failed",
                    extra={
                        "function": self.function_name,
                        "attempt": attempt + 1,
                        "error": type(exc).__name__,
                    },
                )
        self._keep(event, error)
        return None

    def _keep(self, event: dict[str, Any], error: BaseException | None) -> None:
        record = {
            "version": "1.0",
            "timestamp": _iso_millis(datetime.now(UTC)),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"{function_arn(self.function_name)}:$LATEST",
                "condition": "RetriesExhausted",
                "approximateInvokeCount": self.retries + 1,
            },
            "requestPayload": event,
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled",
            },
            "responsePayload": {
                "errorMessage": str(error)[:1000] if error else "",
                "errorType": type(error).__name__ if error else "",
                "stackTrace": traceback.format_exception(error)[-3:] if error else [],
            },
        }
        self._sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(record, default=str))
        with self._lock:
            self.kept += 1
        self._observe(
            f"{self.function_name}: an event failed its retries; kept in {self.queue_url.rsplit('/', 1)[-1]}"
        )


__all__ = ["ASYNC_RETRIES", "FAILURE_PREFIX", "AsyncInvocation", "S3FailureSink"]
