"""Cold start of each Lambda handler: its import time, and the time to its first handled event.

Every measurement is a fresh interpreter, as a new Lambda container is (issue 6, item 5):

- **import**: ``import assetflow.functions.<handler>`` timed inside a fresh ``python -c`` (the interpreter's
  own start is measured apart, as ``python -c pass``), several times, median; one more run under
  ``-X importtime`` gives the packages that cost the most;
- **first event**: a fresh process configured as the stack configures a function (environment variables,
  the example catalog compiled from ``pipelines/``) on DynamoDB Local and moto imports the handler, builds
  its dependencies through the real composition root (``assetflow.composition.dependencies()``), handles
  one event, then a second one (warm, for contrast). The phases are timed inside the process; the process's
  wall time (interpreter start and exit included) is measured outside.

Run: ``.venv/bin/python -m benchmarks.cold_start [--quick]``.
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    check,
    emulators,
    parser,
    print_table,
    runs_of,
    summarize,
    summarize_runs,
    write_result,
)

NAME = "cold_start"
REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/assetflow-bench-job"

#: What a child process runs: only ``time``, ``json``, ``sys`` and ``importlib`` are imported before the
#: handler (the Lambda runtime's bootstrap has those loaded too). Results go to a file: handlers log to stdout.
CHILD = """
import time
started = time.perf_counter()
import importlib, json, sys
spec = json.loads(open(sys.argv[1]).read())
class Context:
    function_name = spec["function"]
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + spec["function"]
    aws_request_id = "00000000-0000-0000-0000-000000000001"
ready = time.perf_counter()
module = importlib.import_module(spec["module"])
imported = time.perf_counter()
from assetflow.composition import dependencies
deps = dependencies()
for name in spec["touch"]:
    getattr(deps, name)
built = time.perf_counter()
first = module.lambda_handler(spec["event"], Context())
handled = time.perf_counter()
module.lambda_handler(spec["warm_event"], Context())
warm = time.perf_counter()
with open(spec["result"], "w") as out:
    json.dump({"import": imported - ready, "dependencies": built - imported, "first_event": handled - built,
               "warm_event": warm - handled, "in_process": handled - started, "answer": first}, out, default=str)
"""

IMPORT_CHILD = """
import time, sys
started = time.perf_counter()
import {module}
sys.stdout.write(repr(time.perf_counter() - started))
"""


@dataclass(frozen=True)
class Handler:
    """One Lambda function: its module, service name, what its dependencies build, and its events."""

    module: str
    service: str
    touch: tuple[str, ...]
    environment: Mapping[str, str]

    @property
    def short(self) -> str:
        """The module's name without the package."""
        return self.module.rsplit(".", 1)[-1]


HANDLERS = (
    Handler(
        "assetflow.functions.handle_sqs_messages",
        "assetflow-ingest",
        ("catalog", "store", "messages"),
        {"WATCHER_NAME": "deliveries"},
    ),
    Handler(
        "assetflow.functions.handle_kafka_records",
        "assetflow-ingest",
        ("catalog", "store", "messages"),
        {"WATCHER_NAME": "sensor-readings"},
    ),
    Handler(
        "assetflow.functions.handle_asset_events",
        "assetflow-evaluator",
        ("catalog", "store", "evaluator"),
        {},
    ),
    Handler(
        "assetflow.functions.handle_job_state", "assetflow-run-state", ("catalog", "store", "run_states"), {}
    ),
    Handler(
        "assetflow.functions.handle_schedule_tick",
        "assetflow-schedule-tick",
        ("catalog", "store", "run_states"),
        {},
    ),
    Handler("assetflow.functions.handle_api", "assetflow-api", ("catalog", "store"), {}),
)

#: The benchmark's own asset and pipelines, added to the example catalog so that every event makes a run
#: whatever limits the examples set (``max_active_runs``): the evaluator, run-state and tick phases then do
#: the whole of their work.
REFRESH = "x-bench://cold-start/refresh"
PIPELINE = "bench_cold_start"
TICK_PIPELINE = "bench_cold_start_tick"


def catalog_document() -> dict[str, Any]:
    """The example catalog (``pipelines/``) with the benchmark's two pipelines."""
    from assetflow import Asset, AssetOrTimeSchedule, Catalog, Pipeline, SparkJob
    from assetflow.loader import load_definitions

    refresh = Asset(REFRESH)
    job = SparkJob("spark_jobs/bench.py")
    extra = [
        Pipeline(PIPELINE, schedule=refresh, job=job, outlets=[Asset("x-bench://cold-start/out")]),
        Pipeline(
            TICK_PIPELINE,
            schedule=AssetOrTimeSchedule("0 6 * * *", Asset("x-bench://cold-start/manual"), timezone="UTC"),
            job=job,
            outlets=[Asset("x-bench://cold-start/daily")],
        ),
    ]
    return Catalog.build([*load_definitions(ROOT / "pipelines"), *extra]).to_document()


