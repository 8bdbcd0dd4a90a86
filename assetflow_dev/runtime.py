"""The local runtime: the whole system on one machine, no Docker and no AWS account (DESIGN §4).

It starts the emulators, creates the catalog's resources as the stack would, and drives the same Lambda
handlers with the same event shapes: pollers stand in for the event-source mappings, a Spark launcher for
EMR Serverless job runs (reporting EventBridge-shaped state changes), a local server for API Gateway and a
ticker for EventBridge Scheduler. Each function is its module's ``lambda_handler``, wired here explicitly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType, TracebackType
from typing import IO, Any, Literal, Self

import boto3

from assetflow.adapters.emr import RUN_MOVING_STATES, EmrServerlessLauncher
from assetflow.adapters.run_tokens import KmsRunTokens
from assetflow.composition import Dependencies, Settings
from assetflow.core.catalog import Catalog
from assetflow.core.watchers import KafkaTopic
from assetflow.functions import (
    _observe,
    handle_api,
    handle_asset_events,
    handle_job_state,
    handle_kafka_records,
    handle_kinesis_records,
    handle_reconcile,
    handle_schedule_tick,
    handle_sqs_messages,
)
from assetflow.loader import find_project_root, load_catalog, missing_entry_points
from assetflow_dev.api_server import LocalApiServer
from assetflow_dev.aws import LOCAL_AWS_ENV, LOCAL_CLIENT_CONFIG, LOCAL_CLIENT_KWARGS, LOCAL_REGION, client
from assetflow_dev.emulators import DynamoDbLocal, Emulator, MotoServer, TansuBroker
from assetflow_dev.failures import AsyncInvocation, S3FailureSink
from assetflow_dev.invoke_server import LocalInvokeServer
from assetflow_dev.launcher import EmrApiLauncher, LocalSparkLauncher
from assetflow_dev.mirror import mirroring
from assetflow_dev.moto_server import KINESIS_PUTS_PATH
from assetflow_dev.pollers import (
    MAX_CONCURRENT_SHARDS,
    KafkaPoller,
    KinesisPoller,
    SqsPoller,
    StreamPoller,
    lambda_context,
)
from assetflow_dev.resources import LocalResources, ResourceNames, provision
from assetflow_dev.spark_pool import WARM_IDLE_STOP_SECONDS
from assetflow_dev.sweeper import LOCAL_SWEEP_SECONDS, Sweeper
from assetflow_dev.ticker import ScheduleTicker, time_schedules

logger = logging.getLogger(__name__)

#: This repository's root (for its own tests); a runtime's jobs come from the project root instead.
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Where `assetflow dev up` writes its connection details, relative to the working directory.
DEV_CONFIG_NAME = "dev.json"

#: The module of each function, by the name the stack deploys it under; its ``lambda_handler`` is called
#: with the same event shapes as on Lambda.
FUNCTION_MODULES: Mapping[str, ModuleType] = MappingProxyType(
    {
        "sqs-ingest": handle_sqs_messages,
        "kafka-ingest": handle_kafka_records,
        "kinesis-ingest": handle_kinesis_records,
        "evaluator": handle_asset_events,
        "run-state": handle_job_state,
        "schedule-tick": handle_schedule_tick,
        "reconcile": handle_reconcile,
        "api": handle_api,
    }
)
#: How often an idle Kinesis shard is read (Lambda's mappings read each shard about once a second).
KINESIS_IDLE_POLL_SECONDS = 1.0
#: What a local function answers to (its Lambda context, its failure records, the local invoke endpoint).
LOCAL_FUNCTION_PREFIX = "assetflow-local-"

#: boto3's service-specific endpoint variables for the services the runtime emulates.
_ENDPOINT_VARIABLES: Mapping[str, str] = {
    "sqs": "AWS_ENDPOINT_URL_SQS",
    "dynamodb": "AWS_ENDPOINT_URL_DYNAMODB",
    "dynamodbstreams": "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "s3": "AWS_ENDPOINT_URL_S3",
    "events": "AWS_ENDPOINT_URL_EVENTBRIDGE",
    "kinesis": "AWS_ENDPOINT_URL_KINESIS",
    "emr-serverless": "AWS_ENDPOINT_URL_EMR_SERVERLESS",
    "kms": "AWS_ENDPOINT_URL_KMS",
}

Launcher = Literal["spark", "emr-api"]


class LocalRuntimeError(RuntimeError):
    """The local runtime could not start, or was used before it started."""


@dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    """How to run: which definitions, where to keep state, which launcher, which ports (None: any free one)."""

    pipelines: str = "pipelines"
    work_dir: Path = Path(".assetflow")
    #: Where job entry points are: None finds the project root from ``pipelines`` (see ``find_project_root``).
    project_root: Path | None = None
    #: The old name of ``project_root`` (kept for callers written before it).
    repo_root: Path | None = None
    launcher: Launcher = "spark"
    max_concurrent_runs: int = 2
    #: Spark drivers kept started and waiting for a job (one job per driver; the spark launcher only).
    warm_workers: int = 1
    #: Seconds without a run after which the warm drivers stop until the next run (0: never), as EMR
    #: Serverless stops an idle application; the dev environment's stack stops it after 5 minutes.
    warm_idle_stop: float = WARM_IDLE_STOP_SECONDS
    dynamodb_port: int | None = None
    moto_port: int | None = None
    kafka_port: int | None = None
    api_port: int | None = None
    schedules: bool = True
    #: Seconds between reconciliation sweeps (0: none, as for tests that drive the sweep themselves).
    sweep_seconds: float = LOCAL_SWEEP_SECONDS
    names: ResourceNames = field(default_factory=ResourceNames)
    #: Where the functions' JSON logs go (as CloudWatch Logs would hold them); None leaves them on stdout.
    function_log: Path | None = None
    #: SQS batches ingested at once per watched queue (Lambda starts an SQS mapping with five; FIFO: one).
    sqs_concurrency: int = 4
    #: The listener event types published on the local bus (as an environment subscribes; none by default).
    listener_events: tuple[str, ...] = ()
    #: How long start() waits for every poller to be consuming before it gives up.
    ready_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.launcher not in ("spark", "emr-api"):
            raise ValueError(f"launcher must be 'spark' or 'emr-api', not {self.launcher!r}")
        if self.max_concurrent_runs < 1:
            raise ValueError("max_concurrent_runs must be at least 1")
        if self.warm_workers < 0:
            raise ValueError("warm_workers must be 0 or more")
        if self.warm_idle_stop < 0:
            raise ValueError("warm_idle_stop must be 0 (never) or a number of seconds")
        if self.sqs_concurrency < 1:
            raise ValueError("sqs_concurrency must be at least 1")


def moving_states_only(report: Callable[..., Any]) -> Callable[..., Any]:
    """``report`` for the job state changes the stack's rule sends to the run-state function (``RUN_MOVING_STATES``)."""

    def matched(event: dict[str, Any], context: Any = None) -> Any:
        if (event.get("detail") or {}).get("state") not in RUN_MOVING_STATES:
            return None
        return report(event, context)

    return matched


