"""Source reconciliation: each source's watermark against what the source says, and the gaps replayed.

Every watcher's source has a probe (``SourceProbe``): a Kafka topic's compares its consumer group's committed
offsets with the offsets recorded per partition, an SQS queue's reads its dead-letter queue's depth, an S3
watcher's lists its prefix against the objects its events record, and a new source kind (Kinesis shards) plugs
in as one more probe. What a probe finds is replayed through the watcher's own ingest function, which is
idempotent on each message's identity: a message recorded meanwhile is recognised, never recorded twice.
With ``dry_run`` nothing is replayed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assetflow.core.errors import AssetflowError
from assetflow.ports import SourceProbe, WatermarkStore

logger = logging.getLogger(__name__)


@dataclass
class SourceReport:
    """What reconciling one watcher's source found and replayed."""

    watcher: str
    kind: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    replayed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def found(self) -> int:
        """How many messages the findings count."""
        return sum(int(f.get("count", 0)) for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """``{"watcher", "kind", "found", "replayed", "findings", "errors"}``."""
        return {
            "watcher": self.watcher,
            "kind": self.kind,
            "found": self.found,
            "replayed": self.replayed,
            "findings": self.findings,
            "errors": self.errors,
        }


@dataclass
class ReconcileReport:
    """What a reconciliation found (messages a source holds that nothing recorded) and replayed."""

    dry_run: bool
    sources: list[SourceReport] = field(default_factory=list)

    @property
    def found(self) -> int:
        """Messages found missing, over every source."""
        return sum(s.found for s in self.sources)

    @property
    def replayed(self) -> int:
        """Messages handed back to ingest, over every source."""
        return sum(s.replayed for s in self.sources)

    @property
    def errors(self) -> list[str]:
        """Every source's errors, named by watcher."""
        return [f"{s.watcher}: {e}" for s in self.sources for e in s.errors]

    def to_json(self) -> dict[str, Any]:
        """``{"dry_run", "found", "replayed", "errors", "sources": [...]}``."""
        return {
            "dry_run": self.dry_run,
            "found": self.found,
            "replayed": self.replayed,
            "errors": self.errors,
            "sources": [s.to_json() for s in self.sources],
        }


class UnknownSourceError(AssetflowError, ValueError):
    """``--source`` names no watcher of the definitions."""


class SourceReconciler:
    """Compares every watcher's recorded watermark with its source and replays the gaps (see the module)."""

    def __init__(self, *, watermarks: WatermarkStore, probes: Sequence[SourceProbe]) -> None:
        self.watermarks = watermarks
        self.probes = list(probes)

    def reconcile(self, *, source: str | None = None, dry_run: bool = False) -> ReconcileReport:
        """Reconcile every watcher's source (or only ``source``, a watcher name).

        A probe that fails is reported with its error, and the others go on.

        Raises:
            UnknownSourceError: ``source`` names no watcher with a probe.
        """
        probes = [p for p in self.probes if source is None or p.watcher == source]
        if source is not None and not probes:
            known = ", ".join(sorted(p.watcher for p in self.probes)) or "none"
            raise UnknownSourceError(f"no source {source!r} to reconcile (watchers: {known})")
        report = ReconcileReport(dry_run=dry_run)
        for probe in probes:
            found = SourceReport(probe.watcher, probe.kind)
            report.sources.append(found)
            try:
                recorded = self.watermarks.watermarks(probe.source)
                found.findings = probe.findings(recorded)
            except Exception as exc:  # one source's failure does not stop the others
                found.errors.append(f"{type(exc).__name__}: {exc}")
                logger.warning("source not probed", extra={"watcher": probe.watcher, "error": str(exc)})
                continue
            if dry_run:
                continue
            for finding in found.findings:
                try:
                    found.replayed += probe.replay(finding)
                    if finding.get("kind") == "kafka-gap":
                        # The whole range went through ingest (offsets the topic lacks too): the gap is closed.
                        self.watermarks.close_gap(
                            probe.source, str(finding["partition"]), int(finding["last"])
                        )
                except Exception as exc:  # kept for the next reconciliation
                    found.errors.append(f"replay of {finding.get('what')}: {type(exc).__name__}: {exc}")
            logger.info(
                "source reconciled",
                extra={"watcher": probe.watcher, "found": found.found, "replayed": found.replayed},
            )
        return report


__all__ = ["ReconcileReport", "SourceReconciler", "SourceReport", "UnknownSourceError"]
