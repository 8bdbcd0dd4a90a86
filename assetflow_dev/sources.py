"""The source probes of ``assetflow reconcile``: Kafka offsets, SQS DLQ depths, S3 prefixes against events.

Each probe compares one watcher's source with the watermarks ingest recorded and hands what is missing back to
the watcher's ingest function (``invoke``: the local runtime's invoke endpoint, or Lambda's Invoke API), in the
event shape that function receives from its event-source mapping. Ingest is idempotent on each message's
identity, so a replayed message recorded meanwhile changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.adapters.sources import SqsDeadLetterDepth
from assetflow.core.errors import StoreUnavailableError
from assetflow.core.filters import matches
from assetflow.core.watchers import S3ObjectCreated
from assetflow.core.watermarks import Watermark, kafka_gaps, kafka_source
from assetflow_dev import LOCAL_KAFKA_CONSUMER_TIMEOUTS
from assetflow_dev.pollers import kafka_event
from assetflow_dev.replay import FailureReplayer, FailureSources, Invoke

logger = logging.getLogger(__name__)

#: Records handed to ingest per invocation (the Kafka mappings' default batch).
REPLAY_BATCH = 100
_POLL_MS = 1000


class ReplayFailedError(RuntimeError):
    """The ingest function failed a replayed batch (it stays a gap for the next reconciliation)."""


class KafkaProbe:
    """A Kafka watcher: its consumer group's committed offsets against the offsets recorded, per partition.

    Every offset below the committed one was handed to ingest; one above the recorded watermark was given up
    (a batch that failed its retries went to the failures bucket and the mapping moved on) or lost. The gap is
    read back from the topic and sent to the ingest function.
    """

    kind = "kafka"

    def __init__(
        self,
        *,
        watcher: str,
        topic: str,
        group_id: str,
        bootstrap_servers: str,
        function: str,
        invoke: Invoke,
        event_source: str = "aws:kafka",
        event_source_arn: str | None = None,
    ) -> None:
        self.watcher = watcher
        self.topic = topic
        self.group_id = group_id
        self.bootstrap_servers = bootstrap_servers
        self.function = function
        self._invoke = invoke
        self.event_source = event_source
        self.event_source_arn = event_source_arn
        # As ingest names the cluster in identities: the MSK ARN, else the sorted bootstrap servers.
        servers = sorted(s for s in bootstrap_servers.split(",") if s)
        cluster = event_source_arn if event_source_arn else "bootstrap:" + ",".join(servers)
        self.source = kafka_source(cluster, topic)

    def _servers(self) -> list[str]:
        return [s for s in self.bootstrap_servers.split(",") if s]

    def findings(self, recorded: Sequence[Watermark]) -> list[dict[str, Any]]:
        """The gaps: committed offsets beyond the recorded ones (``kafka-gap`` findings)."""
        from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(
            bootstrap_servers=self._servers(), enable_auto_commit=False, **LOCAL_KAFKA_CONSUMER_TIMEOUTS
        )
        try:
            wanted = [
                TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or ())
            ]
            starts = consumer.beginning_offsets(wanted)
        finally:
            consumer.close()
        admin = KafkaAdminClient(bootstrap_servers=self._servers(), client_id="assetflow-reconcile")
        try:
            offsets = admin.list_group_offsets({self.group_id: wanted}).get(self.group_id, {})
        finally:
            admin.close()
        committed = {
            str(tp.partition): int(meta.offset)
            for tp, meta in offsets.items()
            if tp.topic == self.topic and meta.offset is not None and meta.offset >= 0
        }
        start = {str(tp.partition): int(offset) for tp, offset in starts.items()}
        through = {m.partition: m.recorded_through for m in recorded}
        gaps = kafka_gaps(self.source, through, committed, start=start)
        return [
            {
                "kind": "kafka-gap",
                "what": f"{self.topic}[{g.partition}] offsets {g.first}-{g.last}",
                "count": g.size,
                **g.to_json(),
            }
            for g in gaps
        ]

    def replay(self, finding: Mapping[str, Any]) -> int:
        """Read the gap's records back from the topic and send them to ingest, a batch at a time.

        Raises:
            ReplayFailedError: ingest failed a batch (what went through before it stays recorded).
        """
        from kafka import KafkaConsumer, TopicPartition

        partition, first, last = int(finding["partition"]), int(finding["first"]), int(finding["last"])
        tp = TopicPartition(self.topic, partition)
        consumer = KafkaConsumer(
            bootstrap_servers=self._servers(), enable_auto_commit=False, **LOCAL_KAFKA_CONSUMER_TIMEOUTS
        )
        sent = 0
        try:
            consumer.assign([tp])
            consumer.seek(tp, first)
            batch: list[Any] = []
            position = first
            idle = 0
            while position <= last and idle < 5:
                polled = consumer.poll(timeout_ms=_POLL_MS, max_records=REPLAY_BATCH).get(tp, [])
                idle = 0 if polled else idle + 1
                for record in polled:
                    if record.offset > last:
                        break
                    batch.append(record)
                    position = record.offset + 1
                    if len(batch) >= REPLAY_BATCH:
                        sent += self._send(batch)
                        batch = []
                if polled and polled[-1].offset >= last:
                    break
            if batch:
                sent += self._send(batch)
        finally:
            consumer.close()
        return sent

    def _send(self, records: Sequence[Any]) -> int:
        event = kafka_event(
            records,
            event_source=self.event_source,
            event_source_arn=self.event_source_arn,
            bootstrap_servers=self.bootstrap_servers,
        )
        response, error = self._invoke(self.function, event)
        failures = (response or {}).get("batchItemFailures") if isinstance(response, dict) else None
        if error is not None or failures:
            raise ReplayFailedError(f"{self.function} failed the replayed batch: {error or failures}")
        return len(records)


class SqsDeadLetterProbe(SqsDeadLetterDepth):
    """An SQS watcher: its dead-letter queue's depth (messages ingest gave up on), replayed to ingest."""

    def __init__(
        self,
        *,
        watcher: str,
        queue_arn: str,
        dead_letter_url: str,
        function: str,
        invoke: Invoke,
        sqs: Any,
    ) -> None:
        super().__init__(watcher=watcher, queue_arn=queue_arn, dead_letter_url=dead_letter_url, sqs=sqs)
        self.function = function
        self._invoke = invoke

    def replay(self, finding: Mapping[str, Any]) -> int:
        """Hand the dead letters back to ingest as records of the watched queue (deleted once stored)."""
        replayer = FailureReplayer(
            sources=FailureSources(
                functions={f"ingest-{self.watcher}": self.function},
                dead_letter_queues={self.watcher: (self.dead_letter_url, self.queue_arn)},
            ),
            invoke=self._invoke,
            sqs=self._sqs,
        )
        report = replayer.replay()
        if report.count("failed"):
            logger.warning("dead letters still failing", extra={"watcher": self.watcher})
        return report.count("replayed")


