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

from assetflow.adapters.eventbridge import parse_detail_types

# Each part is imported when a function first builds it: a function's cold start pays only for its own path
# (the ingest functions never load the evaluator, the API never jsonschema, none boto3).
if typing.TYPE_CHECKING:
    from botocore.config import Config

    from assetflow.adapters.dynamodb import DynamoDbStore
    from assetflow.adapters.extras import S3ExtrasStore
    from assetflow.adapters.messages import MessageTranslator
    from assetflow.core.catalog import Catalog
    from assetflow.ports import ListenerBus, WakeUps
    from assetflow.usecases.evaluate import Evaluator
    from assetflow.usecases.expectations import Expectations
    from assetflow.usecases.ingest import Ingest
    from assetflow.usecases.job_state import RunStates
    from assetflow.usecases.operate import Operations
    from assetflow.usecases.reconcile import Reconciler
    from assetflow.usecases.sources import SourceReconciler


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
    #: The KMS HMAC key of per-run secrets (where a run's outlet metadata goes); None: the plain layout.
    run_token_key: str | None = None
    #: The listener event types published (``LISTENER_EVENTS``, comma-separated); None: all of them.
    listener_events: frozenset[str] | None = None
    #: Assets whose events are spread over several partitions (``ASSETFLOW_EVENT_SHARDS``: ``{uri: n}``).
    event_shards: Mapping[str, int] | None = None
    #: Where one-time wake-ups go (EventBridge Scheduler): their group, the role they run with, the tick
    #: function they invoke (unset in the tick function itself) and the dead-letter queue.
    wake_schedule_group: str | None = None
    wake_role_arn: str | None = None
    wake_target_arn: str | None = None
    wake_dlq_arn: str | None = None
    #: The SQS watchers' dead-letter queues the sweep counts (``WATCHER_DEAD_LETTERS``:
    #: ``{watcher: {"queue_arn", "dlq_url"}}``).
    watcher_dead_letters: Mapping[str, Mapping[str, str]] | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read settings from environment variables.

        Raises:
            SettingsError: TABLE_NAME or CATALOG_PATH is missing, or ASSETFLOW_PATH_MAP is not a JSON object.
        """
        missing = [name for name in ("TABLE_NAME", "CATALOG_PATH") if not environ.get(name)]
        if missing:
            raise SettingsError(f"missing environment variables: {', '.join(missing)}")
        path_map = _json_object(environ, "ASSETFLOW_PATH_MAP")
        try:
            listener_events = parse_detail_types(environ.get("LISTENER_EVENTS"))
        except ValueError as exc:
            raise SettingsError(f"LISTENER_EVENTS: {exc}") from exc
        event_shards = _json_object(environ, "ASSETFLOW_EVENT_SHARDS")
        if event_shards is not None and not all(isinstance(n, int) and n >= 1 for n in event_shards.values()):
            raise SettingsError("ASSETFLOW_EVENT_SHARDS must map asset URIs to shard counts (1 or more)")
        dead_letters = _json_object(environ, "WATCHER_DEAD_LETTERS")
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
            run_token_key=environ.get("RUN_TOKEN_KEY") or None,
            listener_events=listener_events,
            event_shards=event_shards,
            wake_schedule_group=environ.get("WAKE_SCHEDULE_GROUP") or None,
            wake_role_arn=environ.get("WAKE_ROLE_ARN") or None,
            wake_target_arn=environ.get("WAKE_TARGET_ARN") or None,
            wake_dlq_arn=environ.get("WAKE_DLQ_ARN") or None,
            watcher_dead_letters=dead_letters,
        )


def _json_object(environ: Mapping[str, str], name: str) -> dict[str, Any] | None:
    """The JSON object an environment variable holds; None when it is unset or empty.

    Raises:
        SettingsError: it holds something else than a JSON object.
    """
    if not environ.get(name):
        return None
    try:
        found = json.loads(environ[name])
    except ValueError as exc:
        raise SettingsError(f"{name} must be a JSON object") from exc
    if not isinstance(found, dict):
        raise SettingsError(f"{name} must be a JSON object")
    return found


class Dependencies:
    """Clients and services, built on first use and kept for the container's life."""

    def __init__(
        self,
        settings: Settings,
        *,
        session: Any = None,
        launcher: Any = None,
        endpoints: Mapping[str, str] | None = None,
        config: Config | None = None,
        wakeups: WakeUps | None = None,
    ) -> None:
        self.settings = settings
        self._session = session  # a boto3 or botocore session; None: the process's botocore session
        self._launcher = launcher
        self._wakeups = wakeups
        self._endpoints = dict(endpoints or {})
        self._config = config

    def client(self, service: str) -> Any:
        """A client for ``service``.

        Its endpoint is the one given for it in ``endpoints`` (the local runtime), else what boto3 reads
        from ``AWS_ENDPOINT_URL_*`` (on Lambda: none, the service's public endpoint).
        """
        from assetflow.adapters.clients import aws_client
        from assetflow.adapters.tracing import trace_calls

        client = aws_client(
            service,
            session=self._session,
            endpoint=self._endpoints.get(service),
            region=self.settings.region,
            config=self._config,
        )
        return trace_calls(client)

    @cached_property
    def catalog(self) -> Catalog:
        """The compiled catalog shipped with the function."""
        from assetflow.core.catalog import Catalog

        return Catalog.from_document(json.loads(Path(self.settings.catalog_path).read_text()))

    @cached_property
    def store(self) -> DynamoDbStore:
        """The DynamoDB store (an asset's summary gets its declared name from the catalog, when it is made)."""
        from assetflow.adapters.dynamodb import DynamoDbStore

        store = DynamoDbStore(
            self.client("dynamodb"), self.settings.table_name, event_shards=self.settings.event_shards
        )

        def asset_name(uri: str) -> str | None:
            known = self.catalog.assets.get(uri)
            return known.name if known else None

        store.asset_name = asset_name
        return store

    @cached_property
    def extras(self) -> S3ExtrasStore | None:
        """Where ingest and the API keep extras over the inline limit (``extras/`` of RUNS_BUCKET).

        None without RUNS_BUCKET: extras then stay inline up to the old limits, and larger ones are refused.
        """
        if not self.settings.runs_bucket:
            return None
        from assetflow.adapters.extras import S3ExtrasStore

        return S3ExtrasStore(self.client("s3"), self.settings.runs_bucket)

    @cached_property
    def bus(self) -> ListenerBus:
        """The listener bus (dropped when no bus is configured)."""
        from assetflow.ports import NullBus

        if not self.settings.event_bus_name or self.settings.listener_events == frozenset():
            return NullBus()
        from assetflow.adapters.eventbridge import EventBridgeBus

        return EventBridgeBus(
            self.client("events"), self.settings.event_bus_name, detail_types=self.settings.listener_events
        )

    @cached_property
    def run_tokens(self) -> Any:
        """Per-run secrets from the KMS HMAC key (None without RUN_TOKEN_KEY)."""
        if not self.settings.run_token_key:
            return None
        from assetflow.adapters.run_tokens import KmsRunTokens

        return KmsRunTokens(self.client("kms"), self.settings.run_token_key)

    @cached_property
    def wakeups(self) -> WakeUps:
        """One-shot re-evaluations: EventBridge Scheduler one-time schedules (the local ticker when injected)."""
        if self._wakeups is not None:
            return self._wakeups
        s = self.settings
        if not (s.wake_schedule_group and s.wake_role_arn):
            from assetflow.ports import NoWakeUps

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
            run_tokens=self.run_tokens,
            event_shards=s.event_shards,
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
        from assetflow.usecases.ingest import Ingest

        return Ingest(store=self.store, extras=self.extras)

    @cached_property
    def catalog_digest(self) -> str:
        """The digest of the shipped catalog document (a new deployment of other definitions changes it)."""
        return hashlib.sha256(Path(self.settings.catalog_path).read_bytes()).hexdigest()[:32]

    @cached_property
    def catalog_announced(self) -> bool:
        """Announce the catalog once per digest (new assets and aliases to listeners); never fails the caller.

        The evaluator function does, at its first batch in a container: it is the one that owns the assets' and
        aliases' records (the other functions' grants do not reach them). False when it could not this time.
        """
        from assetflow.usecases.announce import announce_once

        try:
            announce_once(self.store, self.bus, self.catalog, digest=self.catalog_digest, now=utc_now())
        except Exception:  # listeners are best effort; the next cold start tries again
            logging.getLogger(__name__).warning("catalog not announced", exc_info=True)
            return False
        return True

    @cached_property
    def evaluator(self) -> Evaluator:
        """The evaluator over the store, the launcher and the bus."""
        from assetflow.usecases.evaluate import Evaluator

        return Evaluator(
            catalog=self.catalog,
            store=self.store,
            launcher=self.launcher,
            bus=self.bus,
            clock=utc_now,
            wakeups=self.wakeups,
            extras=self.extras,
        )

    @cached_property
    def expectations(self) -> Expectations:
        """Expected arrivals: deadline checks (one-time schedules beside the wake-ups), misses to ``late(a)``."""
        from assetflow.ports import NoDeadlines
        from assetflow.usecases.expectations import Expectations

        wakeups = self.wakeups
        deadlines = wakeups if callable(getattr(wakeups, "check_at", None)) else NoDeadlines()
        return Expectations(
            catalog=self.catalog,
            store=self.store,
            marks=self.store,
            deadlines=deadlines,  # type: ignore[arg-type]
            clock=utc_now,
            bus=self.bus,
            route=lambda events: self.evaluator.handle_batch(events),  # built only for fallbacks
        )

    @cached_property
    def source_reconciler(self) -> SourceReconciler:
        """The sources the sweep can probe from here: the SQS watchers' dead-letter queues (their depths)."""
        from assetflow.adapters.sources import SqsDeadLetterDepth
        from assetflow.usecases.sources import SourceReconciler

        queues = self.settings.watcher_dead_letters or {}
        probes = [
            SqsDeadLetterDepth(
                watcher=watcher,
                queue_arn=q["queue_arn"],
                dead_letter_url=q["dlq_url"],
                sqs=self.client("sqs"),
            )
            for watcher, q in sorted(queues.items())
        ]
        return SourceReconciler(watermarks=self.store, probes=probes)

    @cached_property
    def operations(self) -> Operations:
        """The operator's actions: trigger, cancel, replay, pause, unpause, backfill."""
        from assetflow.usecases.operate import Operations

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
        from assetflow.usecases.job_state import RunStates

        return RunStates(
            catalog=self.catalog,
            store=self.store,
            outputs=S3RunOutputs(self.client("s3"), self.settings.runs_bucket, run_tokens=self.run_tokens),
            evaluator=self.evaluator,
            clock=utc_now,
            job_lookup=getattr(self.launcher, "run_id_of_job", None),
            extras=self.extras,
            admit=self.operations.admit,
            releases=self.store,
        )

    @cached_property
    def reconciler(self) -> Reconciler:
        """The reconciliation sweep: runs against the job service's job runs, queues against conditions.

        Raises:
            SettingsError: the launcher cannot tell job run states (it has no ``job_run_status``).
        """
        job_runs = self.launcher
        if not callable(getattr(job_runs, "job_run_status", None)):
            raise SettingsError("the launcher cannot tell job run states (job_run_status)")
        from assetflow.usecases.reconcile import Reconciler

        return Reconciler(
            catalog=self.catalog,
            store=self.store,
            job_runs=job_runs,
            launcher=self.launcher,
            run_states=self.run_states,
            evaluator=self.evaluator,
            clock=utc_now,
        )


_deps: Dependencies | None = None


def dependencies() -> Dependencies:
    """The container's dependencies, built once from the environment."""
    global _deps  # one composition per Lambda container
    if _deps is None:
        _deps = Dependencies(Settings.from_env(os.environ))
    return _deps
