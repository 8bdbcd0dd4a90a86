"""Lambda's event-source mappings, locally: pollers that call the handlers with the events Lambda would send.

Each poller reads one source (an SQS queue, a DynamoDB stream, Kafka topics) in its own daemon thread, shapes
what it reads as Lambda's event for that source, calls the handler with a Lambda-like context, and then does
what the event-source mapping does with the answer: delete or release SQS messages, checkpoint a stream
shard or retry it, commit Kafka offsets or seek back. The handlers are the deployed ones (their ``deps=``
bound by the runtime); nothing here imports them.
"""

from __future__ import annotations

import abc
import base64
import json
import logging
import math
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import ClientError

from assetflow_dev.aws import LOCAL_ACCOUNT_ID, LOCAL_REGION
from assetflow_dev.emulators import LOCAL_KAFKA_CONSUMER_TIMEOUTS
from assetflow_dev.moto_server import KINESIS_PUTS_WAIT_MAX

logger = logging.getLogger(__name__)

#: A handler with its dependencies bound: ``handler(event, context) -> response``.
Handler = Callable[[dict[str, Any], Any], Any]

#: After a failed poll (an emulator down, a refused connection): wait this long, doubling up to the cap.
POLL_BACKOFF_SECONDS = 0.2
POLL_BACKOFF_MAX_SECONDS = 5.0
#: Between retries of a failed stream or Kafka batch: this long, doubling up to the cap (Kafka's cap stays
#: well under the consumer's max_poll_interval_ms, or the group would drop the consumer while it waits).
RETRY_BACKOFF_SECONDS = 0.1
RETRY_BACKOFF_MAX_SECONDS = 1.0
#: How often a stream poller looks for new shards when none of its shards has ended.
SHARD_DISCOVERY_SECONDS = 60.0
#: A worker parked this long in a long poll has found nothing to read (a long poll answers at once otherwise).
PARKED_IDLE_SECONDS = 0.2
#: Shards a stream poller reads at once, each with its own handler invocation.
MAX_CONCURRENT_SHARDS = 16
#: How long one Kafka poll waits for records (also how soon a Kafka poller notices `stop()`).
KAFKA_POLL_TIMEOUT_MS = 500
#: How long the broker may hold a fetch: short while records flow, long once the topic has been quiet for
#: KAFKA_IDLE_AFTER_SECONDS. Tansu answers a fetch only when its wait is over, records or not, so the wait is
#: the latency of a record (a 500 ms wait made a 50-290 ms sawtooth); a quiet topic is fetched rarely.
KAFKA_FETCH_WAIT_MS = 100
KAFKA_IDLE_FETCH_WAIT_MS = 3000
KAFKA_IDLE_AFTER_SECONDS = 10.0
#: How long a Kafka offset commit may take before it counts as failed.
KAFKA_COMMIT_TIMEOUT_MS = 5000

_SQS_MAX_MESSAGES = 10  # ReceiveMessage's and the batch APIs' limit
_KAFKA_TIMESTAMP_TYPES = {0: "CREATE_TIME", 1: "LOG_APPEND_TIME"}
_STARTING_POSITIONS = ("TRIM_HORIZON", "LATEST")
_KAFKA_EVENT_SOURCES = ("aws:kafka", "SelfManagedKafka")
_KAFKA_REBUILD_AFTER_ERRORS = 3
#: How often an idle Kafka poller checks that its broker still holds the offsets it committed (a local broker
#: with memory storage loses them with its topics when it restarts), and how long it waits for the answer.
KAFKA_COMMITTED_CHECK_SECONDS = 5.0
_KAFKA_COMMITTED_CHECK_TIMEOUT_MS = 1000


# -- the Lambda context ------------------------------------------------------------------------------------


def function_arn(function_name: str) -> str:
    """The ARN a local function answers to (the local region and account)."""
    return f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:function:{function_name}"


@dataclass(frozen=True)
class LocalLambdaContext:
    """The parts of Lambda's context object that Powertools and the handlers read."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str
    memory_limit_in_mb: int = 512
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""
    #: When the invocation times out, on the `time.monotonic()` clock.
    deadline: float = field(default_factory=lambda: time.monotonic() + 60.0)

    def __post_init__(self) -> None:
        if not self.log_group_name:
            object.__setattr__(self, "log_group_name", f"/aws/lambda/{self.function_name}")
        if not self.log_stream_name:
            stream = f"{datetime.now(UTC):%Y/%m/%d}/[{self.function_version}]{uuid.uuid4().hex}"
            object.__setattr__(self, "log_stream_name", stream)

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the deadline (0 once it has passed)."""
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def lambda_context(function_name: str, *, timeout_seconds: float = 60.0) -> LocalLambdaContext:
    """A context for one invocation of `function_name`, with a fresh request id."""
    return LocalLambdaContext(
        function_name=function_name,
        invoked_function_arn=function_arn(function_name),
        aws_request_id=str(uuid.uuid4()),
        deadline=time.monotonic() + timeout_seconds,
    )


# -- the pollers' common loop ------------------------------------------------------------------------------


@dataclass
class PollerStats:
    """What a poller has done since it was created (counts of records unless named otherwise)."""

    #: Handler invocations.
    batches: int = 0
    #: Records handed to the handler, retries included.
    records: int = 0
    #: Records the handler processed (deleted, checkpointed or committed).
    succeeded: int = 0
    #: Records that failed an invocation (each failed attempt counts).
    failed_attempts: int = 0
    #: Records given up on: sent to the on-failure callback, or (SQS) failed on their last receive before
    #: the queue's redrive policy moves them to its dead-letter queue.
    dead_lettered: int = 0
    #: The last error of a poll or an invocation (type and message).
    last_error: str | None = None