#: How long after its creation an object may still be on its way to ingest (EventBridge, the queue, a retry):
#: younger objects are left to their own event, so that a replay does not race it.
S3_SETTLE = timedelta(minutes=5)
#: How far an event's ingest time may be from the object's LastModified (clocks, S3's own lag).
_S3_SKEW = timedelta(minutes=5)
#: The ``replay-name`` replayed events carry (EventBridge's own replays name theirs there).
S3_REPLAY_NAME = "assetflow-reconcile"


def _etag(value: object) -> str:
    """An ETag as S3's events spell it: without the quotes a listing puts around it."""
    return str(value or "").strip('"')


class S3PrefixProbe:
    """An ``S3ObjectCreated`` watcher: the objects under its prefix (and suffix) that no event records.

    The watched prefix is listed (``ListObjectVersions`` when the bucket keeps versions, since each version is
    an event of its own; else ``ListObjectsV2``), and each object is looked up in what ingest recorded: the
    watcher's events of the asset since the oldest listed object was written (their extras name the ``bucket``,
    ``key``, ``etag`` and ``version_id``). The events are kept for good, unlike the dedupe records (15 days), so
    an old object is not taken for a missing one.

    An object is recorded when an event of this watcher names its key and its version id, or, for an object
    without a version (a bucket that keeps none, or a ``null`` version), its key and its ETag. This is the rule
    for replays too, because ingest's identity of an object without a version includes S3's ``sequencer``,
    which a listing does not give: a replayed object is sent without one (its identity is then the bucket, key
    and ETag alone, so two reconciliations replay it once), and it is only replayed when no event of the same
    key and content exists, whatever its sequencer was. An object is not missing while it may still be on its
    way (written less than ``settle`` ago): its own event, arriving after a replay, would carry the sequencer and
    be recorded a second time. For the same reason a reconciliation runs the watcher's dead-letter probe (the
    real events, with their sequencers) before this one.

    A missing object is replayed as EventBridge would deliver it: an SQS record of the watcher's queue whose
    body is an ``Object Created`` event (``replay-name`` says it was replayed), handed to the watcher's ingest.
    Objects that already exist when a watcher starts are listed too: give ``since`` to leave older ones out.
    """

    kind = "s3"

    def __init__(
        self,
        *,
        watcher: str,
        asset: str,
        source: S3ObjectCreated,
        s3: Any,
        events: Any,
        function: str,
        invoke: Invoke,
        queue_arn: str,
        since: datetime | None = None,
        settle: timedelta = S3_SETTLE,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.watcher = watcher
        self.asset = asset
        self.watched = source
        self._s3 = s3
        self._events = events
        self.function = function
        self._invoke = invoke
        self.queue_arn = queue_arn
        self.since = since
        self.settle = settle
        self._clock = clock
        self.source = f"s3:{source.bucket}/{source.prefix}"

    # ---- listing ---------------------------------------------------------------------------------------

    def _versioned(self) -> bool:
        status = self._s3.get_bucket_versioning(Bucket=self.watched.bucket).get("Status")
        return status in ("Enabled", "Suspended")

    def _objects(self) -> Iterator[dict[str, Any]]:
        """Every object (version) under the prefix ending in the suffix: ``key``, ``size``, ``etag``, ...."""
        bucket, prefix = self.watched.bucket, self.watched.prefix
        if self._versioned():
            pages = self._s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix)
            listed = (o for page in pages for o in page.get("Versions", []))
        else:
            pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            listed = (o for page in pages for o in page.get("Contents", []))
        for o in listed:
            key = str(o["Key"])
            if not self.watched.covers(key):
                continue
            version = o.get("VersionId")
            yield {
                "key": key,
                "size": int(o.get("Size", 0)),
                "etag": _etag(o.get("ETag")),
                "version_id": None if version in (None, "null") else str(version),
                "modified": o["LastModified"],
            }

    def _recorded(self, since: datetime, until: datetime) -> set[tuple[str, str]]:
        """``(key, version id)`` and ``(key, "etag:" + ETag)`` of the objects this watcher's events record."""
        seen: set[tuple[str, str]] = set()
        for event in self._events.events_between(self.asset, since - _S3_SKEW, until + _S3_SKEW):
            if (event.source or {}).get("watcher") != self.watcher:
                continue
            extra = event.extra or {}
            if extra.get("bucket") != self.watched.bucket or not isinstance(extra.get("key"), str):
                continue
            if extra.get("version_id"):
                seen.add((extra["key"], str(extra["version_id"])))
            if extra.get("etag"):
                seen.add((extra["key"], "etag:" + _etag(extra["etag"])))
        return seen

    def _wanted(self, obj: Mapping[str, Any]) -> bool:
        """Whether the watcher's filter keeps the object (one it filters out is quarantined, never an event)."""
        if self.watched.filter is None:
            return True
        described = {
            "bucket": self.watched.bucket,
            "key": obj["key"],
            "size": obj["size"],
            "etag": obj["etag"],
        }
        if obj["version_id"]:
            described["version_id"] = obj["version_id"]
        return matches(self.watched.filter, described)

    def findings(self, recorded: Sequence[Watermark]) -> list[dict[str, Any]]:
        """One ``s3-object`` finding per object (version) that no event of the watcher records.

        Raises:
            StoreUnavailableError: S3 could not be listed.
        """
        now = self._clock()
        try:
            objects = [
                o
                for o in self._objects()
                if o["modified"] <= now - self.settle and (self.since is None or o["modified"] >= self.since)
            ]
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailableError(
                f"listing s3://{self.watched.bucket}/{self.watched.prefix}: {exc}"
            ) from exc
        if not objects:
            return []
        seen = self._recorded(min(o["modified"] for o in objects), now)
        missing = [
            o
            for o in objects
            if (o["key"], o["version_id"] or "etag:" + o["etag"]) not in seen and self._wanted(o)
        ]
        return [
            {
                "kind": "s3-object",
                "what": f"s3://{self.watched.bucket}/{o['key']}"
                + (f" version {o['version_id']}" if o["version_id"] else f" ETag {o['etag']}"),
                "count": 1,
                "bucket": self.watched.bucket,
                "key": o["key"],
                "size": o["size"],
                "etag": o["etag"],
                "version_id": o["version_id"],
                "modified": o["modified"].isoformat(),
            }
            for o in sorted(missing, key=lambda o: (o["modified"], o["key"]))
        ]

    # ---- replay ----------------------------------------------------------------------------------------

    def message(self, finding: Mapping[str, Any]) -> dict[str, Any]:
        """The SQS record EventBridge's rule would have put on the watcher's queue for the object."""
        obj: dict[str, Any] = {"key": finding["key"], "size": int(finding["size"]), "etag": finding["etag"]}
        if finding.get("version_id"):
            obj["version-id"] = finding["version_id"]
        described = json.dumps(
            [finding["bucket"], finding["key"], finding.get("version_id"), finding["etag"]]
        )
        digest = hashlib.sha256(described.encode()).hexdigest()
        region = self.queue_arn.split(":")[3] if self.queue_arn.count(":") >= 5 else "us-east-1"
        account = self.queue_arn.split(":")[4] if self.queue_arn.count(":") >= 5 else ""
        envelope = {
            "version": "0",
            "id": f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
            "detail-type": "Object Created",
            "source": "aws.s3",
            "account": account,
            "time": str(finding.get("modified") or ""),
            "region": region,
            "resources": [f"arn:aws:s3:::{finding['bucket']}"],
            "replay-name": S3_REPLAY_NAME,
            "detail": {
                "version": "0",
                "bucket": {"name": finding["bucket"]},
                "object": obj,
                "reason": "PutObject",
            },
        }
        body = json.dumps(envelope)
        sent = str(int(self._clock().timestamp() * 1000))
        return {
            "messageId": f"reconcile-{digest[:32]}",
            "receiptHandle": f"reconcile-{digest[:32]}",
            "body": body,
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": sent,
                "SenderId": S3_REPLAY_NAME,
                "ApproximateFirstReceiveTimestamp": sent,
            },
            "messageAttributes": {},
            "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": region,
        }

    def replay(self, finding: Mapping[str, Any]) -> int:
        """Hand the object to the watcher's ingest as its ``Object Created`` event (1 once it went through).

        Raises:
            ReplayFailedError: ingest failed the record (the object stays missing for the next reconciliation).
        """
        response, error = self._invoke(self.function, {"Records": [self.message(finding)]})
        failures = (response or {}).get("batchItemFailures") if isinstance(response, dict) else None
        if error is not None or failures:
            raise ReplayFailedError(f"{self.function} failed the replayed object: {error or failures}")
        return 1


__all__ = [
    "REPLAY_BATCH",
    "S3_REPLAY_NAME",
    "S3_SETTLE",
    "KafkaProbe",
    "ReplayFailedError",
    "S3PrefixProbe",
    "SqsDeadLetterProbe",
]
