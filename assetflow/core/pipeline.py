"""Pipelines: one PySpark job on EMR Serverless, its schedule, its inlets and outlets."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from assetflow.core.conditions import Asset, AssetAlias, AssetRef, Condition, condition_from_json
from assetflow.core.errors import DefinitionError, DocumentError
from assetflow.core.schedules import Schedule, as_schedule, schedule_from_json
from assetflow_job.contract import CONTEXT_ARGUMENT

PIPELINE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_ENTRY_POINT = re.compile(r"^(s3://[^\s]+|[A-Za-z0-9_./-]+)\.py$")
_CODE_VERSION_MAX = 128

Outlet = Asset | AssetAlias


@dataclass(frozen=True)
class SparkJob:
    """A PySpark entry point with its arguments and Spark settings.

    ``entry_point`` is a ``.py`` path relative to the project (uploaded with the stack) or an ``s3://`` URI.
    ``code_version`` names the version of the job's logic (bump it when what the job computes changes): runs
    record it, and ``assetflow backfill PIPELINE --stale`` re-runs the successful runs of another version.

    Raises:
        DefinitionError: the entry point, arguments or settings are invalid.

    """

    entry_point: str
    arguments: tuple[str, ...] = ()
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    code_version: str | None = None

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
        version = self.code_version
        if version is not None and (
            not isinstance(version, str) or not version.strip() or len(version) > _CODE_VERSION_MAX
        ):
            raise DefinitionError(
                f"SparkJob: code_version must be a non-empty string of at most {_CODE_VERSION_MAX} characters "
                f"(such as '2' or '2026-11-26'), got {version!r}"
            )
        object.__setattr__(self, "arguments", args)
        object.__setattr__(self, "spark_conf", MappingProxyType(conf))

    def __hash__(self) -> int:
        return hash(
            (self.entry_point, self.arguments, tuple(sorted(self.spark_conf.items())), self.code_version)
        )

    def to_json(self) -> dict[str, Any]:
        """``{"entry_point", "arguments", "spark_conf"}``, and ``"code_version"`` when it is set."""
        doc: dict[str, Any] = {
            "entry_point": self.entry_point,
            "arguments": list(self.arguments),
            "spark_conf": dict(sorted(self.spark_conf.items())),
        }
        if self.code_version is not None:
            doc["code_version"] = self.code_version
        return doc


def _outlet_json(outlet: Outlet) -> dict[str, Any]:
    return outlet.to_json()


def _outlet_from_json(doc: Mapping[str, Any]) -> Outlet:
    condition = condition_from_json(doc)
    if not isinstance(condition, Asset | AssetAlias):
        raise DocumentError(f"an outlet or inlet is an asset or an alias, got {doc!r}")
    return condition


#: The longest window a pipeline may declare (debounce, max_wait, within).
MAX_WINDOW = timedelta(days=366)


def _window(value: object, name: str, what: str) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise DefinitionError(
            f"{what}: {name} must be a timedelta such as timedelta(minutes=5), not {type(value).__name__}"
        )
    if value < timedelta(seconds=1) or value > MAX_WINDOW:
        raise DefinitionError(
            f"{what}: {name} must be between one second and {MAX_WINDOW.days} days, got {value}"
        )
    return value


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _from_seconds(value: object) -> timedelta | None:
    return None if value is None else timedelta(seconds=float(value))  # type: ignore[arg-type]


class Pipeline:
    """One PySpark job that runs when its schedule holds; its outlets become events when it succeeds.

    ``schedule`` is an asset condition (``a & b``, ``a | b``, a list meaning all-of), ``None`` (manual only), a
    cron string, preset or ``timedelta`` (time only), or a schedule object (:class:`AssetOrTimeSchedule`,
    :class:`AssetAndTimeSchedule`, :class:`PartitionedAssetSchedule`, :class:`CronPartitionTimetable`).
    ``batch=False`` gives one run per event, for schedules where any single event satisfies the condition.
    ``max_active_runs`` holds further runs (their events stay queued) until a run ends.

    Event windows (batch pipelines on assets): ``debounce`` runs once no new event has come for that long;
    ``max_wait`` runs anyway when the oldest queued event is that old (a steady stream still runs); ``within``
    counts only events that recent towards the condition (older ones stay queued and ride along with the next
    run). ``skip_unchanged=True`` records but does not run for an event whose (asset, version) the pipeline
    has already consumed.

    Raises:
        DefinitionError: any part of the pipeline is invalid; the message names the pipeline.

    """

    __slots__ = (
        "batch",
        "debounce",
        "id",
        "inlets",
        "job",
        "max_active_runs",
        "max_wait",
        "outlets",
        "schedule",
        "skip_unchanged",
        "within",
    )

    id: str
    schedule: Schedule
    job: SparkJob
    outlets: tuple[Outlet, ...]
    inlets: tuple[Outlet, ...]
    max_active_runs: int | None
    batch: bool
    debounce: timedelta | None
    max_wait: timedelta | None
    within: timedelta | None
    skip_unchanged: bool

    def __init__(
        self,
        id: str,
        schedule: Schedule | Condition | Sequence[Condition] | str | timedelta | None,
        job: SparkJob,
        outlets: Sequence[Outlet] = (),
        inlets: Sequence[Outlet] = (),
        max_active_runs: int | None = None,
        batch: bool = True,
        *,
        debounce: timedelta | None = None,
        max_wait: timedelta | None = None,
        within: timedelta | None = None,
        skip_unchanged: bool = False,
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
                if isinstance(item, AssetRef):
                    raise DefinitionError(
                        f"{what}: {kind} name the asset itself (import it); Asset.ref(...) is for schedules"
                    )
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
        if not batch and not sched.runs_on_assets:
            raise DefinitionError(
                f"{what}: batch=False makes one run per event; under this schedule events start no runs"
            )
        if not batch and not sched.condition.is_any_of_leaves():
            raise DefinitionError(
                f"{what}: batch=False makes one run per event, which needs a schedule that any single event "
                "satisfies (one asset, an alias, or assets joined with |); this schedule needs several"
            )
        windows = {
            "debounce": _window(debounce, "debounce", what),
            "max_wait": _window(max_wait, "max_wait", what),
            "within": _window(within, "within", what),
        }
        self._check_windows(what, sched, batch, windows)
        if not isinstance(skip_unchanged, bool):
            raise DefinitionError(f"{what}: skip_unchanged must be True or False")
        if skip_unchanged and not sched.has_assets:
            raise DefinitionError(
                f"{what}: skip_unchanged=True skips unchanged asset events; this schedule takes none"
            )
        for name, value in (
            ("id", id),
            ("schedule", sched),
            ("job", job),
            ("outlets", tuple(dict.fromkeys(outlets))),
            ("inlets", tuple(dict.fromkeys(inlets))),
            ("max_active_runs", max_active_runs),
            ("batch", batch),
            *windows.items(),
            ("skip_unchanged", skip_unchanged),
        ):
            object.__setattr__(self, name, value)

    @staticmethod
    def _check_windows(
        what: str, sched: Schedule, batch: bool, windows: Mapping[str, timedelta | None]
    ) -> None:
        given = [name for name, value in windows.items() if value is not None]
        if not given:
            return
        if not sched.has_assets:
            raise DefinitionError(
                f"{what}: {', '.join(given)} apply to asset events; this schedule takes none"
            )
        if not batch:
            raise DefinitionError(
                f"{what}: {', '.join(given)} decide when a batch of events runs; batch=False runs each event at once"
            )
        debounce, max_wait = windows["debounce"], windows["max_wait"]
        if not sched.runs_on_assets and (debounce or max_wait):
            raise DefinitionError(
                f"{what}: debounce and max_wait delay runs that events start; under AssetAndTimeSchedule the "
                "tick starts runs (within= still limits which events count at the tick)"
            )
        if max_wait is not None and debounce is None:
            raise DefinitionError(
                f"{what}: max_wait bounds a debounce; without debounce= a run starts as soon as the condition holds"
            )
        if max_wait is not None and debounce is not None and max_wait < debounce:
            raise DefinitionError(
                f"{what}: max_wait ({max_wait}) must be at least debounce ({debounce}), or the debounce never applies"
            )

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
        """The asset condition of the schedule (``NO_ASSETS`` for manual and time-only schedules)."""
        return self.schedule.condition

    @property
    def asset_outlets(self) -> tuple[str, ...]:
        """The URIs of the declared asset outlets (not the aliases), in declaration order."""
        return tuple(o.uri for o in self.outlets if isinstance(o, Asset))

    @property
    def partitioned(self) -> bool:
        """Whether the pipeline's runs carry partition keys."""
        return self.schedule.partitioned

    def resolved(self, resolver: Callable[[AssetRef], Asset]) -> Pipeline:
        """The same pipeline with every ``Asset.ref(...)`` of its schedule resolved (itself when it has none).

        Raises:
            Whatever ``resolver`` raises for a reference it cannot resolve.

        """
        condition = self.condition.resolve(resolver)
        if condition is self.condition:
            return self
        return Pipeline(
            self.id,
            self.schedule.with_condition(condition),
            self.job,
            outlets=self.outlets,
            inlets=self.inlets,
            max_active_runs=self.max_active_runs,
            batch=self.batch,
            debounce=self.debounce,
            max_wait=self.max_wait,
            within=self.within,
            skip_unchanged=self.skip_unchanged,
        )

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
            "debounce_seconds": _seconds(self.debounce),
            "max_wait_seconds": _seconds(self.max_wait),
            "within_seconds": _seconds(self.within),
            "skip_unchanged": self.skip_unchanged,
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
                job=SparkJob(
                    job["entry_point"],
                    tuple(job["arguments"]),
                    dict(job["spark_conf"]),
                    job.get("code_version"),
                ),
                outlets=[_outlet_from_json(o) for o in doc["outlets"]],
                inlets=[_outlet_from_json(i) for i in doc["inlets"]],
                max_active_runs=doc["max_active_runs"],
                batch=doc["batch"],
                debounce=_from_seconds(doc.get("debounce_seconds")),
                max_wait=_from_seconds(doc.get("max_wait_seconds")),
                within=_from_seconds(doc.get("within_seconds")),
                skip_unchanged=doc.get("skip_unchanged", False),
            )
        except (KeyError, TypeError, ValueError, DefinitionError) as exc:
            raise DocumentError(f"invalid pipeline document: {exc}") from exc