class LocalRuntime:
    """Everything of DESIGN §4 in this process and a few children; use it as a context manager.

    ``observe`` receives one line for each notable thing (a run's state change, a dead-lettered batch),
    for a console.
    """

    def __init__(
        self, options: RuntimeOptions | None = None, *, observe: Callable[[str], None] | None = None
    ):
        self.options = options or RuntimeOptions()
        self._observe = observe or (lambda line: None)
        self.work_dir = self.options.work_dir.resolve()
        self.token = secrets.token_urlsafe(32)
        self.catalog: Catalog | None = None
        self.resources: LocalResources | None = None
        self.dynamodb: DynamoDbLocal | None = None
        self.moto: MotoServer | None = None
        self.kafka: TansuBroker | None = None
        self.deps: Dependencies | None = None
        self.launcher: Any = None
        self.api: Any = None
        self.pollers: list[Any] = []
        self.ticker: ScheduleTicker | None = None
        self.sweeper: Sweeper | None = None
        #: Function invocations so far, the sweep's own aside (an idle runtime sweeps less often).
        self.invocations = 0
        self.invoke_server: LocalInvokeServer | None = None
        #: The local functions by their names, as the invoke endpoint serves them (and failures name them).
        self.functions: dict[str, Callable[..., Any]] = {}
        #: The asynchronously invoked functions (run-state, schedule-tick, reconcile), as their sources call them.
        self.async_invocations: dict[str, AsyncInvocation] = {}
        # The functions' wake-ups go to the ticker (EventBridge Scheduler's one-time schedules on AWS), which is
        # made after them: bound once it exists.
        self._wakeups = _TickerWakeUps()
        self._function_log: IO[str] | None = None
        self._redirected: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._stopped = threading.Event()
        self._locks: dict[tuple[Callable[..., Any], str], threading.BoundedSemaphore] = {}
        self._started = False
        self.startup_seconds: float | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the emulators, create the resources, start pollers, launcher, API and ticker; write dev.json.

        On any failure everything started so far is stopped before the error propagates.

        Raises:
            LoadError, CatalogError: the definitions do not load.
            EmulatorError: an emulator is missing or does not start.
            LocalRuntimeError: a handler cannot be found.
        """
        began = time.monotonic()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        self.startup_seconds = time.monotonic() - began
        logger.info("local runtime ready", extra={"seconds": round(self.startup_seconds, 2)})
        return self

    @property
    def project_root(self) -> Path:
        """The folder job entry points are relative to."""
        options = self.options
        return (options.project_root or options.repo_root or find_project_root(options.pipelines)).resolve()

    def _start(self) -> None:
        options = self.options
        self.catalog = load_catalog(options.pipelines)
        missing = missing_entry_points(self.catalog, self.project_root)
        if missing:
            raise LocalRuntimeError(
                "; ".join(missing)
                + " (entry points are relative to the project root: the nearest folder at or "
                "above the definitions holding cdk.json or pyproject.toml, else the working directory)"
            )
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        handlers = {name: module.lambda_handler for name, module in FUNCTION_MODULES.items()}
        self._redirect_function_logs()
        has_kafka = any(isinstance(w.source, KafkaTopic) for w, _asset in self.catalog.watchers.values())
        self.dynamodb = DynamoDbLocal(port=options.dynamodb_port, log_dir=logs)
        self.moto = MotoServer(port=options.moto_port, log_dir=logs)
        self.kafka = TansuBroker(port=options.kafka_port, log_dir=logs) if has_kafka else None
        emulators: list[Emulator] = [e for e in (self.dynamodb, self.moto, self.kafka) if e is not None]
        # Started from this thread, one after the other: a child's "die with the parent" signal is tied to
        # the thread that started it, so a pool's short-lived threads would take the emulators with them.
        for emulator in emulators:
            emulator.start()
        self.resources = provision(
            self.catalog,
            dynamodb_endpoint=self.dynamodb.endpoint,
            moto_endpoint=self.moto.endpoint,
            kafka=self.kafka,
            work_dir=self.work_dir,
            names=options.names,
            repo_root=self.project_root,
        )
        self.launcher = self._build_launcher(self.catalog, self.resources, self.dynamodb.endpoint)
        self.deps = deps = self._dependencies(launcher=self.launcher, wakeups=self._wakeups)
        self._warm(deps)
        run_state = self._invoker(
            handlers["run-state"], "run-state", deps, self._job_state, writes_events=True
        )
        self.functions[f"{LOCAL_FUNCTION_PREFIX}run-state"] = run_state
        # EventBridge invokes the run-state function asynchronously (Lambda's retries, then its on-failure queue),
        # for the states the stack's rule matches: those that move a run.
        self.launcher.report = moving_states_only(self._asynchronously(run_state, "run-state"))
        self._start_pollers(handlers, self.resources, deps)
        self.api = LocalApiServer(
            handler=self._invoker(handlers["api"], "api", deps, writes_events=True),
            token=self.token,
            port=options.api_port or 0,
        )
        self.api.start()
        if options.schedules:
            # Every pipeline with a time part ticks (time only, asset-or-time, asset-and-time, cron partition);
            # the ticker also delivers the evaluator's one-shot wake-ups.
            tick = self._invoker(handlers["schedule-tick"], "schedule-tick", deps)
            self.functions[f"{LOCAL_FUNCTION_PREFIX}schedule-tick"] = tick
            self.ticker = ScheduleTicker(
                time_schedules(self.catalog), self._asynchronously(tick, "schedule-tick")
            )
            self._wakeups.target = self.ticker
            self.ticker.start()
            # Each expected asset's first deadline check (each check asks for the next one, as on AWS).
            deps.expectations.schedule_all()
        sweep = self._invoker(handlers["reconcile"], "reconcile", deps)
        self.functions[f"{LOCAL_FUNCTION_PREFIX}reconcile"] = sweep
        if options.sweep_seconds:
            self.sweeper = Sweeper(
                self._asynchronously(sweep, "reconcile"),
                interval=options.sweep_seconds,
                activity=lambda: self.invocations,
                observe=self._observe,
            )
            self.sweeper.start()
        self.invoke_server = LocalInvokeServer(self.functions, token=self.token)
        self.invoke_server.start()
        self._wait_until_consuming()
        self.write_dev_config()

    def _wait_until_consuming(self) -> None:
        """Block until every poller consumes its source: dev.json then means that what is sent is read now.

        Raises:
            LocalRuntimeError: a poller is not consuming after ``ready_timeout`` (its last error named).
        """
        deadline = time.monotonic() + self.options.ready_timeout
        for poller in self.pollers:
            if not poller.wait_ready(max(0.0, deadline - time.monotonic())):
                raise LocalRuntimeError(
                    f"poller {poller.name} is not consuming after {self.options.ready_timeout:g} s"
                    + (f" (last error: {poller.stats.last_error})" if poller.stats.last_error else "")
                )

    def stop(self) -> None:
        """Stop everything this runtime started, newest first, and remove dev.json; idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        with contextlib.suppress(FileNotFoundError):
            self.dev_config_path.unlink()
        steps: list[tuple[str, Callable[[], None]]] = []
        if self.invoke_server is not None:
            steps.append(("invoke server", self.invoke_server.stop))
        if self.sweeper is not None:
            steps.append(("sweeper", self.sweeper.stop))
        if self.ticker is not None:
            steps.append(("ticker", self.ticker.stop))
        if self.api is not None:
            steps.append(("api", self.api.stop))
        steps += [(getattr(p, "name", "poller"), p.stop) for p in reversed(self.pollers)]
        if self.launcher is not None:
            steps.append(("launcher", self.launcher.close))
        steps += [(e.name, e.stop) for e in (self.kafka, self.moto, self.dynamodb) if e is not None]
        for name, step in steps:
            try:
                step()
            except Exception:
                logger.exception("stopping failed", extra={"part": name})
        if self._function_log is not None:
            if _observe.stream is self._function_log:
                _observe.stream = None
            # Give the handlers their streams back before closing the file: a later runtime in this process
            # (tests, benchmarks) would otherwise find them writing to a closed file.
            for handler, stream in self._redirected:
                handler.setStream(stream)
            self._redirected = []
            self._function_log.close()
            self._function_log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def wait(self) -> None:
        """Block until `stop()` is called (from a signal handler or another thread)."""
        while not self._stopped.wait(0.5):
            pass

    # ---- what users connect to -----------------------------------------------------------------------

    @property
    def dev_config_path(self) -> Path:
        """``.assetflow/dev.json`` under the working directory."""
        return self.work_dir / DEV_CONFIG_NAME

    def endpoints(self) -> dict[str, str]:
        """Each emulated service's endpoint (Kafka as host:port)."""
        if self.dynamodb is None or self.moto is None:
            raise LocalRuntimeError("the runtime is not started")
        endpoints = {
            "sqs": self.moto.endpoint,
            "dynamodb": self.dynamodb.endpoint,
            "dynamodbstreams": self.dynamodb.endpoint,
            "s3": self.moto.endpoint,
            "events": self.moto.endpoint,
            "kinesis": self.moto.endpoint,
            "emr-serverless": self.moto.endpoint,
            "kms": self.moto.endpoint,
        }
        if self.kafka is not None:
            endpoints["kafka"] = self.kafka.bootstrap_servers
        if self.invoke_server is not None:
            # Lambda's Invoke API for the local functions (sign with the token as the access key id).
            endpoints["lambda"] = self.invoke_server.url
        return endpoints

    def dev_config(self) -> dict[str, Any]:
        """The document of `.assetflow/dev.json` (DESIGN §5), with the resources' names added."""
        endpoints = self.endpoints()
        env = dict(LOCAL_AWS_ENV)
        env |= {variable: endpoints[service] for service, variable in _ENDPOINT_VARIABLES.items()}
        if self.resources is not None:
            env["ASSETFLOW_TABLE"] = self.resources.table
        document: dict[str, Any] = {
            "endpoints": {k: v for k, v in endpoints.items() if k != "dynamodbstreams"},
            "api": {"url": self.api.url if self.api is not None else None, "token": self.token},
            "ui": self.api.ui_url if self.api is not None else None,
            "env": env,
            "launcher": self.options.launcher,
            "pid": os.getpid(),
        }
        if self.resources is not None:
            document |= self.resources.to_json()
        document["functions"] = {
            name.removeprefix(LOCAL_FUNCTION_PREFIX): name for name in sorted(self.functions)
        }
        document["logs"] = str(self.work_dir / "logs")
        return document

    def write_dev_config(self) -> Path:
        """Write dev.json readable by its owner only (it holds the API token); returns its path."""
        path = self.dev_config_path
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(self.dev_config(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        temporary.replace(path)
        return path

    def client(self, service: str) -> Any:
        """A boto3 client for an emulated service."""
        return client(service, self.endpoints()[service])

    # ---- state for progress displays and tests -------------------------------------------------------

    def idle(self) -> bool:
        """No poller has work in hand and no job is queued or running."""
        busy_jobs = 0
        if self.launcher is not None:
            stats = self.launcher.stats()
            busy_jobs = stats.get("queued", 0) + stats.get("running", 0)
        return busy_jobs == 0 and all(p.idle for p in self.pollers)

    # ---- wiring --------------------------------------------------------------------------------------

    def _settings(self, watcher: str | None = None) -> Settings:
        r = self.resources
        if r is None:
            raise LocalRuntimeError("the runtime has no resources yet")
        return Settings(
            table_name=r.table,
            catalog_path=str(r.catalog_path),
            event_bus_name=r.event_bus,
            runs_bucket=r.runs_bucket,
            emr_application_id=r.emr_application_id,
            emr_job_role_arn=r.job_role_arn,
            region=LOCAL_REGION,
            path_map=dict(r.path_map),
            watcher_name=watcher,
            run_token_key=r.run_token_key or None,
            listener_events=frozenset(self.options.listener_events),
        )

    def _dependencies(
        self, *, watcher: str | None = None, launcher: Any = None, wakeups: Any = None
    ) -> Dependencies:
        endpoints = {k: v for k, v in self.endpoints().items() if k != "kafka"}
        return Dependencies(
            self._settings(watcher),
            session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
            launcher=launcher,
            endpoints=endpoints,
            config=LOCAL_CLIENT_CONFIG,
            wakeups=wakeups,
        )

    @staticmethod
    def _warm(deps: Dependencies) -> None:
        # Build the cached parts before threads share them (a cached_property is not built under a lock).
        for part in (
            "catalog",
            "store",
            "bus",
            "launcher",
            "evaluator",
            "run_states",
            "operations",
            "extras",
            "reconciler",
            "catalog_announced",  # the local evaluator announces the catalog at start
        ):
            getattr(deps, part, None)

    @staticmethod
    def _warm_ingest(deps: Dependencies) -> None:
        # A bad schema fails here, at start, rather than per batch; and the first message finds the function's
        # translator, store and clients built (ready means ready: no first message pays for them).
        for part in ("messages", "store", "extras", "ingest"):
            getattr(deps, part, None)

    def _build_launcher(self, catalog: Catalog, r: LocalResources, dynamodb_endpoint: str) -> Any:
        emr = EmrServerlessLauncher(
            emr_client=self.client("emr-serverless"),
            s3_client=self.client("s3"),
            application_id=r.emr_application_id,
            execution_role_arn=r.job_role_arn,
            runs_bucket=r.runs_bucket,
            events_table=r.table,
            region=LOCAL_REGION,
            path_map=r.path_map,
            events_endpoint_url=dynamodb_endpoint,
            run_tokens=KmsRunTokens(self.client("kms"), r.run_token_key) if r.run_token_key else None,
        )
        if self.options.launcher == "emr-api":
            return EmrApiLauncher(emr=emr, emr_client=self.client("emr-serverless"))
        return LocalSparkLauncher(
            emr=emr,
            repo_root=self.project_root,
            work_dir=self.work_dir,
            job_env=self._job_env(),
            entry_points=[p.job.entry_point for p in catalog.pipelines.values()],
            max_concurrent=self.options.max_concurrent_runs,
            warm_workers=self.options.warm_workers,
            warm_idle_stop=self.options.warm_idle_stop or None,
            master=f"local[{max(1, min(2, os.cpu_count() or 1))}]",
        )

    def _job_env(self) -> dict[str, str]:
        # The job talks to the emulators as a job on EMR talks to AWS: S3 for its context and outlet
        # metadata, DynamoDB for inlet events. The user's profile and real credentials are left out.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
        env |= dict(LOCAL_AWS_ENV)
        endpoints = self.endpoints()
        env |= {variable: endpoints[service] for service, variable in _ENDPOINT_VARIABLES.items()}
        return env

    def _invoker(
        self,
        handler: Callable[..., Any],
        function: str,
        deps: Dependencies,
        after: Callable[[dict[str, Any], Any], None] | None = None,
        *,
        concurrency: int = 1,
        writes_events: bool = False,
    ) -> Callable[..., Any]:
        # ``concurrency`` invocations of a function at once, as Lambda runs that many execution environments
        # (one per stream shard, several per SQS mapping). They share the handler module's globals here: its
        # logger keys and metrics may mix between concurrent invocations, nothing else does.
        gate = self._locks.setdefault((handler, function), threading.BoundedSemaphore(concurrency))

        def invoke(event: dict[str, Any], context: Any = None) -> Any:
            if function != "reconcile":
                self.invocations += 1  # the sweep's activity signal (a racy count is fine: it only grows)
            with gate:
                response = handler(event, context or lambda_context(f"assetflow-local-{function}"), deps=deps)
            if writes_events:
                self._events_written()
            if after is not None:
                after(event, response)
            return response

        return invoke

    def _events_written(self) -> None:
        """A function wrote asset events: the stream poller reads at once rather than at its next idle poll."""
        for poller in self.pollers:
            if isinstance(poller, StreamPoller):
                poller.wake()

    def _job_state(self, event: dict[str, Any], response: Any) -> None:
        detail = event.get("detail") or {}
        if isinstance(response, dict) and response.get("run_id"):
            self._observe(
                f"run {response['run_id']} {str(detail.get('state', '')).lower()}"
                + (f" ({detail.get('stateDetails')})" if detail.get("stateDetails") else "")
            )

    def _failure_sink(self, mapping: str) -> Callable[[dict[str, Any]], None]:
        """The failures bucket, as a stream or Kafka mapping's on-failure destination (Lambda's S3 layout)."""
        if self.resources is None:
            raise LocalRuntimeError("the runtime has no resources yet")
        return S3FailureSink(
            self.client("s3"), self.resources.failures_bucket, mapping, observe=self._observe
        )

    def _asynchronously(self, function: Callable[..., Any], name: str) -> AsyncInvocation:
        """``function`` invoked as Lambda invokes asynchronously: retried twice, then kept in its on-failure queue."""
        if self.resources is None:
            raise LocalRuntimeError("the runtime has no resources yet")
        invocation = AsyncInvocation(
            function,
            function_name=f"{LOCAL_FUNCTION_PREFIX}{name}",
            sqs=self.client("sqs"),
            queue_url=self.resources.failure_queues[name],
            observe=self._observe,
        )
        self.async_invocations[name] = invocation
        return invocation

    def _start_pollers(
        self, handlers: Mapping[str, Callable[..., Any]], r: LocalResources, evaluator_deps: Dependencies
    ) -> None:
        sqs = self.client("sqs")
        for watcher, queue in r.queues.items():
            deps = self._dependencies(watcher=watcher)
            self._warm_ingest(deps)
            ingest = self._invoker(
                handlers["sqs-ingest"],
                f"ingest-{watcher}",
                deps,
                concurrency=self.options.sqs_concurrency,
                writes_events=True,
            )
            self.functions[f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}"] = ingest
            if watcher in r.rules and r.rules[watcher].pattern.get("source") == ["aws.s3"]:
                # An S3 watcher's objects, where the runs' s3:// paths find them (assetflow_dev/mirror.py).
                ingest = mirroring(ingest, self.client("s3"), r.path_map)
            self.pollers.append(
                SqsPoller(
                    name=f"sqs:{watcher}",
                    sqs=sqs,
                    queue_url=queue.url,
                    queue_arn=queue.arn,
                    handler=ingest,
                    function_name=f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}",
                    batch_size=queue.batch_size,
                    concurrency=self.options.sqs_concurrency,
                )
            )
        for watcher, topic in r.topics.items():
            deps = self._dependencies(watcher=watcher)
            self._warm_ingest(deps)
            ingest = self._invoker(handlers["kafka-ingest"], f"ingest-{watcher}", deps, writes_events=True)
            self.functions[f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}"] = ingest
            self.pollers.append(
                KafkaPoller(
                    name=f"kafka:{watcher}",
                    bootstrap_servers=self.endpoints()["kafka"],
                    topics=[topic.topic],
                    group_id=topic.group_id,
                    handler=ingest,
                    function_name=f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}",
                    event_source=topic.event_source,
                    event_source_arn=topic.event_source_arn,
                    batch_size=topic.batch_size,
                    on_failure=self._failure_sink(f"ingest-{watcher}"),
                    # The runtime creates its topics empty, so reading from their start is reading from
                    # when the mapping was created, which is what LATEST means on AWS.
                    starting_position="TRIM_HORIZON",
                )
            )
        for watcher, stream in r.streams.items():
            deps = self._dependencies(watcher=watcher)
            self._warm_ingest(deps)
            ingest = self._invoker(handlers["kinesis-ingest"], f"ingest-{watcher}", deps, writes_events=True)
            self.functions[f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}"] = ingest
            self.pollers.append(
                KinesisPoller(
                    name=f"kinesis:{watcher}",
                    kinesis=self.client("kinesis"),
                    stream_arn=stream.arn,
                    handler=ingest,
                    function_name=f"{LOCAL_FUNCTION_PREFIX}ingest-{watcher}",
                    batch_size=stream.batch_size,
                    on_failure=self._failure_sink(f"ingest-{watcher}"),
                    # The runtime creates its streams empty, so reading from their start is reading from when
                    # the mapping was created, which is what LATEST means on AWS (as for its Kafka topics).
                    starting_position="TRIM_HORIZON",
                    # Lambda reads each shard of a Kinesis stream about once a second when it is idle; the
                    # poller waits for a put to moto instead, then reads at that cadence's next tick.
                    idle_poll_interval=KINESIS_IDLE_POLL_SECONDS,
                    puts_url=None if self.moto is None else f"{self.moto.endpoint}{KINESIS_PUTS_PATH}",
                )
            )
        evaluator = self._invoker(
            handlers["evaluator"], "evaluator", evaluator_deps, concurrency=MAX_CONCURRENT_SHARDS
        )
        self.functions[f"{LOCAL_FUNCTION_PREFIX}evaluator"] = evaluator
        self.pollers.append(
            StreamPoller(
                name="stream:evaluator",
                streams=self.client("dynamodbstreams"),
                stream_arn=r.stream_arn,
                handler=evaluator,
                function_name=f"{LOCAL_FUNCTION_PREFIX}evaluator",
                on_failure=self._failure_sink("evaluator"),
                accept=new_asset_event,
            )
        )
        for poller in self.pollers:
            poller.start()

    def _redirect_function_logs(self) -> None:
        # Powertools loggers write JSON lines to stdout, as Lambda's runtime hands them to CloudWatch Logs;
        # locally they go to one file, so that a console shows progress rather than every record's log.
        if self.options.function_log is None:
            return
        self.options.function_log.parent.mkdir(parents=True, exist_ok=True)
        self._function_log = self.options.function_log.open("a", encoding="utf-8")
        # The functions' metrics (EMF) too, as CloudWatch Logs would hold them.
        _observe.stream = self._function_log
        for module in FUNCTION_MODULES.values():
            powertools_logger = getattr(module, "logger", None)
            registered = getattr(powertools_logger, "registered_handler", None)
            # Functions of one service (the two ingest handlers) share one handler: redirect it once.
            if isinstance(registered, logging.StreamHandler) and all(
                registered is not done for done, _ in self._redirected
            ):
                self._redirected.append((registered, registered.setStream(self._function_log)))