class Poller(abc.ABC):
    """One event-source mapping: daemon threads that poll a source and invoke a handler.

    ``workers`` threads poll at once (Lambda runs several SQS pollers; one per stream shard). A poll that finds
    nothing is followed by a wait that starts at ``idle_wait`` and doubles up to ``idle_wait_max`` while the
    source stays idle (as Lambda's pollers back off); ``wake()`` ends the wait at once (the local runtime wakes
    the stream poller when its own functions write events, so backing off costs no latency). ``ready`` is set
    once the poller is consuming: a message sent after that is read without waiting for a start-up.

    A failed poll (an emulator down, a refused connection) never ends a thread: it is logged at warning
    level, without payloads, and retried after a backoff that doubles from 0.2 s to 5 s.
    """

    def __init__(
        self,
        *,
        name: str,
        handler: Handler,
        function_name: str,
        idle_wait: float = 0.0,
        idle_wait_max: float | None = None,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.name = name
        self.handler = handler
        self.function_name = function_name
        self.stats = PollerStats()
        self.workers = workers
        self._idle_wait = idle_wait
        self._idle_wait_max = max(idle_wait, idle_wait_max or idle_wait)
        self._stopping = threading.Event()
        self._wakeup = threading.Event()
        self._ready = threading.Event()
        self._threads: list[threading.Thread] = []
        # Each start() begins a generation: a thread of an earlier one (still parked in a long poll when the
        # poller was stopped and started again) ends after that poll instead of polling on beside the new ones.
        self._generation = 0
        self._local = threading.local()
        self._lifecycle = threading.Lock()
        self._stats_lock = threading.Lock()
        # Threads blocked in a long poll of their source (by name, with when it began): stop() does not wait
        # for them, and one parked a while on an empty source is idle.
        self._parked: dict[str, float] = {}
        # Per worker: when its last poll that found nothing began (None: it found work, failed, or none ran).
        self._empty_poll_began: dict[int, float | None] = {}
        # A poll must begin after this moment for "nothing found" to mean idle (SQS releases failed
        # messages with a delay: until then an empty queue does not mean the work is done).
        self._quiet_after = 0.0

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start polling in daemon threads (no-op while running)."""
        with self._lifecycle:
            if not self._stopping.is_set() and any(t.is_alive() for t in self._threads):
                return
            self._generation += 1
            generation = self._generation
            self._stopping.clear()
            self._wakeup.clear()
            self._empty_poll_began = dict.fromkeys(range(self.workers))
            self._threads = [
                threading.Thread(
                    target=self._run,
                    args=(n, generation),
                    name=f"poller-{self.name}"
                    + (f"-{n}" if self.workers > 1 else "")
                    + (f"-g{generation}" if generation > 1 else ""),
                    daemon=True,
                )
                for n in range(self.workers)
            ]
            for thread in self._threads:
                thread.start()
        logger.info(
            "poller started",
            extra={"poller": self.name, "function": self.function_name, "workers": self.workers},
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling: the batches in progress finish, then the threads end. Idempotent.

        A batch waiting for its next retry is abandoned unacknowledged, so its source delivers it again.
        """
        self._stopping.set()
        self._wakeup.set()
        with self._lifecycle:
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not threading.current_thread():
                # A thread parked in a long poll is not waited for: it hands back what it gets, then ends.
                while thread.is_alive() and thread.name not in self._parked and time.monotonic() < deadline:
                    thread.join(0.05)
        if self.running:
            logger.warning("poller did not stop in time", extra={"poller": self.name, "timeout": timeout})
        elif threads:
            logger.info("poller stopped", extra={"poller": self.name})

    def wake(self) -> None:
        """End an idle wait now: there may be something to read."""
        self._wakeup.set()

    @property
    def ready(self) -> bool:
        """Whether the poller is consuming its source."""
        return self._ready.is_set()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the poller is consuming (or ``timeout`` passes); returns whether it is."""
        return self._ready.wait(timeout)

    @property
    def running(self) -> bool:
        """Whether a polling thread may still invoke the handler (alive, and not parked in a stopped poll)."""
        stopping = self._stopping.is_set()
        return any(t.is_alive() and not (stopping and t.name in self._parked) for t in self._threads)

    @property
    def idle(self) -> bool:
        """True when every worker's last poll found nothing and no batch is in flight or waiting for a retry.

        A worker parked in a long poll for a moment counts as having found nothing (a long poll answers at
        once when there is something to read).
        """
        if not self._empty_poll_began:
            return False
        now = time.monotonic()
        for worker, thread in zip(sorted(self._empty_poll_began), self._threads, strict=False):
            began = self._empty_poll_began[worker]
            parked = self._parked.get(thread.name)
            if parked is not None and parked >= self._quiet_after and now - parked >= PARKED_IDLE_SECONDS:
                continue
            if began is None or began < self._quiet_after:
                return False
        return True

    # -- what subclasses provide -----------------------------------------------------------------------------

    @abc.abstractmethod
    def _poll(self) -> bool:
        """Poll once and handle what was found; return whether there was any work (records or retries)."""

    def _on_poll_error(self) -> None:  # noqa: B027 - optional hook
        """Forget state that a failed poll may have made stale."""

    def _close(self) -> None:  # noqa: B027 - optional hook
        """Release the source's resources (called in the polling thread when it ends)."""

    # -- the loop --------------------------------------------------------------------------------------------

    def _retired(self) -> bool:
        """Whether the calling polling thread should end: the poller is stopping, or was started again."""
        return (
            self._stopping.is_set()
            or getattr(self._local, "generation", self._generation) != self._generation
        )

    def _run(self, worker: int = 0, generation: int = 1) -> None:
        self._local.generation = generation
        backoff = POLL_BACKOFF_SECONDS
        empty = 0
        try:
            while not self._retired():
                began = time.monotonic()
                try:
                    busy = self._poll()
                except Exception as exc:
                    if self._retired():
                        break  # its source went away while it stopped (an emulator stopped first): nothing to say
                    self._empty_poll_began[worker] = None
                    self.stats.last_error = _describe(exc)
                    # Errors from the SDK and the Kafka client name the operation, never a payload.
                    logger.warning(
                        "poll failed, backing off",
                        extra={
                            "poller": self.name,
                            "error": type(exc).__name__,
                            "detail": str(exc)[:300],
                            "retry_in_seconds": backoff,
                        },
                    )
                    self._on_poll_error()
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, POLL_BACKOFF_MAX_SECONDS)
                    continue
                backoff = POLL_BACKOFF_SECONDS
                if self._retired():
                    break
                self._empty_poll_began[worker] = None if busy else began
                empty = 0 if busy else empty + 1
                if not busy and self._idle_wait:
                    self._pause(min(self._idle_wait * 2 ** min(empty - 1, 16), self._idle_wait_max))
        finally:
            if generation == self._generation:
                self._empty_poll_began[worker] = None
            if all(t is threading.current_thread() or not t.is_alive() for t in self._threads):
                try:
                    self._close()
                except Exception as exc:
                    logger.warning(
                        "poller close failed", extra={"poller": self.name, "error": type(exc).__name__}
                    )

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or until woken or stopped."""
        if self._wakeup.wait(seconds):
            self._wakeup.clear()

    def _invoke(
        self, event: dict[str, Any], size: int
    ) -> tuple[Any, BaseException | None, LocalLambdaContext]:
        """Call the handler; return its response, or the exception it raised, and the context it got."""
        context = lambda_context(self.function_name)
        with self._stats_lock:
            self.stats.batches += 1
            self.stats.records += size
        try:
            return self.handler(event, context), None, context
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # a crashed invocation is a function error on Lambda too
            self.stats.last_error = _describe(exc)
            # The exception's message may quote a payload: only its type is logged.
            logger.warning(
                "handler failed",
                extra={
                    "poller": self.name,
                    "function": self.function_name,
                    "request_id": context.aws_request_id,
                    "error": type(exc).__name__,
                    "records": size,
                },
            )
            return None, exc, context

    def _wait(self, seconds: float) -> bool:
        """Sleep unless stopping; return whether the poller is stopping."""
        return self._stopping.wait(seconds)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:500]}"


def _retry_backoff(attempts: int) -> float:
    return float(min(RETRY_BACKOFF_SECONDS * 2 ** max(attempts - 1, 0), RETRY_BACKOFF_MAX_SECONDS))


def _failed_identifiers(response: Any) -> list[Any] | None:
    """The item identifiers of a partial batch response; None when the response fails the whole batch.

    As Lambda reads it: no response, an empty or missing list mean success; an item without an identifier
    (null or empty) fails the whole batch.
    """
    if not isinstance(response, Mapping):
        return []
    failures = response.get("batchItemFailures")
    if not failures:
        return []
    if not isinstance(failures, list):
        return None
    identifiers = []
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
        if identifier is None or identifier == "":
            return None
        identifiers.append(identifier)
    return identifiers


def _iso_millis(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _failure_context(
    context: LocalLambdaContext, attempts: int, error: BaseException | None
) -> dict[str, Any]:
    """The parts that every on-failure record of a stream or Kafka mapping shares."""
    response: dict[str, Any] = {"statusCode": 200, "executedVersion": context.function_version}
    if error is not None:
        response["functionError"] = "Unhandled"
    return {
        "requestContext": {
            "requestId": context.aws_request_id,
            "functionArn": context.invoked_function_arn,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": attempts,
        },
        "responseContext": response,
        "version": "1.0",
        "timestamp": _iso_millis(datetime.now(UTC)),
    }


# -- SQS ---------------------------------------------------------------------------------------------------


class SqsPoller(Poller):
    """An SQS event-source mapping with ReportBatchItemFailures.

    Long-polls the queue (20 s, as Lambda does: an idle queue costs a request every 20 s), hands the messages
    over as Lambda's SQS event, deletes the ones the handler did not report as failed, and makes the failed
    ones (all of them when the handler raises) visible again after `retry_delay_seconds`. Moving a message to
    the dead-letter queue after its queue's ``maxReceiveCount`` is SQS's own job (the queue's RedrivePolicy).
    ``concurrency`` batches are handled at once (Lambda starts with five for an SQS mapping); a FIFO queue's
    one at a time, so that its order holds.
    """

    def __init__(
        self,
        *,
        name: str,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        handler: Handler,
        function_name: str,
        batch_size: int = 10,
        wait_seconds: int = 20,
        retry_delay_seconds: int = 1,
        concurrency: int = 1,
    ) -> None:
        fifo = queue_arn.endswith(".fifo")
        super().__init__(
            name=name, handler=handler, function_name=function_name, workers=1 if fifo else concurrency
        )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.batch_size = batch_size
        self.wait_seconds = wait_seconds
        self.retry_delay_seconds = retry_delay_seconds
        self.fifo = queue_arn.endswith(".fifo")
        self._region = _arn_region(queue_arn)
        # Set while receives find messages: the other workers poll too; when the first worker's receive comes
        # back empty, they wait again.
        self._backlog = threading.Event()
        self._max_receive_count: int | None = None
        self._redrive_read = False

    def _on_poll_error(self) -> None:
        # The queue may have been deleted and created again with another redrive policy.
        self._redrive_read = False

    def _poll(self) -> bool:
        if not self._redrive_read:
            self._read_redrive_policy()
        self._ready.set()  # a long poll is about to wait for messages: what is sent now is read
        if not self._primary() and not self._backlog.is_set():
            # As Lambda scales an SQS mapping's pollers with the backlog: an idle queue has one long poll.
            name = threading.current_thread().name
            self._parked[name] = time.monotonic()
            try:
                self._backlog.wait(self.wait_seconds)
            finally:
                self._parked.pop(name, None)
            return bool(self._backlog.is_set()) and not self._stopping.is_set()
        messages = self._receive(min(self.batch_size, _SQS_MAX_MESSAGES), self.wait_seconds)
        if messages:
            self._backlog.set()
        elif self._primary():
            self._backlog.clear()
        if messages and self._stopping.is_set():
            # Received while stopped (a long poll outlived stop()): hand them back at once, unhandled. (A
            # thread of an earlier generation that receives after a restart handles them, then ends.)
            self._change_visibility(messages, 0)
            return False
        # Above 10 (standard queues only), gather what is there without waiting again, as a batching window.
        while messages and len(messages) < self.batch_size and not self.fifo:
            more = self._receive(min(self.batch_size - len(messages), _SQS_MAX_MESSAGES), 0)
            if not more:
                break
            messages.extend(more)
        if not messages:
            return False
        self._handle(messages)
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling (the workers waiting for a backlog are released at once)."""
        self._stopping.set()
        self._backlog.set()
        super().stop(timeout)

    def _primary(self) -> bool:
        return threading.current_thread() is (self._threads[0] if self._threads else None)

    def _read_redrive_policy(self) -> None:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["RedrivePolicy"])
        policy = json.loads(attributes.get("Attributes", {}).get("RedrivePolicy") or "null")
        self._max_receive_count = int(policy["maxReceiveCount"]) if policy else None
        self._redrive_read = True

    def _receive(self, count: int, wait_seconds: int) -> list[dict[str, Any]]:
        name = threading.current_thread().name
        if wait_seconds:
            self._parked[name] = time.monotonic()
        try:
            answer = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=count,
                WaitTimeSeconds=wait_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        finally:
            self._parked.pop(name, None)
        return list(answer.get("Messages") or [])

    def _handle(self, messages: list[dict[str, Any]]) -> None:
        event = {"Records": [sqs_record(m, queue_arn=self.queue_arn, region=self._region) for m in messages]}
        response, error, _context = self._invoke(event, len(messages))
        ids = [m["MessageId"] for m in messages]
        failed_ids: set[str]
        if error is not None:
            failed_ids = set(ids)
        else:
            reported = _failed_identifiers(response)
            # An identifier that names no message of the batch fails the whole batch, as on Lambda.
            if reported is None or not set(map(str, reported)) <= set(ids):
                failed_ids = set(ids)
            else:
                failed_ids = set(map(str, reported))
        done = [m for m in messages if m["MessageId"] not in failed_ids]
        failed = [m for m in messages if m["MessageId"] in failed_ids]
        self._delete(done)
        self.stats.succeeded += len(done)
        if failed:
            self._quiet_after = time.monotonic() + self.retry_delay_seconds
            self._release(failed)
            self.stats.failed_attempts += len(failed)
            last_tries = [
                m
                for m in failed
                if self._max_receive_count is not None
                and int(m.get("Attributes", {}).get("ApproximateReceiveCount", "0"))
                >= self._max_receive_count
            ]
            if last_tries:
                self.stats.dead_lettered += len(last_tries)
                logger.warning(
                    "messages failed their last receive: the queue's redrive policy moves them to its DLQ",
                    extra={"poller": self.name, "message_ids": [m["MessageId"] for m in last_tries]},
                )

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for chunk in _chunks(messages, _SQS_MAX_MESSAGES):
            answer = self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            if answer.get("Failed"):
                # The message comes back after its visibility timeout; the handlers are idempotent.
                logger.warning(
                    "messages not deleted",
                    extra={"poller": self.name, "codes": [f.get("Code") for f in answer["Failed"]]},
                )

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Make failed messages visible again after `retry_delay_seconds`."""
        if not self.fifo:
            refused = self._change_visibility(messages, self.retry_delay_seconds)
        else:
            # moto (5.2.5) hands a FIFO group's released messages back newest first: each leaves the group's
            # in-flight set only when a receive finds it visible, and the last one found unlocks the group
            # for itself. So the poller waits out the delay itself (the group stays locked meanwhile, its
            # messages in flight), then releases them with a timeout already past, which moto applies at
            # once, so that the next receive gets them in order. SQS refuses a negative timeout: then 0.
            self._wait(self.retry_delay_seconds)
            try:
                refused = self._change_visibility(messages, -1)
            except ClientError:
                refused = messages
            if refused:
                refused = self._change_visibility(refused, 0)
        if refused:
            # Then they come back after the queue's visibility timeout instead.
            logger.warning(
                "failed messages not released early",
                extra={"poller": self.name, "message_ids": [m["MessageId"] for m in refused]},
            )

    def _change_visibility(self, messages: list[dict[str, Any]], timeout: int) -> list[dict[str, Any]]:
        """Change the messages' visibility timeout; return the ones the queue refused."""
        refused: list[dict[str, Any]] = []
        for chunk in _chunks(messages, _SQS_MAX_MESSAGES):
            answer = self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": timeout}
                    for i, m in enumerate(chunk)
                ],
            )
            refused.extend(chunk[int(f["Id"])] for f in answer.get("Failed") or [])
        return refused