class Deployment:
    """The stack's resources on the emulators, the functions' environment, and fresh events for each run."""

    def __init__(self, *, ddb: str, moto: str, workdir: Path) -> None:
        from assetflow.adapters.dynamodb import DynamoDbStore
        from assetflow_dev import LOCAL_AWS_ENV, client

        tag = uuid.uuid4().hex[:8]
        self.table, self.bucket, self.bus = f"bench-cold-{tag}", f"bench-cold-{tag}", f"bench-cold-{tag}"
        self.ddb = client("dynamodb", ddb)
        self.store = DynamoDbStore(self.ddb, self.table)
        self.store.create_table()
        client("s3", moto).create_bucket(Bucket=self.bucket)
        client("events", moto).create_event_bus(Name=self.bus)
        self.application_id = client("emr-serverless", moto).create_application(
            name=f"bench-{tag}", releaseLabel="emr-7.12.0", type="SPARK", clientToken=tag
        )["applicationId"]
        self.catalog_path = workdir / "catalog.json"
        self.catalog_path.write_text(json.dumps(catalog_document()))
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
        self.environment = {
            **inherited,
            **LOCAL_AWS_ENV,
            "PYTHONPATH": str(ROOT),
            "TABLE_NAME": self.table,
            "CATALOG_PATH": str(self.catalog_path),
            "EVENT_BUS_NAME": self.bus,
            "RUNS_BUCKET": self.bucket,
            "CODE_PREFIX": "code/",
            "EMR_APPLICATION_ID": self.application_id,
            "EMR_JOB_ROLE_ARN": ROLE,
            "POWERTOOLS_METRICS_NAMESPACE": "assetflow",
            "AWS_ENDPOINT_URL_DYNAMODB": ddb,
            **{f"AWS_ENDPOINT_URL_{s}": moto for s in ("S3", "SQS", "EVENTBRIDGE", "EMR_SERVERLESS")},
        }
        self.moto = moto
        self._counter = 0

    def environment_of(self, handler: Handler) -> dict[str, str]:
        """The function's environment variables, as the stack sets them."""
        return {**self.environment, "POWERTOOLS_SERVICE_NAME": handler.service, **handler.environment}

    def close(self) -> None:
        """Drop the table."""
        self.ddb.delete_table(TableName=self.table)

    # ---- events ------------------------------------------------------------------------------------------

    def _next(self) -> int:
        self._counter += 1
        return self._counter

    def event_for(self, handler: Handler) -> dict[str, Any]:
        """A new event of the handler's source (new ids, so that nothing is a redelivery)."""
        return getattr(self, f"_event_{handler.short}")()

    def _event_handle_sqs_messages(self) -> dict[str, Any]:
        n = self._next()
        body = {"delivery_id": f"DLV-{n:06d}", "supplier": "acme-foods", "files": [f"s3://lake/{n}.csv"]}
        return {
            "Records": [
                {
                    "messageId": str(uuid.uuid4()),
                    "receiptHandle": "handle",
                    "body": json.dumps(body),
                    "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1763719200123"},
                    "messageAttributes": {},
                    "md5OfBody": "",
                    "eventSource": "aws:sqs",
                    "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:deliveries",
                    "awsRegion": REGION,
                }
            ]
        }

    def _event_handle_kafka_records(self) -> dict[str, Any]:
        n = self._next()
        value = {"sensor_id": "s-0101", "reading_time": "2026-11-21T10:10:00Z", "temperature_c": 21.5 + n}
        record = {
            "topic": "sensor-readings",
            "partition": 0,
            "offset": n,
            "timestamp": 1763719600000 + n,
            "timestampType": "CREATE_TIME",
            "key": base64.b64encode(b"s-0101").decode(),
            "value": base64.b64encode(json.dumps(value).encode()).decode(),
            "headers": [],
        }
        return {
            "eventSource": "SelfManagedKafka",
            "bootstrapServers": "kafka-1.example.internal:9096",
            "records": {"sensor-readings-0": [record]},
        }

    def _asset_event(self) -> Any:
        from assetflow.core.events import AssetEvent

        n = self._next()
        return AssetEvent(
            REFRESH,
            f"cold-{uuid.uuid4().hex[:12]}",
            datetime(2026, 11, 21, 8, tzinfo=UTC) + timedelta(seconds=n),
            {"n": n},
            {"type": "api", "principal": "benchmark"},
        )

    def _event_handle_asset_events(self) -> dict[str, Any]:
        event = self._asset_event()
        key = self.store.event_key(event)
        image = {
            **key,
            "event": {"S": json.dumps(event.to_json(), sort_keys=True)},
            "event_id": {"S": event.id},
        }
        return {
            "Records": [
                {
                    "eventID": uuid.uuid4().hex,
                    "eventName": "INSERT",
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": REGION,
                    "dynamodb": {
                        "ApproximateCreationDateTime": 1763719200,
                        "Keys": key,
                        "NewImage": image,
                        "SequenceNumber": str(self._next()),
                        "SizeBytes": 512,
                        "StreamViewType": "NEW_IMAGE",
                    },
                    "eventSourceARN": f"arn:aws:dynamodb:{REGION}:123456789012:table/{self.table}/stream/x",
                }
            ]
        }

    def _event_handle_job_state(self) -> dict[str, Any]:
        from assetflow_dev.launcher import job_state_event

        job_run_id = self._submitted_job()
        return job_state_event(application_id=self.application_id, job_run_id=job_run_id, state="SUCCESS")

    def _submitted_job(self) -> str:
        """A run of the benchmark's pipeline submitted to EMR (moto) by an evaluator in this process; its job."""
        import boto3

        from assetflow.composition import Dependencies, Settings
        from assetflow_dev import LOCAL_CLIENT_KWARGS

        settings = Settings(
            table_name=self.table,
            catalog_path=str(self.catalog_path),
            runs_bucket=self.bucket,
            emr_application_id=self.application_id,
            emr_job_role_arn=ROLE,
            region=REGION,
        )
        endpoints = {"dynamodb": self.environment["AWS_ENDPOINT_URL_DYNAMODB"], "s3": self.moto}
        deps = Dependencies(
            settings,
            session=boto3.session.Session(**LOCAL_CLIENT_KWARGS),
            endpoints={**endpoints, "emr-serverless": self.moto},
        )
        (run,) = [r for r in deps.evaluator.handle_event(self._asset_event()).runs if r.pipeline == PIPELINE]
        job_run_id = deps.store.get_run(run.run_id, with_events=False).job_run_id
        check(job_run_id, f"run {run.run_id} was not submitted")
        return str(job_run_id)

    def _event_handle_schedule_tick(self) -> dict[str, Any]:
        when = datetime(2026, 1, 1, 6, tzinfo=UTC) + timedelta(days=self._next())
        return {"pipeline": TICK_PIPELINE, "scheduled_time": when.strftime("%Y-%m-%dT%H:%M:%SZ")}

    def _event_handle_api(self) -> dict[str, Any]:
        return {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/assets",
            "rawQueryString": "",
            "headers": {"host": "localhost"},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "local",
                "http": {"method": "GET", "path": "/assets", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
                "requestId": uuid.uuid4().hex,
                "routeKey": "$default",
                "stage": "$default",
            },
            "isBase64Encoded": False,
        }


