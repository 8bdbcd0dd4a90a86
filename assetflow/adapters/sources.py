"""Source probes the deployed sweep can run: an SQS watcher's dead-letter queue depth (``SourceProbe``).

What ingest gave up on sits in its queue's dead-letter queue; the sweep counts it every run (the
``SourceMessagesMissing`` metric) and ``assetflow reconcile`` replays it through the watcher's ingest. The
sweep does not replay dead letters itself: a poison message would go round again every few minutes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from assetflow.core.errors import StoreUnavailableError
from assetflow.core.watermarks import Watermark


class SqsDeadLetterDepth:
    """An SQS watcher's dead-letter queue: a ``dead-letters`` finding while it holds messages."""

    kind = "sqs"

    def __init__(self, *, watcher: str, queue_arn: str, dead_letter_url: str, sqs: Any) -> None:
        self.watcher = watcher
        self.queue_arn = queue_arn
        self.dead_letter_url = dead_letter_url
        self._sqs = sqs
        self.source = f"sqs:{queue_arn}"

    def findings(self, recorded: Sequence[Watermark]) -> list[dict[str, Any]]:
        """A ``dead-letters`` finding when the DLQ holds messages (its approximate depth).

        Raises:
            StoreUnavailableError: SQS is throttling or failing.
        """
        try:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self.dead_letter_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailableError(f"GetQueueAttributes {self.dead_letter_url}: {exc}") from exc
        depth = int(attributes.get("ApproximateNumberOfMessages", 0))
        if depth == 0:
            return []
        newest = max((m.position for m in recorded), default=None)
        return [
            {
                "kind": "dead-letters",
                "what": f"dead-letter queue of {self.watcher}",
                "count": depth,
                "queue": self.dead_letter_url,
                "recorded_through_ms": newest,
            }
        ]

    def replay(self, finding: Mapping[str, Any]) -> int:
        """Not from the sweep: ``assetflow reconcile`` replays dead letters (see the module docstring).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("dead letters are replayed by `assetflow reconcile`, not by the sweep")


__all__ = ["SqsDeadLetterDepth"]