def sqs_record(message: Mapping[str, Any], *, queue_arn: str, region: str = LOCAL_REGION) -> dict[str, Any]:
    """One received SQS message as a record of Lambda's SQS event."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {
            name: _sqs_attribute(value) for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def _sqs_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """A message attribute in Lambda's camelCase form, binary values in base64."""
    attribute: dict[str, Any] = {}
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = _b64(value["BinaryValue"])
    attribute["stringListValues"] = list(value.get("StringListValues") or [])
    attribute["binaryListValues"] = [_b64(v) for v in value.get("BinaryListValues") or []]
    attribute["dataType"] = value.get("DataType")
    return attribute


def _b64(data: bytes | bytearray | str) -> str:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return base64.b64encode(raw).decode("ascii")


def _arn_region(arn: str) -> str:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 and parts[3] else LOCAL_REGION


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- DynamoDB Streams --------------------------------------------------------------------------------------

#: Stream records per invocation: Lambda's default for a DynamoDB stream (``EnvironmentConfig``'s too).
STREAM_BATCH_SIZE = 100
#: Records a filtering stream poller reads at once (GetRecords' most).
READ_LIMIT = 1000


@dataclass
class _Shard:
    """What a stream poller knows of one shard."""

    shard_id: str
    parent_id: str | None
    #: The iterator type to start with when nothing of the shard was handled yet.
    start_at: str
    iterator: str | None = None
    #: The sequence number of the last record handled (processed, or given up on).
    checkpoint: str | None = None
    #: GetRecords returned no next iterator: nothing more will be read from this shard.
    ended: bool = False
    #: Records read but not handled yet, as the sub-batches still to invoke, in order.
    pending: list[list[dict[str, Any]]] = field(default_factory=list)
    #: Failed invocations of pending[0].
    attempts: int = 0
    retry_at: float = 0.0
    #: The on-failure record of pending[0] once its retries are exhausted (kept until delivered).
    failure: dict[str, Any] | None = None
    #: The last record read: the checkpoint once every pending batch is handled (records after the last
    #: one the filter kept were discarded, as Lambda discards them).
    read_up_to: str | None = None

    @property
    def finished(self) -> bool:
        return self.ended and not self.pending