# ---- measuring ----------------------------------------------------------------------------------------------


def _python(
    arguments: Sequence[str], environment: Mapping[str, str], *, timeout: float = 120
) -> tuple[str, str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *arguments],
        cwd=ROOT,
        env=dict(environment),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"python {' '.join(arguments[:2])} failed: {done.stderr[-3000:]}")
    return done.stdout, done.stderr, wall


def interpreter_start(environment: Mapping[str, str]) -> float:
    """Wall seconds of ``python -c pass``."""
    return _python(["-c", "pass"], environment)[2]


def import_seconds(handler: Handler, environment: Mapping[str, str]) -> float:
    """Seconds to import the handler module in a fresh interpreter."""
    stdout, _, _ = _python(["-c", IMPORT_CHILD.format(module=handler.module)], environment)
    return float(stdout.strip())


def import_breakdown(handler: Handler, environment: Mapping[str, str], *, top: int = 6) -> dict[str, float]:
    """Milliseconds of ``-X importtime`` self time by top-level package, the ``top`` largest."""
    _, stderr, _ = _python(["-X", "importtime", "-c", f"import {handler.module}"], environment)
    by_package: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_us, _cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        package = name.split(".")[0]
        by_package[package] = by_package.get(package, 0.0) + int(self_us) / 1000
    return dict(sorted(by_package.items(), key=lambda kv: -kv[1])[:top])


def first_event(handler: Handler, deployment: Deployment, workdir: Path) -> dict[str, float]:
    """Phases of a fresh process's first (and second) event, in seconds, and the process's wall time.

    Raises:
        BenchmarkCheckError: the handler's answer says the event was not handled.
    """
    spec_path, result_path = workdir / f"{handler.short}-spec.json", workdir / f"{handler.short}-result.json"
    spec = {
        "module": handler.module,
        "function": handler.short,
        "touch": list(handler.touch),
        "event": deployment.event_for(handler),
        "warm_event": deployment.event_for(handler),
        "result": str(result_path),
    }
    spec_path.write_text(json.dumps(spec))
    _, _, wall = _python(["-c", CHILD, str(spec_path)], deployment.environment_of(handler))
    found = json.loads(result_path.read_text())
    _check_answer(handler, found.pop("answer"))
    return {**{k: float(v) for k, v in found.items()}, "process_wall": wall}


