"""The composition root of the Lambda functions: settings from the environment, clients built once."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from assetflow.adapters.clients import aws_client
from assetflow.adapters.dynamodb import DynamoDbStore
from assetflow.adapters.eventbridge import EventBridgeBus
from assetflow.adapters.extras import S3ExtrasStore
from assetflow.core.catalog import Catalog
from assetflow.ports import ListenerBus, NoWakeUps, NullBus, WakeUps
from assetflow.usecases.announce import announce_once
from assetflow.usecases.evaluate import Evaluator
from assetflow.usecases.ingest import Ingest
from assetflow.usecases.job_state import RunStates
from assetflow.usecases.operate import Operations

if typing.TYPE_CHECKING:  # jsonschema loads only in the ingest functions, which use the translator
    from assetflow.adapters.messages import MessageTranslator


class SettingsError(ValueError):
    """A required environment variable is missing or invalid."""


def utc_now() -> datetime:
    """The clock the functions use (the core takes time as an input)."""
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What a function needs to know about its environment; names come from the stack's outputs."""

    table_name: str
    catalog_path: str
    event_bus_name: str | None = None
    runs_bucket: str | None = None
    emr_application_id: str | None = None
    emr_job_role_arn: str | None = None
    code_prefix: str = "code/"
    region: str | None = None
    path_map: Mapping[str, str] | None = None
    #: The watcher an ingest function serves (the stack deploys one per watcher; its queue's name is generated).
    watcher_name: str | None = None
    #: Where one-time wake-ups go (EventBridge Scheduler): their group, the role they run with, the tick
    #: function they invoke (unset in the tick function itself) and the dead-letter queue.
    wake_schedule_group: str | None = None
    wake_role_arn: str | None = None
    wake_target_arn: str | None = None
    wake_dlq_arn: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read settings from environment variables.

        Raises:
            SettingsError: TABLE_NAME or CATALOG_PATH is missing, or ASSETFLOW_PATH_MAP is not a JSON object.
        """
        missing = [name for name in ("TABLE_NAME", "CATALOG_PATH") if not environ.get(name)]
        if missing:
            raise SettingsError(f"missing environment variables: {', '.join(missing)}")
        path_map = None
        if environ.get("ASSETFLOW_PATH_MAP"):
            try:
                path_map = json.loads(environ["ASSETFLOW_PATH_MAP"])
            except ValueError as exc:
                raise SettingsError("ASSETFLOW_PATH_MAP must be a JSON object") from exc
            if not isinstance(path_map, dict):
                raise SettingsError("ASSETFLOW_PATH_MAP must be a JSON object")
        return cls(
            table_name=environ["TABLE_NAME"],
            catalog_path=environ["CATALOG_PATH"],
            event_bus_name=environ.get("EVENT_BUS_NAME") or None,
            runs_bucket=environ.get("RUNS_BUCKET") or None,
            emr_application_id=environ.get("EMR_APPLICATION_ID") or None,
            emr_job_role_arn=environ.get("EMR_JOB_ROLE_ARN") or None,
            code_prefix=environ.get("CODE_PREFIX", "code/"),
            region=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"),
            path_map=path_map,
            watcher_name=environ.get("WATCHER_NAME") or None,
            wake_schedule_group=environ.get("WAKE_SCHEDULE_GROUP") or None,
            wake_role_arn=environ.get("WAKE_ROLE_ARN") or None,
            wake_target_arn=environ.get("WAKE_TARGET_ARN") or None,
            wake_dlq_arn=environ.get("WAKE_DLQ_ARN") or None,
        )


class Dependencies:
    """Clients and services, built on first use and kept for the container's life."""

    def __init__(
        self,
        settings: Settings,
        *,
        session: boto3.session.Session | None = None,
        launcher: Any = None,
        endpoints: Mapping[str, str] | None = None,
        config: Config | None = None,
        wakeups: WakeUps | None = None,
    ) -> None:
        self.settings = settings
        self._session = session or boto3.session.Session()
        self._launcher = launcher
        self._wakeups = wakeups
        self._endpoints = dict(endpoints or {})
        self._config = config

    def client(self, service: str) -> Any:
        """A client for ``service``.

        Its endpoint is the one given for it in ``endpoints`` (the local runtime), else what boto3 reads
        from ``AWS_ENDPOINT_URL_*`` (on Lambda: none, the service's public endpoint).
        """
        return aws_client(
            service,
            session=self._session,
            endpoint=self._endpoints.get(service),
            region=self.settings.region,
            config=self._config,
        )

    @cached_property
    def catalog(self) -> Catalog:
        """The compiled catalog shipped with the function."""
        return Catalog.from_document(json.loads(Path(self.settings.catalog_path).read_text()))

    @cached_property
    def store(self) -> DynamoDbStore:
        """The DynamoDB store."""
        return DynamoDbStore(self.client("dynamodb"), self.settings.table_name)

    @cached_property
    def extras(self) -> S3ExtrasStore | None:
        """Where ingest and the API keep extras over the inline limit (``extras/`` of RUNS_BUCKET).

        None without RUNS_BUCKET: extras then stay inline up to the old limits, and larger ones are refused.
        """
        if not self.settings.runs_bucket:
            return None
        return S3ExtrasStore(self.client("s3"), self.settings.runs_bucket)

    @cached_property
    def bus(self) -> ListenerBus:
        """The listener bus (dropped when no bus is configured)."""
        if not self.settings.event_bus_name:
            return NullBus()
        return EventBridgeBus(self.client("events"), self.settings.event_bus_name)

    @cached_property
    def wakeups(self) -> WakeUps:
        """One-shot re-evaluations: EventBridge Scheduler one-time schedules (the local ticker when injected)."""
        if self._wakeups is not None:
            return self._wakeups
        s = self.settings
        if not (s.wake_schedule_group and s.wake_role_arn):
            return NoWakeUps()
        from assetflow.adapters.wakeups import EventBridgeSchedulerWakeUps

        return EventBridgeSchedulerWakeUps(
            self.client("scheduler"),
            group=s.wake_schedule_group,
            role_arn=s.wake_role_arn,
            target_arn=s.wake_target_arn,
            dead_letter_arn=s.wake_dlq_arn,
        )

    @cached_property
    def launcher(self) -> Any:
        """The EMR Serverless launcher."""
        if self._launcher is not None:
            return self._launcher
        from assetflow.adapters.emr import EmrServerlessLauncher

        s = self.settings
        if not (s.runs_bucket and s.emr_application_id and s.emr_job_role_arn):
            raise SettingsError(
                "RUNS_BUCKET, EMR_APPLICATION_ID and EMR_JOB_ROLE_ARN are needed to submit runs"
            )
        return EmrServerlessLauncher(
            emr_client=self.client("emr-serverless"),
            s3_client=self.client("s3"),
            application_id=s.emr_application_id,
            execution_role_arn=s.emr_job_role_arn,
            runs_bucket=s.runs_bucket,
            code_prefix=s.code_prefix,
            events_table=s.table_name,
            region=s.region,
            path_map=s.path_map,
        )

    @cached_property
    def messages(self) -> MessageTranslator:
        """The ingest translator over the catalog, with every watcher's JSON Schema checked and compiled.

        Raises:
            DefinitionError: a watcher's schema is not a valid JSON Schema, or WATCHER_NAME names no watcher
                (definition errors: the function fails rather than quarantine every message for them).
        """
        from assetflow.adapters.messages import MessageTranslator  # only ingest needs jsonschema

        return MessageTranslator(self.catalog, watcher=self.settings.watcher_name)

    @cached_property
    def ingest(self) -> Ingest:
        """Ingest over the store and the extras store."""
        return Ingest(store=self.store, extras=self.extras)

    @cached_property
    def catalog_digest(self) -> str:
        """The digest of the shipped catalog document (a new deployment of other definitions changes it)."""
        return hashlib.sha256(Path(self.settings.catalog_path).read_bytes()).hexdigest()[:32]

    def announce_catalog(self) -> None:
        """Announce the catalog once per digest (new assets and aliases to listeners); never fails the caller."""
        try:
            announce_once(self.store, self.bus, self.catalog, digest=self.catalog_digest, now=utc_now())
        except Exception:  # listeners are best effort; the next cold start tries again
            logging.getLogger(__name__).warning("catalog not announced", exc_info=True)

    @cached_property
    def evaluator(self) -> Evaluator:
        """The evaluator over the store, the launcher and the bus (the first one of a catalog announces it)."""
        self.announce_catalog()
        return Evaluator(
            catalog=self.catalog,
            store=self.store,
            launcher=self.launcher,
            bus=self.bus,
            clock=utc_now,
            wakeups=self.wakeups,
        )

    @cached_property
    def operations(self) -> Operations:
        """The operator's actions: trigger, cancel, replay, pause, unpause, backfill."""
        return Operations(
            catalog=self.catalog,
            store=self.store,
            submitter=self.evaluator.submitter,
            release=self.evaluator.release,
            clock=utc_now,
        )

    @cached_property
    def run_states(self) -> RunStates:
        """Job state changes into run states; a successful run's outlets into asset events."""
        if not self.settings.runs_bucket:
            raise SettingsError("RUNS_BUCKET is needed to read the outlet metadata of runs")
        from assetflow.adapters.emr import S3RunOutputs

        return RunStates(
            catalog=self.catalog,
            store=self.store,
            outputs=S3RunOutputs(self.client("s3"), self.settings.runs_bucket),
            evaluator=self.evaluator,
            clock=utc_now,
            job_lookup=getattr(self.launcher, "run_id_of_job", None),
            admit=self.operations.admit,
        )


_deps: Dependencies | None = None


def dependencies() -> Dependencies:
    """The container's dependencies, built once from the environment."""
    global _deps  # one composition per Lambda container
    if _deps is None:
        _deps = Dependencies(Settings.from_env(os.environ))
    return _deps