class StreamPoller(Poller):
    """A DynamoDB Streams event-source mapping with ReportBatchItemFailures.

    Reads every shard strictly in order (a child only once its parent is finished), hands each page of
    records over as Lambda's stream event, and checkpoints what the handler processed. A record reported in
    ``batchItemFailures`` is retried, with the records after it; a raising handler gets the batch again,
    halved first when `bisect_on_error` (halving does not count as a retry). After `retry_attempts` retries
    (negative: forever), `on_failure` receives Lambda's on-failure record for streams and the poller moves
    past those records. The open shards are read at once, one handler invocation per shard (as Lambda runs
    one per shard); a retrying shard never blocks another. An idle stream is read every `poll_interval`,
    backing off to `idle_poll_interval`; ``wake()`` reads it at once (the local runtime wakes the poller when
    its own functions write events, so the back-off costs no latency).

    With ``accept`` (the mapping's filter criteria), records it refuses are discarded and the rest go to the
    function up to ``batch_size`` at a time, as Lambda filters a stream: a page read holds up to
    ``READ_LIMIT`` records, and what the filter keeps of it makes the next events.
    """

    def __init__(
        self,
        *,
        name: str,
        streams: Any,
        stream_arn: str,
        handler: Handler,
        function_name: str,
        batch_size: int = STREAM_BATCH_SIZE,
        accept: Callable[[Mapping[str, Any]], bool] | None = None,
        retry_attempts: int = 5,
        bisect_on_error: bool = True,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        starting_position: str = "TRIM_HORIZON",
        poll_interval: float = 0.05,
        idle_poll_interval: float = 5.0,
    ) -> None:
        super().__init__(
            name=name,
            handler=handler,
            function_name=function_name,
            idle_wait=poll_interval,
            idle_wait_max=idle_poll_interval,
        )
        if starting_position not in _STARTING_POSITIONS:
            raise ValueError(
                f"starting_position must be one of {_STARTING_POSITIONS}, not {starting_position!r}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        self.streams = streams
        self.stream_arn = stream_arn
        self.batch_size = batch_size
        self.accept = accept
        self.retry_attempts = retry_attempts
        self.bisect_on_error = bisect_on_error
        self.on_failure = on_failure
        self.starting_position = starting_position
        self.poll_interval = poll_interval
        self._shards: dict[str, _Shard] = {}
        self._discovered = False
        self._next_discovery = 0.0
        self._executor: ThreadPoolExecutor | None = None
        self._executor_size = 0

    def _poll(self) -> bool:
        if time.monotonic() >= self._next_discovery:
            self._discover()
        readable = [s for s in self._shards.values() if self._readable(s)]
        due = [s for s in readable if not (s.pending and s.failure is None and time.monotonic() < s.retry_at)]
        waiting = len(due) < len(readable)
        if self._stopping.is_set():
            return True
        if len(due) > 1:
            # One invocation per shard at a time, the shards' at once (as Lambda runs one per shard).
            busy = any(list(self._pool(len(due)).map(self._step, due)))
        else:
            busy = any(self._step(shard) for shard in due)
        waiting = waiting or any(s.pending for s in readable)
        self._ready.set()  # every open shard has its iterator and was read once
        if waiting and not busy:
            self._wait(self.poll_interval)
        return busy or waiting

    def _pool(self, shards: int) -> ThreadPoolExecutor:
        size = min(shards, MAX_CONCURRENT_SHARDS)
        if self._executor is None or self._executor_size < size:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            self._executor = ThreadPoolExecutor(
                max_workers=size, thread_name_prefix=f"poller-{self.name}-shard"
            )
            self._executor_size = size
        return self._executor

    def _close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- shards -------------------------------------------------------------------------------------------

    def _discover(self) -> None:
        listed: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
            if start:
                kwargs["ExclusiveStartShardId"] = start
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            listed.extend(description.get("Shards") or [])
            start = description.get("LastEvaluatedShardId")
            if not start:
                break
        first = not self._discovered
        for shard in listed:
            shard_id = shard["ShardId"]
            if shard_id in self._shards:
                continue
            closed = "EndingSequenceNumber" in (shard.get("SequenceNumberRange") or {})
            # LATEST applies to the shards open when the mapping starts; shards that appear later (children
            # of those) are read from their beginning, so nothing written after the start is skipped.
            start_at = "LATEST" if first and self.starting_position == "LATEST" else "TRIM_HORIZON"
            self._shards[shard_id] = _Shard(
                shard_id=shard_id,
                parent_id=shard.get("ParentShardId"),
                start_at=start_at,
                ended=first and closed and start_at == "LATEST",
            )
        listed_ids = {s["ShardId"] for s in listed}
        for shard_id in [i for i, s in self._shards.items() if s.finished and i not in listed_ids]:
            del self._shards[shard_id]  # trimmed from the stream: no child can wait for it any more
        self._discovered = True
        self._next_discovery = time.monotonic() + SHARD_DISCOVERY_SECONDS

    def _readable(self, shard: _Shard) -> bool:
        if shard.finished:
            return False
        parent = self._shards.get(shard.parent_id) if shard.parent_id else None
        # A parent the stream no longer lists was trimmed: its records are gone, the child may go on.
        return parent is None or parent.finished

    def _step(self, shard: _Shard) -> bool:
        if shard.pending:
            self._process(shard)
            return True
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
        limit = self.batch_size if self.accept is None else max(self.batch_size, READ_LIMIT)
        try:
            page = self.streams.get_records(ShardIterator=shard.iterator, Limit=limit)
        except ClientError as exc:
            # Whatever went wrong, the next read starts again from the checkpoint.
            shard.iterator = None
            if exc.response.get("Error", {}).get("Code") == "ExpiredIteratorException":
                return True
            raise
        except Exception:
            shard.iterator = None
            raise
        shard.iterator = page.get("NextShardIterator")
        if shard.iterator is None:
            shard.ended = True
            self._next_discovery = 0.0  # its children may be listed now
        records = page.get("Records") or []
        if not records:
            return shard.ended
        shard.read_up_to = self._read_sequence(records[-1])
        wanted = [self._lambda_record(r, shard.shard_id) for r in records]
        if self.accept is not None:
            wanted = [r for r in wanted if self.accept(r)]
        if not wanted:
            # All discarded by the filter: nothing for the function, so the poller may idle (unless the page
            # was full and more follows at once).
            shard.checkpoint = shard.read_up_to
            return len(records) >= limit
        shard.pending = [list(batch) for batch in _chunks(wanted, self.batch_size)]
        shard.attempts = 0
        self._process(shard)
        return True

    def _iterator(self, shard: _Shard) -> str:
        if shard.checkpoint is not None:
            try:
                answer = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=shard.shard_id,
                    ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                    SequenceNumber=shard.checkpoint,
                )
                return str(answer["ShardIterator"])
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "TrimmedDataAccessException":
                    raise
                # The stream's retention (24 hours) passed the checkpoint: what follows it is partly gone.
                logger.warning(
                    "stream records expired before they were read; reading on from the oldest left",
                    extra={"poller": self.name, "shard": shard.shard_id, "checkpoint": shard.checkpoint},
                )
                shard.checkpoint = None
                shard.start_at = "TRIM_HORIZON"
        answer = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard.shard_id, ShardIteratorType=shard.start_at
        )
        return str(answer["ShardIterator"])

    # -- batches ------------------------------------------------------------------------------------------

    def _process(self, shard: _Shard) -> None:
        """Invoke the handler with the shard's first pending sub-batch and act on the answer."""
        if shard.failure is not None:
            self._give_up(shard)
            return
        batch = shard.pending[0]
        response, error, context = self._invoke({"Records": batch}, len(batch))
        sequence = [self._sequence(r) for r in batch]
        first_failed = len(batch)
        if error is not None:
            first_failed = 0
        else:
            reported = _failed_identifiers(response)
            if reported is None or not set(map(str, reported)) <= set(sequence):
                first_failed = 0
            elif reported:
                # Lambda checkpoints before the lowest sequence number reported and retries from there.
                first_failed = min(sequence.index(str(i)) for i in reported)
        if first_failed:
            shard.checkpoint = sequence[first_failed - 1]
            self.stats.succeeded += first_failed
        if first_failed == len(batch):
            shard.pending.pop(0)
            shard.attempts = 0
            if not shard.pending and shard.read_up_to is not None:
                shard.checkpoint = shard.read_up_to
            return
        remaining = batch[first_failed:]
        self.stats.failed_attempts += len(remaining)
        if error is not None and self.bisect_on_error and len(remaining) > 1:
            half = len(remaining) // 2
            shard.pending[0:1] = [remaining[:half], remaining[half:]]
            return
        shard.pending[0] = remaining
        shard.attempts += 1
        if 0 <= self.retry_attempts < shard.attempts:
            shard.failure = self._failure_record(shard, remaining, context, error)
            self._give_up(shard)
            return
        shard.retry_at = time.monotonic() + _retry_backoff(shard.attempts)

    def _failure_record(
        self,
        shard: _Shard,
        batch: list[dict[str, Any]],
        context: LocalLambdaContext,
        error: BaseException | None,
    ) -> dict[str, Any]:
        return _failure_context(context, shard.attempts, error) | {
            self.BATCH_INFO: self._batch_info(shard, batch),
            # As Lambda's S3 on-failure destination writes it: the invocation's event, records and all.
            "payload": json.dumps({"Records": batch}),
        }

    # -- the record shapes (a DynamoDB stream's; a Kinesis stream poller has its own) --------------------

    #: The key of the batch's description in the on-failure record.
    BATCH_INFO = "DDBStreamBatchInfo"

    def _read_sequence(self, record: Mapping[str, Any]) -> str:
        """The sequence number of a record as GetRecords returns it."""
        return str(record["dynamodb"]["SequenceNumber"])

    def _lambda_record(self, record: Mapping[str, Any], shard_id: str) -> dict[str, Any]:
        """A GetRecords record as a record of the Lambda event."""
        return stream_record(record, stream_arn=self.stream_arn)

    def _sequence(self, record: Mapping[str, Any]) -> str:
        """The sequence number of a record of the Lambda event."""
        return str(record["dynamodb"]["SequenceNumber"])

    def _batch_info(self, shard: _Shard, batch: list[dict[str, Any]]) -> dict[str, Any]:
        """The on-failure record's description of a batch given up on."""
        first, last = batch[0]["dynamodb"], batch[-1]["dynamodb"]
        return {
            "shardId": shard.shard_id,
            "startSequenceNumber": first["SequenceNumber"],
            "endSequenceNumber": last["SequenceNumber"],
            "approximateArrivalOfFirstRecord": _iso_seconds(first.get("ApproximateCreationDateTime")),
            "approximateArrivalOfLastRecord": _iso_seconds(last.get("ApproximateCreationDateTime")),
            "batchSize": len(batch),
            "streamArn": self.stream_arn,
        }

    def _give_up(self, shard: _Shard) -> None:
        """Hand the exhausted batch to `on_failure` and move past it.

        Raises:
            Exception: whatever `on_failure` raises; the batch stays, and delivery is tried again.
        """
        batch = shard.pending[0]
        record = shard.failure or {}
        if self.on_failure is not None:
            self.on_failure(record)
        info = record.get(self.BATCH_INFO, {})
        logger.warning(
            "stream records given up after their retries" + ("" if self.on_failure else ", and dropped"),
            extra={
                "poller": self.name,
                "shard": shard.shard_id,
                "start_sequence_number": info.get("startSequenceNumber"),
                "end_sequence_number": info.get("endSequenceNumber"),
                "records": len(batch),
            },
        )
        self.stats.dead_lettered += len(batch)
        shard.checkpoint = self._sequence(batch[-1])
        shard.pending.pop(0)
        if not shard.pending and shard.read_up_to is not None:
            shard.checkpoint = shard.read_up_to
        shard.attempts = 0
        shard.failure = None