def _check_answer(handler: Handler, answer: Any) -> None:
    if handler.short in ("handle_sqs_messages", "handle_kafka_records", "handle_asset_events"):
        check(isinstance(answer, dict) and not answer.get("batchItemFailures"), f"{handler.short}: {answer}")
    elif handler.short == "handle_job_state":
        check(answer.get("status") == "recorded" and answer.get("emitted"), f"{handler.short}: {answer}")
    elif handler.short == "handle_schedule_tick":
        check(len(answer.get("runs", [])) == 1, f"{handler.short}: {answer}")
    else:
        check(answer.get("statusCode") == 200, f"{handler.short}: {answer}")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every handler; print and write the results."""
    started = time.perf_counter()
    args = parser(__doc__.splitlines()[0], default_runs=7, quick_runs=1).parse_args(argv)
    runs = runs_of(args)

    imports: dict[str, list[float]] = {h.short: [] for h in HANDLERS}
    breakdown: dict[str, dict[str, float]] = {}
    firsts: dict[str, list[dict[str, float]]] = {h.short: [] for h in HANDLERS}
    with tempfile.TemporaryDirectory(prefix="assetflow-cold-") as tmp, emulators() as started_emulators:
        workdir = Path(tmp)
        deployment = Deployment(
            ddb=started_emulators["dynamodb"].endpoint,
            moto=started_emulators["moto"].endpoint,
            workdir=workdir,
        )
        try:
            base = deployment.environment_of(HANDLERS[0])
            # Compile every module once (a container ships its .pyc files), so no run pays for compiling.
            # (Quick: the import breakdown, which comes first, compiles them; its figures then include that.)
            if not args.quick:
                _python(["-c", "; ".join(f"import {h.module}" for h in HANDLERS)], base)
            interpreter = [interpreter_start(base) for _ in range(runs)]
            # Quick: the import figure is the first-event process's import phase (the same measurement,
            # without the processes of its own).
            for _ in range(0 if args.quick else runs):
                for handler in HANDLERS:
                    imports[handler.short].append(import_seconds(handler, deployment.environment_of(handler)))
            for handler in HANDLERS:
                breakdown[handler.short] = import_breakdown(handler, deployment.environment_of(handler))
            for _ in range(runs):
                for handler in HANDLERS:
                    firsts[handler.short].append(first_event(handler, deployment, workdir))
                    if args.quick:
                        imports[handler.short].append(firsts[handler.short][-1]["import"])
        finally:
            deployment.close()

    results: dict[str, Any] = {"interpreter_start_seconds": summarize(interpreter), "handlers": {}}
    rows = []
    for handler in HANDLERS:
        name = handler.short
        phases = summarize_runs(firsts[name])
        results["handlers"][name] = {
            "import_seconds": summarize(imports[name]),
            "import_top_packages_ms": breakdown[name],
            "first_event_seconds": phases,
        }
        rows.append(
            [
                name,
                summarize(imports[name])["median"] * 1e3,
                f"{min(imports[name]) * 1e3:.0f}-{max(imports[name]) * 1e3:.0f}",
                phases["dependencies"]["median"] * 1e3,
                phases["first_event"]["median"] * 1e3,
                phases["in_process"]["median"] * 1e3,
                phases["process_wall"]["median"] * 1e3,
                phases["warm_event"]["median"] * 1e3,
                ", ".join(f"{p} {ms:.0f}" for p, ms in list(breakdown[name].items())[:3]),
            ]
        )
    print_table(
        f"Cold start per handler, ms (median of {runs} fresh processes; "
        f"python -c pass: {statistics.median(interpreter) * 1e3:.0f} ms)",
        [
            "handler",
            "import",
            "min-max",
            "deps",
            "1st event",
            "to 1st event",
            "process wall",
            "warm event",
            "top imports (self ms)",
        ],
        rows,
    )
    write_result(
        NAME,
        results,
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "handlers": [h.module for h in HANDLERS],
            "catalog": "pipelines/ (examples)",
        },
        notes=[
            "import: import assetflow.functions.<handler> inside a fresh python -c (interpreter start excluded).",
            "first event: fresh process, environment as the stack sets it, on DynamoDB Local and moto; "
            "to 1st event = import + dependencies + first event (in process, interpreter start excluded); "
            "process wall includes interpreter start, the warm event and exit.",
            "Lambda adds its own runtime start (not measured here); DynamoDB Local and moto answer slower than "
            "AWS, which weighs on the event phases.",
        ],
        started=started,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
