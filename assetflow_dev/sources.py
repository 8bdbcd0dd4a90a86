"""The source probes of ``assetflow reconcile``: Kafka consumer groups against recorded offsets, SQS DLQ depths.

Each probe compares one watcher's source with the watermarks ingest recorded and hands what is missing back to
the watcher's ingest function (``invoke``: the local runtime's invoke endpoint, or Lambda's Invoke API), in the
event shape that function receives from its event-source mapping. Ingest is idempotent on each message's
identity, so a replayed message recorded meanwhile changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from assetflow.adapters.sources import SqsDeadLetterDepth
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


__all__ = ["REPLAY_BATCH", "KafkaProbe", "ReplayFailedError", "SqsDeadLetterProbe"]
