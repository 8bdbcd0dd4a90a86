"""Asset events and runs: the immutable records the scheduler reads and writes, with their JSON shapes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from assetflow.core.errors import DocumentError
from assetflow.core.jsonvalue import freeze_json, thaw_json
from assetflow_job import contract
from assetflow_job.contract import format_timestamp as format_timestamp  # the documents' one format


def parse_timestamp(text: str) -> datetime:
    """Parse a timestamp written by :func:`format_timestamp` (or any ISO-8601 with an offset).

    Raises:
        DocumentError: the text is not an aware ISO-8601 timestamp.

    """
    try:
        return contract.parse_timestamp(text)
    except ValueError as exc:
        raise DocumentError(f"not an aware ISO-8601 timestamp: {text!r} ({exc})") from exc


def derive_id(prefix: str, *parts: object) -> str:
    """A deterministic id from its parts, so retries and redeliveries produce the same id."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return f"{prefix}-{digest[:24]}"


@dataclass(frozen=True)
class AssetEvent:
    """One update of an asset: what changed (``extra``), what produced it (``source``), and when."""

    asset: str
    id: str
    timestamp: datetime
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: Mapping[str, Any] = field(default_factory=dict)
    partition_key: str | None = None
    #: The data version the event stands for (an S3 ETag, an Iceberg snapshot id, ``Metadata(version=)``);
    #: a ``skip_unchanged=True`` pipeline runs at most once per (asset, version).
    version: str | None = None

    def __post_init__(self) -> None:
        if not self.asset or not self.id:
            raise ValueError("an asset event needs an asset URI and an id")
        if self.version is not None and (not isinstance(self.version, str) or not self.version):
            raise ValueError("an asset event's version is a non-empty string or None")
        object.__setattr__(self, "timestamp", parse_timestamp(format_timestamp(self.timestamp)))
        object.__setattr__(self, "extra", freeze_json(dict(self.extra), "event extra"))
        object.__setattr__(self, "source", freeze_json(dict(self.source), "event source"))

    def __hash__(self) -> int:
        return hash((self.asset, self.id))

    @property
    def sort_key(self) -> tuple[datetime, str]:
        """Events are ordered by (timestamp, id)."""
        return (self.timestamp, self.id)

    @property
    def from_partitioned_run(self) -> bool:
        """Whether a partitioned run produced this event (it then triggers only partition-aware pipelines)."""
        return self.partition_key is not None and self.source.get("type") == "run"

    def to_json(self) -> dict[str, Any]:
        """DESIGN §5's event shape, with ``"version"`` only when the event carries one."""
        doc: dict[str, Any] = {
            "asset": self.asset,
            "id": self.id,
            "timestamp": format_timestamp(self.timestamp),
            "extra": thaw_json(self.extra),
            "source": thaw_json(self.source),
            "partition_key": self.partition_key,
        }
        if self.version is not None:
            doc["version"] = self.version
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> AssetEvent:
        """Rebuild an event from its JSON shape.

        Raises:
            DocumentError: the document is malformed.

        """
        try:
            return cls(
                asset=doc["asset"],
                id=doc["id"],
                timestamp=parse_timestamp(doc["timestamp"]),
                extra=doc.get("extra") or {},
                source=doc.get("source") or {},
                partition_key=doc.get("partition_key"),
                version=doc.get("version"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DocumentError(f"invalid asset event document: {exc}") from exc


def group_events(events: Iterable[AssetEvent]) -> dict[str, tuple[AssetEvent, ...]]:
    """Events per asset URI (keys sorted), each list ordered by (timestamp, id)."""
    grouped: dict[str, list[AssetEvent]] = {}
    for event in events:
        grouped.setdefault(event.asset, []).append(event)
    return {uri: tuple(sorted(grouped[uri], key=lambda e: e.sort_key)) for uri in sorted(grouped)}


class RunState(StrEnum):
    """A run's state; ``queued`` and ``running`` are active."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        """Whether the run still counts against ``max_active_runs``."""
        return self in (RunState.QUEUED, RunState.RUNNING)


# Which states may follow which: a late RUNNING after SUCCESS, or a repeated SUCCESS, is ignored.
_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: frozenset({RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED}),
    RunState.SUCCESS: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

# EMR Serverless job run states; CANCELLING changes nothing until CANCELLED arrives.
EMR_JOB_STATES: dict[str, RunState | None] = {
    "SUBMITTED": RunState.QUEUED,
    "PENDING": RunState.QUEUED,
    "SCHEDULED": RunState.QUEUED,
    "QUEUED": RunState.QUEUED,
    "RUNNING": RunState.RUNNING,
    "SUCCESS": RunState.SUCCESS,
    "FAILED": RunState.FAILED,
    "CANCELLING": None,
    "CANCELLED": RunState.CANCELLED,
}


def can_transition(current: RunState, new: RunState) -> bool:
    """Whether a run in ``current`` may move to ``new`` (never backwards, never out of a final state)."""
    return new in _TRANSITIONS[current]


def previous_states(new: RunState) -> frozenset[RunState]:
    """The states from which a run may move to ``new``: the condition of the store's update."""
    return frozenset(state for state, targets in _TRANSITIONS.items() if new in targets)


#: The scheme of the outlet-metadata token of runs made now (``Run.outlet_token_scheme``); runs made before it
#: was introduced have scheme 1.
OUTLET_TOKEN_SCHEME = 2

#: What started a run (a run's ``triggered_by``): asset events, a time tick, an operator, a replay of
#: another run, or a backfill.
TRIGGERS = ("assets", "time", "manual", "replay", "backfill")


@dataclass(frozen=True)
class Run:
    """One run of a pipeline, with the events that triggered it (empty for a time tick or a manual run).

    ``triggered_by`` is one of :data:`TRIGGERS`; when not given it is ``time`` for a run with a
    ``scheduled_time`` and ``assets`` otherwise (the two kinds the scheduler makes). ``conf`` is the run's
    configuration (a JSON object, or None), as Airflow's ``dag_run.conf``; ``replay_of`` names the run a
    replay repeats.
    """

    run_id: str
    pipeline: str
    state: RunState
    created_at: datetime
    partition_key: str | None = None
    job_run_id: str | None = None
    triggering_asset_events: Mapping[str, tuple[AssetEvent, ...]] = field(default_factory=dict)
    scheduled_time: datetime | None = None
    #: Why the job service did not take the run the last time it failed to (None while no attempt failed; kept
    #: for operators after a later attempt succeeds); a run failed for a refused submission keeps its reason.
    submission_error: str | None = None
    triggered_by: str | None = None
    conf: Mapping[str, Any] | None = None
    replay_of: str | None = None
    #: When the run reached its final state (as first recorded: a repeated state change keeps it).
    ended_at: datetime | None = None
    #: The job's ``code_version`` when the run was made (None: the job declares none).
    code_version: str | None = None
    #: The run whose outputs this one makes again with the current code (``backfill --stale``).
    rerun_of: str | None = None
    #: How the secret token in the place its job writes outlet metadata to is made (``adapters.run_tokens``): a
    #: run keeps the scheme it was made with, so a run made before the current scheme is read where it wrote.
    outlet_token_scheme: int = field(default=OUTLET_TOKEN_SCHEME, compare=False)

    def __post_init__(self) -> None:
        for name, moment in (
            ("created_at", self.created_at),
            ("scheduled_time", self.scheduled_time),
            ("ended_at", self.ended_at),
        ):
            if moment is not None and (moment.tzinfo is None or moment.utcoffset() is None):
                raise ValueError(f"a run's {name} must be timezone-aware")
        if self.triggered_by is None:
            object.__setattr__(self, "triggered_by", "time" if self.scheduled_time else "assets")
        elif self.triggered_by not in TRIGGERS:
            raise ValueError(f"a run's triggered_by is one of {list(TRIGGERS)}, not {self.triggered_by!r}")
        if self.conf is not None:
            if not isinstance(self.conf, Mapping):
                raise ValueError("a run's conf is a JSON object or None")
            object.__setattr__(self, "conf", freeze_json(dict(self.conf), "run conf"))
        if (self.replay_of is None) != (self.triggered_by != "replay"):
            raise ValueError("a run has replay_of exactly when it is triggered_by 'replay'")

    @property
    def triggering_events(self) -> tuple[AssetEvent, ...]:
        """All triggering events, ordered by (timestamp, id)."""
        return tuple(
            sorted(
                (e for evs in self.triggering_asset_events.values() for e in evs), key=lambda e: e.sort_key
            )
        )

    def to_json(self) -> dict[str, Any]:
        """DESIGN §5's run shape with ``scheduled_time``, ``triggered_by``, ``conf``, ``ended_at``; others when set.

        ``ended_at`` is when the run reached its final state (None while it is queued or running). Only when set:
        ``replay_of``, ``code_version`` and ``rerun_of``; ``outlet_token_scheme`` for a run of an older scheme.
        """
        doc: dict[str, Any] = {
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "state": self.state.value,
            "created_at": format_timestamp(self.created_at),
            "partition_key": self.partition_key,
            "job_run_id": self.job_run_id,
            "triggering_asset_events": {
                uri: [e.to_json() for e in events] for uri, events in self.triggering_asset_events.items()
            },
            "scheduled_time": format_timestamp(self.scheduled_time) if self.scheduled_time else None,
            "submission_error": self.submission_error,
            "triggered_by": self.triggered_by,
            "conf": None if self.conf is None else thaw_json(self.conf),
            "ended_at": format_timestamp(self.ended_at) if self.ended_at else None,
        }
        if self.replay_of is not None:
            doc["replay_of"] = self.replay_of
        if self.code_version is not None:
            doc["code_version"] = self.code_version
        if self.rerun_of is not None:
            doc["rerun_of"] = self.rerun_of
        if self.outlet_token_scheme != OUTLET_TOKEN_SCHEME:
            doc["outlet_token_scheme"] = self.outlet_token_scheme
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Run:
        """Rebuild a run from its JSON shape.

        Raises:
            DocumentError: the document is malformed.

        """
        try:
            scheduled = doc.get("scheduled_time")
            ended = doc.get("ended_at")
            return cls(
                run_id=doc["run_id"],
                pipeline=doc["pipeline"],
                state=RunState(doc["state"]),
                created_at=parse_timestamp(doc["created_at"]),
                partition_key=doc.get("partition_key"),
                job_run_id=doc.get("job_run_id"),
                triggering_asset_events={
                    uri: tuple(AssetEvent.from_json(e) for e in events)
                    for uri, events in doc.get("triggering_asset_events", {}).items()
                },
                scheduled_time=parse_timestamp(scheduled) if scheduled else None,
                submission_error=doc.get("submission_error"),
                triggered_by=doc.get("triggered_by"),
                conf=doc.get("conf"),
                replay_of=doc.get("replay_of"),
                ended_at=parse_timestamp(ended) if ended else None,
                code_version=doc.get("code_version"),
                rerun_of=doc.get("rerun_of"),
                outlet_token_scheme=int(doc.get("outlet_token_scheme", OUTLET_TOKEN_SCHEME)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DocumentError(f"invalid run document: {exc}") from exc