def new_asset_event(record: Mapping[str, Any]) -> bool:
    """The evaluator's stream filter (``assetflow.cdk.evaluator.new_asset_events_filter``): asset event INSERTs.

    As the deployed mapping does, the local one sends only these to the evaluator; the rest of the stream (its
    own queue entries and runs, dedupe records, summaries) is discarded before batching.
    """
    if record.get("eventName") != "INSERT":
        return False
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return str((keys.get("sk") or {}).get("S", "")).startswith("EVENT#")


class _TickerWakeUps:
    """The local ``WakeUps`` and ``Deadlines``: the ticker's one-shots, once it exists (dropped without schedules)."""

    def __init__(self) -> None:
        self.target: ScheduleTicker | None = None

    def wake_at(self, pipeline: str, key: str, when: Any) -> None:
        if self.target is not None:
            self.target.wake_at(pipeline, key, when)

    def check_at(self, uri: str, when: Any) -> None:
        if self.target is not None:
            self.target.check_at(uri, when)


@contextlib.contextmanager
def running(options: RuntimeOptions | None = None, **kwargs: Any) -> Iterator[LocalRuntime]:
    """Start a runtime for the block and stop it afterwards."""
    runtime = LocalRuntime(options, **kwargs)
    with runtime:
        yield runtime