def stream_record(record: Mapping[str, Any], *, stream_arn: str) -> dict[str, Any]:
    """One GetRecords record (as boto3 parses it) as a record of Lambda's DynamoDB stream event.

    boto3 turns the creation time into a datetime and binary attributes into bytes; Lambda's event has epoch
    seconds and the wire form (base64), which is what the handlers' Powertools classes decode.
    """
    dynamodb = dict(record.get("dynamodb") or {})
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        seconds = created.timestamp()
        dynamodb["ApproximateCreationDateTime"] = int(seconds) if seconds.is_integer() else seconds
    for image in ("Keys", "NewImage", "OldImage"):
        if image in dynamodb:
            dynamodb[image] = {name: _wire_value(value) for name, value in dynamodb[image].items()}
    lambda_record: dict[str, Any] = {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion") or "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion") or LOCAL_REGION,
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }
    if record.get("userIdentity"):  # deletions by TTL
        lambda_record["userIdentity"] = dict(record["userIdentity"])
    return lambda_record


def _wire_value(value: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed DynamoDB attribute value back in its JSON wire form."""
    (kind, inner), *_ = value.items()
    if kind == "B":
        return {"B": _b64(inner)}
    if kind == "BS":
        return {"BS": [_b64(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _wire_value(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [_wire_value(v) for v in inner]}
    return {kind: inner}


def _iso_seconds(moment: Any) -> str | None:
    # The on-failure record for streams gives arrival times to the second ("2019-11-14T00:13:19Z").
    if isinstance(moment, int | float):
        moment = datetime.fromtimestamp(moment, UTC)
    if not isinstance(moment, datetime):
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- Kinesis -----------------------------------------------------------------------------------------------


class _KinesisShards:
    """A Kinesis client with the DynamoDB Streams calls `StreamPoller` makes (the two APIs are alike).

    Calls name the stream by name: moto's GetRecords cannot find the stream of an iterator that was asked for
    by ARN.
    """

    def __init__(self, kinesis: Any, stream_arn: str) -> None:
        self._kinesis = kinesis
        self._name = stream_arn.rsplit("/", 1)[-1]

    def describe_stream(self, *, StreamArn: str, ExclusiveStartShardId: str | None = None) -> dict[str, Any]:  # noqa: N803
        kwargs: dict[str, Any] = {"StreamName": self._name}
        if ExclusiveStartShardId:
            kwargs["ExclusiveStartShardId"] = ExclusiveStartShardId
        description = self._kinesis.describe_stream(**kwargs)["StreamDescription"]
        shards = description.get("Shards") or []
        more = description.get("HasMoreShards") and shards
        return {
            "StreamDescription": {
                "Shards": shards,
                "LastEvaluatedShardId": shards[-1]["ShardId"] if more else None,
            }
        }

    def get_shard_iterator(
        self,
        *,
        StreamArn: str,  # noqa: N803
        ShardId: str,  # noqa: N803
        ShardIteratorType: str,  # noqa: N803
        SequenceNumber: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "StreamName": self._name,
            "ShardId": ShardId,
            "ShardIteratorType": ShardIteratorType,
        }
        if SequenceNumber is not None:
            kwargs["StartingSequenceNumber"] = SequenceNumber
        return dict(self._kinesis.get_shard_iterator(**kwargs))

    def get_records(self, *, ShardIterator: str, Limit: int) -> dict[str, Any]:  # noqa: N803
        return dict(self._kinesis.get_records(ShardIterator=ShardIterator, Limit=Limit))


class KinesisPoller(StreamPoller):
    """A Kinesis event-source mapping: `StreamPoller`'s reading, retries, bisection and on-failure records.

    Each shard is read in order and handed over as Lambda's Kinesis event; a partial batch response retries
    from the lowest sequence number reported, a raising handler gets the batch again halved
    (BisectBatchOnFunctionError), and after ``retry_attempts`` retries the batch goes, records and all, to
    ``on_failure`` as Lambda's on-failure record for Kinesis (``KinesisBatchInfo``).
    """

    BATCH_INFO = "KinesisBatchInfo"

    def __init__(self, *, kinesis: Any, stream_arn: str, puts_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(streams=_KinesisShards(kinesis, stream_arn), stream_arn=stream_arn, **kwargs)
        #: moto's wait for Kinesis puts (``moto_server.KINESIS_PUTS_PATH``). With it, an idle poller waits there
        #: rather than reading every shard once a second, and after a put reads at the next tick of that once-
        #: a-second cadence: Lambda's latency, without its polls (one request per 20 s while nothing is put).
        self.puts_url = puts_url
        self._puts_seen: int | None = None

    def _pause(self, seconds: float) -> None:
        if self.puts_url is None or seconds < self._idle_wait_max:
            super()._pause(seconds)  # backing off after records, or no wait to use: as Lambda polls
            return
        seen, began = self._puts_seen, time.monotonic()
        if seen is None:
            # Where the count stands first (a put between the last read and now is read after this pause).
            self._puts_seen = self._puts(-1, 0.0)
            super()._pause(seconds)
            return
        name = threading.current_thread().name
        self._parked[name] = began
        try:
            self._puts_seen = now = self._puts(seen, KINESIS_PUTS_WAIT_MAX)
        finally:
            self._parked.pop(name, None)
        if now is None:
            super()._pause(seconds)
        elif now != seen and not self._stopping.is_set():
            elapsed = time.monotonic() - began
            self._wait(seconds * math.ceil(elapsed / seconds) - elapsed)

    def _puts(self, since: int, wait: float) -> int | None:
        """The puts moto's Kinesis has taken, once they differ from ``since`` (None: no wait to use, poll)."""
        url = f"{self.puts_url}?{urlencode({'since': since, 'wait': wait})}"
        try:
            with urllib.request.urlopen(url, timeout=wait + 5) as answer:  # noqa: S310 - the runtime's own moto
                return int(json.load(answer)["puts"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if self._stopping.is_set():
                return None  # moto is going away with the runtime
            logger.warning(
                "no wait for Kinesis puts: polling", extra={"poller": self.name, "error": str(exc)}
            )
            self.puts_url = None
            return None

    def _read_sequence(self, record: Mapping[str, Any]) -> str:
        return str(record["SequenceNumber"])

    def _lambda_record(self, record: Mapping[str, Any], shard_id: str) -> dict[str, Any]:
        return kinesis_record(
            record,
            stream_arn=self.stream_arn,
            shard_id=shard_id,
            function_arn=function_arn(self.function_name),
        )

    def _sequence(self, record: Mapping[str, Any]) -> str:
        return str(record["kinesis"]["sequenceNumber"])

    def _batch_info(self, shard: _Shard, batch: list[dict[str, Any]]) -> dict[str, Any]:
        first, last = batch[0]["kinesis"], batch[-1]["kinesis"]
        return {
            "shardId": shard.shard_id,
            "startSequenceNumber": first["sequenceNumber"],
            "endSequenceNumber": last["sequenceNumber"],
            "approximateArrivalOfFirstRecord": _iso_millis(
                datetime.fromtimestamp(first["approximateArrivalTimestamp"], UTC)
            ),
            "approximateArrivalOfLastRecord": _iso_millis(
                datetime.fromtimestamp(last["approximateArrivalTimestamp"], UTC)
            ),
            "batchSize": len(batch),
            "streamArn": self.stream_arn,
        }


def kinesis_record(
    record: Mapping[str, Any], *, stream_arn: str, shard_id: str, function_arn: str = ""
) -> dict[str, Any]:
    """One Kinesis GetRecords record (as boto3 parses it) as a record of Lambda's Kinesis event."""
    arrival = record.get("ApproximateArrivalTimestamp")
    seconds = arrival.timestamp() if isinstance(arrival, datetime) else float(arrival or 0)
    sequence = str(record["SequenceNumber"])
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record.get("PartitionKey"),
            "sequenceNumber": sequence,
            "data": _b64(record.get("Data") or b""),
            "approximateArrivalTimestamp": round(seconds, 3),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{sequence}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": function_arn,
        "awsRegion": _arn_region(stream_arn),
        "eventSourceARN": stream_arn,
    }


# -- Kafka -------------------------------------------------------------------------------------------------


class KafkaPoller(Poller):
    """An MSK or self-managed Kafka event-source mapping on a kafka-python consumer group.

    Polls up to `batch_size` records, hands them over as Lambda's Kafka event, and commits offset + 1 of
    each partition the handler processed. When the handler raises (or reports failed records), each failed
    partition is sought back to its first failed record and the batch comes again after a short backoff;
    after `retry_attempts` retries (negative: forever), `on_failure` receives Lambda's on-failure record for
    Kafka (with the records, as an S3 destination gets them) and only once it took it are the offsets
    committed past the batch; without `on_failure` the batch is retried for ever, never committed past. The
    consumer reconnects by itself after a broker restart; a consumer that cannot be built (the broker is
    down) is built again on the next poll.
    """

    def __init__(
        self,
        *,
        name: str,
        bootstrap_servers: str,
        topics: Sequence[str],
        group_id: str,
        handler: Handler,
        function_name: str,
        event_source: str = "aws:kafka",
        event_source_arn: str | None = None,
        batch_size: int = 100,
        retry_attempts: int = 3,
        on_failure: Callable[[dict[str, Any]], None] | None = None,
        starting_position: str = "TRIM_HORIZON",
    ) -> None:
        super().__init__(name=name, handler=handler, function_name=function_name)
        if event_source not in _KAFKA_EVENT_SOURCES:
            raise ValueError(f"event_source must be one of {_KAFKA_EVENT_SOURCES}, not {event_source!r}")
        if event_source_arn is not None and event_source != "aws:kafka":
            raise ValueError("only an MSK source (event_source='aws:kafka') has an event_source_arn")
        if starting_position not in _STARTING_POSITIONS:
            raise ValueError(
                f"starting_position must be one of {_STARTING_POSITIONS}, not {starting_position!r}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if not topics:
            raise ValueError("a Kafka poller needs at least one topic")
        self.bootstrap_servers = bootstrap_servers
        self.topics = tuple(topics)
        self.group_id = group_id
        self.event_source = event_source
        self.event_source_arn = event_source_arn
        self.batch_size = batch_size
        self.retry_attempts = retry_attempts
        self.on_failure = on_failure
        self.starting_position = starting_position
        self._consumer: Any = None
        self._poll_errors = 0
        # (topic, partition) -> (the offset a failed batch starts at, its failed attempts so far)
        self._failures: dict[Any, tuple[int, int]] = {}
        self._last_records = time.monotonic()
        self._fetch_wait_ms = KAFKA_FETCH_WAIT_MS
        # (topic, partition) -> the offset this consumer last committed, and when the broker was last asked.
        self._committed: dict[Any, int] = {}
        self._committed_checked = time.monotonic()

    def _connect(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer  # optional: only the local runtime needs kafka-python

            consumer = KafkaConsumer(
                bootstrap_servers=[s for s in self.bootstrap_servers.split(",") if s],
                group_id=self.group_id,
                client_id=f"assetflow-local-{self.name}",
                enable_auto_commit=False,
                auto_offset_reset="earliest" if self.starting_position == "TRIM_HORIZON" else "latest",
                max_poll_records=self.batch_size,
                fetch_max_wait_ms=KAFKA_FETCH_WAIT_MS,
                **LOCAL_KAFKA_CONSUMER_TIMEOUTS,
            )
            self._fetch_wait_ms = KAFKA_FETCH_WAIT_MS
            self._last_records = time.monotonic()
            consumer.subscribe(list(self.topics))
            self._consumer = consumer
        return self._consumer

    def _close(self) -> None:
        self._committed.clear()  # a consumer built again resumes from what the broker holds
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close(autocommit=False, timeout_ms=2000)

    def _on_poll_error(self) -> None:
        # kafka-python reconnects by itself; a consumer that keeps failing anyway is built again (and joins
        # its group again, resuming from the committed offsets).
        self._poll_errors += 1
        if self._poll_errors >= _KAFKA_REBUILD_AFTER_ERRORS:
            self._poll_errors = 0
            try:
                self._close()
            except Exception as exc:
                logger.warning(
                    "Kafka consumer close failed", extra={"poller": self.name, "error": type(exc).__name__}
                )

    def _poll(self) -> bool:
        consumer = self._connect()
        quiet = self._fetch_wait_ms == KAFKA_IDLE_FETCH_WAIT_MS
        polled = consumer.poll(
            timeout_ms=KAFKA_POLL_TIMEOUT_MS * (2 if quiet else 1), max_records=self.batch_size
        )
        self._poll_errors = 0
        if not self._ready.is_set() and consumer.assignment():
            self._ready.set()  # in the group with its partitions: the next fetch reads what is sent now
        now = time.monotonic()
        if polled:
            self._last_records = now
        quiet = now - self._last_records >= KAFKA_IDLE_AFTER_SECONDS
        self._set_fetch_wait(consumer, KAFKA_IDLE_FETCH_WAIT_MS if quiet else KAFKA_FETCH_WAIT_MS)
        batch = [record for partition in sorted(polled) for record in polled[partition]]
        if not batch:
            assigned = consumer.assignment()
            for partition in [p for p in self._failures if p not in assigned]:
                del self._failures[partition]  # revoked: another member retries it
            self._check_committed(consumer, assigned)
            return bool(self._failures) or not _caught_up(consumer, assigned)
        self._handle(consumer, batch)
        return True

    def _check_committed(self, consumer: Any, assigned: Iterable[Any]) -> None:
        """When idle, now and then: start a partition over if its broker lost the offset committed for it.

        A broker that restarts without its storage (Tansu's memory storage, locally) comes back with its topics
        recreated empty and no committed offsets, while this consumer may keep its fetch position; a record
        produced at offset 0 before its next fetch would then never be read (the log's end is the position, not
        past it, so no reset happens). A group offset the broker no longer has is what a new member of the
        group would meet: resume as it would, from the starting position.
        """
        now = time.monotonic()
        if now - self._committed_checked < KAFKA_COMMITTED_CHECK_SECONDS:
            return
        self._committed_checked = now
        for partition in list(assigned):
            ours = self._committed.get(partition)
            if ours is None:
                continue
            try:
                theirs = consumer.committed(partition, timeout_ms=_KAFKA_COMMITTED_CHECK_TIMEOUT_MS)
            except Exception:
                return  # the broker is not answering (yet): look again next time
            if theirs is not None and theirs >= ours:
                continue
            logger.warning(
                "Kafka broker lost this group's offset: reading the partition from its starting position",
                extra={"poller": self.name, "partition": str(partition), "committed": ours, "broker": theirs},
            )
            del self._committed[partition]
            if self.starting_position == "TRIM_HORIZON":
                consumer.seek_to_beginning(partition)
            else:
                consumer.seek_to_end(partition)

    def _set_fetch_wait(self, consumer: Any, wait_ms: int) -> None:
        """Change how long the broker may hold the consumer's next fetches (kafka-python reads it per fetch)."""
        if wait_ms == self._fetch_wait_ms:
            return
        fetcher = getattr(consumer, "_fetcher", None)
        config = getattr(fetcher, "config", None)
        if isinstance(config, dict) and "fetch_max_wait_ms" in config:
            config["fetch_max_wait_ms"] = wait_ms
            self._fetch_wait_ms = wait_ms

    def _handle(self, consumer: Any, batch: list[Any]) -> None:
        from kafka import TopicPartition

        event = kafka_event(
            batch,
            event_source=self.event_source,
            event_source_arn=self.event_source_arn,
            bootstrap_servers=self.bootstrap_servers,
        )
        response, error, context = self._invoke(event, len(batch))
        by_partition: dict[Any, list[Any]] = {}
        for record in batch:
            by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        first_failed = self._first_failed(by_partition, response, error)

        commit: dict[Any, int] = {}
        failing: dict[Any, list[Any]] = {}
        for partition, records in by_partition.items():
            cut = first_failed.get(partition)
            done = [r for r in records if cut is None or r.offset < cut]
            if done:
                commit[partition] = done[-1].offset + 1
                self.stats.succeeded += len(done)
            if cut is not None:
                failing[partition] = [r for r in records if r.offset >= cut]
            else:
                self._failures.pop(partition, None)

        if failing:
            self.stats.failed_attempts += sum(len(r) for r in failing.values())
            attempts = 1 + max(
                self._failures[p][1] if self._failures.get(p, (None, 0))[0] == first_failed[p] else 0
                for p in failing
            )
            # Without an on-failure destination nothing may be given up: the offsets never pass a record that
            # is neither stored nor quarantined, and the batch is retried until it is.
            if self.on_failure is None or not 0 <= self.retry_attempts < attempts:
                for partition, records in failing.items():
                    self._failures[partition] = (records[0].offset, attempts)
                    consumer.seek(partition, records[0].offset)
                self._commit(consumer, commit)
                self._wait(_retry_backoff(attempts))
                return
            self._commit(consumer, commit)
            self._give_up(consumer, failing, context, attempts, error)
            commit = {p: records[-1].offset + 1 for p, records in failing.items()}
        self._commit(consumer, commit)

    def _first_failed(
        self, by_partition: Mapping[Any, list[Any]], response: Any, error: BaseException | None
    ) -> dict[Any, int]:
        """The offset of each partition's first failed record (every partition when the invocation failed)."""
        whole_batch = {p: records[0].offset for p, records in by_partition.items()}
        if error is not None:
            return whole_batch
        reported = _failed_identifiers(response)
        if reported is None:
            return whole_batch
        first_failed: dict[Any, int] = {}
        by_name = {f"{p.topic}-{p.partition}": p for p in by_partition}
        for identifier in reported:
            # Powertools reports {"partition": "<topic>-<partition>", "offset": n}.
            partition = (
                by_name.get(str(identifier.get("partition"))) if isinstance(identifier, Mapping) else None
            )
            offset = identifier.get("offset") if isinstance(identifier, Mapping) else None
            if partition is None or not isinstance(offset, int):
                return whole_batch
            first_failed[partition] = min(offset, first_failed.get(partition, offset))
        return first_failed

    def _give_up(
        self,
        consumer: Any,
        failing: Mapping[Any, list[Any]],
        context: LocalLambdaContext,
        attempts: int,
        error: BaseException | None,
    ) -> None:
        records = [r for rs in failing.values() for r in rs]
        event = kafka_event(
            records,
            event_source=self.event_source,
            event_source_arn=self.event_source_arn,
            bootstrap_servers=self.bootstrap_servers,
        )
        info: dict[str, Any] = {"batchSize": len(records)}
        if self.event_source_arn:
            info["eventSourceArn"] = self.event_source_arn
        info["bootstrapServers"] = self.bootstrap_servers
        info["payloadSize"] = len(json.dumps(event).encode())
        info["recordsInfo"] = {
            f"{p.topic}-{p.partition}": {
                "firstRecordOffset": str(rs[0].offset),
                "lastRecordOffset": str(rs[-1].offset),
                "firstRecordTimestamp": _iso_millis(datetime.fromtimestamp(rs[0].timestamp / 1000, UTC)),
                "lastRecordTimestamp": _iso_millis(datetime.fromtimestamp(rs[-1].timestamp / 1000, UTC)),
            }
            for p, rs in failing.items()
        }
        record = _failure_context(context, attempts, error) | {
            "KafkaBatchInfo": info,
            "payload": json.dumps(event),
        }
        if self.on_failure is not None:
            try:
                self.on_failure(record)
            except Exception:
                # Not delivered: the batch comes again, and when it fails again so does this delivery.
                for partition, rs in failing.items():
                    consumer.seek(partition, rs[0].offset)
                raise
        for partition in failing:
            self._failures.pop(partition, None)
        self.stats.dead_lettered += len(records)
        logger.warning(
            "Kafka records given up after their retries" + ("" if self.on_failure else ", and dropped"),
            extra={"poller": self.name, "records_info": info["recordsInfo"]},
        )

    def _commit(self, consumer: Any, offsets: Mapping[Any, int]) -> None:
        """Commit the offsets (the next record to read of each partition).

        Raises:
            KafkaError: the commit failed (a rebalance, the broker is down). The records are not read again
                by this consumer; another member of the group (or this one, restarted) may get them again,
                and the handlers are idempotent. The loop backs off.
        """
        if not offsets:
            return
        from kafka import OffsetAndMetadata

        consumer.commit(
            {p: OffsetAndMetadata(offset, "", -1) for p, offset in offsets.items()},
            timeout_ms=KAFKA_COMMIT_TIMEOUT_MS,
        )
        self._committed.update(offsets)


def _caught_up(consumer: Any, assigned: Iterable[Any]) -> bool:
    """Whether the consumer has joined its group and read every assigned partition to its end.

    A consumer still joining (≈ 3 s) polls nothing although records wait: that is not idleness.
    """
    partitions = list(assigned)
    if not partitions:
        return False
    for partition in partitions:
        highwater = consumer.highwater(partition)  # from the last fetch response; None before the first
        if highwater is None:
            return False
        try:
            position = consumer.position(partition, timeout_ms=100)
        except Exception:
            return False
        if position is None or position < highwater:
            return False
    return True


def kafka_event(
    records: Sequence[Any],
    *,
    event_source: str,
    event_source_arn: str | None,
    bootstrap_servers: str,
) -> dict[str, Any]:
    """kafka-python ``ConsumerRecord`` objects as Lambda's MSK or self-managed Kafka event."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(f"{record.topic}-{record.partition}", []).append(_kafka_record(record))
    event: dict[str, Any] = {"eventSource": event_source}
    if event_source_arn and event_source == "aws:kafka":
        event["eventSourceArn"] = event_source_arn
    event["bootstrapServers"] = bootstrap_servers
    event["records"] = grouped
    return event


def _kafka_record(record: Any) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": _KAFKA_TIMESTAMP_TYPES.get(record.timestamp_type, "NO_TIMESTAMP_TYPE"),
    }
    if record.key is not None:
        shaped["key"] = _b64(record.key)
    if record.value is not None:
        shaped["value"] = _b64(record.value)
    shaped["headers"] = [{name: _java_bytes(value)} for name, value in record.headers or []]
    return shaped


def _java_bytes(value: bytes | None) -> list[int] | None:
    # Lambda's poller is Java: header bytes arrive as Java's signed bytes (0xFF is -1).
    if value is None:
        return None
    return [b - 256 if b > 127 else b for b in bytes(value)]
