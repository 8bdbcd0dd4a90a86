"""Pipelines: one PySpark job on EMR Serverless, its schedule, its inlets and outlets."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from assetflow.core.conditions import Asset, AssetAlias, Condition, condition_from_json
from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.schedules import Schedule, as_schedule, schedule_from_json
from assetflow_job.contract import CONTEXT_ARGUMENT

PIPELINE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_ENTRY_POINT = re.compile(r"^(s3://[^\s]+|[A-Za-z0-9_./-]+)\.py$")

Outlet = Asset | AssetAlias


@dataclass(frozen=True)
class SparkJob:
    """A PySpark entry point with its arguments and Spark settings.

    ``entry_point`` is a ``.py`` path relative to the project (uploaded with the stack) or an ``s3://`` URI.

    Raises:
        DefinitionError: the entry point, arguments or settings are invalid.

    """

    entry_point: str
    arguments: tuple[str, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.entry_point, str) or not _ENTRY_POINT.match(self.entry_point):
            raise DefinitionError(
                f"SparkJob: entry_point {self.entry_point!r} must be a .py path such as 'spark_jobs/etl.py' "
                "or an s3:// URI"
            )
        if self.entry_point.startswith("/") or ".." in self.entry_point.split("/"):
            raise DefinitionError(
                f"SparkJob: entry_point {self.entry_point!r} must be relative to the project"
            )
        args = (self.arguments,) if isinstance(self.arguments, str) else tuple(self.arguments)
        if not all(isinstance(a, str) for a in args):
            raise DefinitionError("SparkJob: arguments must be strings")
        if any(a == CONTEXT_ARGUMENT or a.startswith(CONTEXT_ARGUMENT + "=") for a in args):
            raise DefinitionError("SparkJob: --assetflow-context is added by assetflow; do not pass it")
        conf = dict(self.spark_conf)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in conf.items()):
            raise DefinitionError("SparkJob: spark_conf keys and values must be strings")
        object.__setattr__(self, "arguments", args)
        object.__setattr__(self, "spark_conf", MappingProxyType(conf))

    def __hash__(self) -> int:
        return hash((self.entry_point, self.arguments, tuple(sorted(self.spark_conf.items()))))

    def to_json(self) -> dict[str, Any]:
        """``{"entry_point", "arguments", "spark_conf"}``."""
        return {
            "entry_point": self.entry_point,
            "arguments": list(self.arguments),
            "spark_conf": dict(sorted(self.spark_conf.items())),
        }


def _outlet_json(outlet: Outlet) -> dict[str, Any]:
    return outlet.to_json()


def _outlet_from_json(doc: Mapping[str, Any]) -> Outlet:
    condition = condition_from_json(doc)
    if not isinstance(condition, Asset | AssetAlias):
        raise DocumentError(f"an outlet or inlet is an asset or an alias, got {doc!r}")
    return condition


class Pipeline:
    """One PySpark job that runs when its schedule holds; its outlets become events when it succeeds.

    ``schedule`` is an asset condition (``a & b``, ``a | b``, a list meaning all-of), an
    :class:`AssetOrTimeSchedule` or a :class:`PartitionedAssetSchedule`. ``batch=False`` gives one run
    per event, for schedules where any single event satisfies the condition. ``max_active_runs`` holds
    further runs (their events stay queued) until a run ends.

    Raises:
        DefinitionError: any part of the pipeline is invalid; the message names the pipeline.

    """

    __slots__ = ("batch", "id", "inlets", "job", "max_active_runs", "outlets", "schedule")

    id: str
    schedule: Schedule
    job: SparkJob
    outlets: tuple[Outlet, ...]
    inlets: tuple[Outlet, ...]
    max_active_runs: int | None
    batch: bool

    def __init__(
        self,
        id: str,
        schedule: Schedule | Condition | Sequence[Condition],
        job: SparkJob,
        outlets: Sequence[Outlet] = (),
        inlets: Sequence[Outlet] = (),
        max_active_runs: int | None = None,
        batch: bool = True,
    ) -> None:
        if not isinstance(id, str) or not PIPELINE_ID.match(id):
            raise DefinitionError(
                f"Pipeline id {id!r}: 1-64 characters of letters, digits, '_' or '-', starting with a letter"
            )
        what = f"pipeline {id!r}"
        if not isinstance(job, SparkJob):
            raise DefinitionError(f"{what}: job must be a SparkJob(...), not {type(job).__name__}")
        for kind, items in (("outlets", outlets), ("inlets", inlets)):
            for item in items:
                if not isinstance(item, Asset | AssetAlias):
                    raise DefinitionError(
                        f"{what}: {kind} are Assets or AssetAliases, not {type(item).__name__}"
                    )
        if max_active_runs is not None and (
            isinstance(max_active_runs, bool) or not isinstance(max_active_runs, int) or max_active_runs < 1
        ):
            raise DefinitionError(f"{what}: max_active_runs must be a positive integer or None")
        sched = as_schedule(schedule, f"{what} schedule")
        if not isinstance(batch, bool):
            raise DefinitionError(f"{what}: batch must be True or False")
        if not batch and not sched.condition.is_any_of_leaves():
            raise DefinitionError(
                f"{what}: batch=False makes one run per event, which needs a schedule that any single event "
                "satisfies (one asset, an alias, or assets joined with |); this schedule needs several"
            )
        for name, value in (
            ("id", id),
            ("schedule", sched),
            ("job", job),
            ("outlets", tuple(dict.fromkeys(outlets))),
            ("inlets", tuple(dict.fromkeys(inlets))),
            ("max_active_runs", max_active_runs),
            ("batch", batch),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"Pipeline is immutable; cannot set {key!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pipeline):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"Pipeline({self.id!r}, schedule={self.schedule!r})"

    @property
    def condition(self) -> Condition:
        """The asset condition of the schedule."""
        return self.schedule.condition

    @property
    def partitioned(self) -> bool:
        """Whether the pipeline is partition-aware."""
        return self.schedule.partitioned

    def to_json(self) -> dict[str, Any]:
        """The catalog document's pipeline entry."""
        return {
            "id": self.id,
            "schedule": self.schedule.to_json(),
            "job": self.job.to_json(),
            "outlets": [_outlet_json(o) for o in self.outlets],
            "inlets": [_outlet_json(i) for i in self.inlets],
            "max_active_runs": self.max_active_runs,
            "batch": self.batch,
            "partitioned": self.partitioned,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Pipeline:
        """Rebuild a pipeline from its catalog entry.

        Raises:
            DocumentError: the entry is malformed.

        """
        try:
            job = doc["job"]
            return cls(
                id=doc["id"],
                schedule=schedule_from_json(doc["schedule"]),
                job=SparkJob(job["entry_point"], tuple(job["arguments"]), dict(job["spark_conf"])),
                outlets=[_outlet_from_json(o) for o in doc["outlets"]],
                inlets=[_outlet_from_json(i) for i in doc["inlets"]],
                max_active_runs=doc["max_active_runs"],
                batch=doc["batch"],
            )
        except (KeyError, TypeError, DefinitionError) as exc:
            raise DocumentError(f"invalid pipeline document: {exc}") from exc
