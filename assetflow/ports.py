"""The ports the use cases depend on; adapters implement them (DynamoDB, EMR Serverless, EventBridge)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from assetflow.core.errors import AssetflowError
from assetflow.core.events import Run
from assetflow.core.pipeline import Pipeline


class SubmissionError(AssetflowError):
    """A run could not be submitted now (throttled, a quota, a service error); it stays queued and is retried."""


class SubmissionRejectedError(AssetflowError):
    """The job service refused the run as asked (validation, access, a missing resource).

    Retrying the same request cannot help until the deployment changes; the run stays queued with the
    reason for operators and is tried again with the pipeline's next evaluation.
    """


class Launcher(Protocol):
    """Starts a run's Spark job; idempotent on the run id (EMR's ``clientToken``)."""

    def submit(self, run: Run, pipeline: Pipeline) -> str:
        """Start the job; returns the job run id.

        Raises:
            SubmissionError: the job could not be started now (throttled, refused); the run is retried.
        """
        ...


class ListenerBus(Protocol):
    """Publishes listener events (asset created, alias created, asset changed, event emitted)."""

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event on the bus; failures are logged, never raised (listeners are best effort)."""
        ...


class NullBus:
    """A bus that drops every event (for tests and runtimes without listeners)."""

    def publish(self, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Drop the event."""
