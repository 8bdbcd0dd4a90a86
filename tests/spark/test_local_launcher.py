"""The local EMR Serverless stand-ins on moto's server: spark-submit job runs, and the EMR API alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

from assetflow import Asset, Pipeline, SparkJob
from assetflow.adapters.emr import EmrServerlessLauncher, outlet_metadata_uri, read_outlet_metadata
from assetflow.core.events import AssetEvent, Run, RunState
from assetflow.ports import SubmissionError
from assetflow.versions import EMR_RELEASE_LABEL
from assetflow_dev import LOCAL_ACCOUNT_ID, LOCAL_AWS_ENV, LOCAL_REGION, MotoServer, client, spark_pool
from assetflow_dev.launcher import (
    JOB_STATE_DETAIL_TYPE,
    JOB_STATE_SOURCE,
    EmrApiLauncher,
    LocalSparkLauncher,
    job_state_event,
)
from assetflow_job.context import split_context_argument
from assetflow_job.contract import INLINE_CONTEXT_PREFIX
from assetflow_job.storage import read_bytes
from spark_jobs import sample_data
from spark_jobs.common import CURATED_DELIVERIES, LANDING_DELIVERIES
from tests.examples import REPO_ROOT, example_entry_points
from tests.spark.test_spark_pool import FAKE_DRIVER, live_members

ROLE = f"arn:aws:iam::{LOCAL_ACCOUNT_ID}:role/assetflow-jobs"
LANDING = Asset("s3://lake/landing/tiny")
OUT = Asset("s3://lake/curated/tiny")
SPARK_TIMEOUT = 240.0

# A real PySpark job as EMR would run it: the helper and spark_jobs.common come from the --py-files zip, the
# run context from moto's S3; the outlet metadata goes back there.
TINY_SPARK_JOB = """
from assetflow_job import run
from spark_jobs.common import configure_logging, spark_session

configure_logging()
with run() as ctx:
    with spark_session("tiny") as spark:
        rows = spark.range(int(ctx.args[0])).count()
    ctx.outlet_events["s3://lake/curated/tiny"].extra = {"rows": rows, "run_id": ctx.run_id}
"""
FAILING_JOB = """
raise ValueError("no rows for partition 42")
"""
# Records when it ran (epoch seconds) in the file named by its first argument.
TIMED_JOB = """
import sys, time
began = time.time()
time.sleep(float(sys.argv[2]))
with open(sys.argv[1], "w") as out:
    out.write(f"{began} {time.time()}")
"""
# Writes when its first line ran (epoch seconds), then counts a few rows.
FIRST_LINE_JOB = """
import sys, time
began = time.time()
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("first-line").getOrCreate()
rows = spark.range(10).count()
with open(sys.argv[1], "w") as out:
    out.write(f"{began} {rows}")
"""
# Writes its pid, then sleeps for a long time.
SLEEPING_JOB = """
import os, sys, time
with open(sys.argv[1], "w") as out:
    out.write(str(os.getpid()))
time.sleep(600)
"""


class Reports:
    """A state reporter that records every event; ``fail_first`` makes its first calls raise."""

    def __init__(self, fail_first: int = 0) -> None:
        self.events: list[dict[str, Any]] = []
        self.calls = 0
        self.fail_first = fail_first
        self._changed = threading.Condition()

    def __call__(self, event: dict[str, Any]) -> None:
        with self._changed:
            self.calls += 1
            if self.calls <= self.fail_first:
                raise RuntimeError("the job-state handler is down")
            self.events.append(event)
            self._changed.notify_all()

    def of(self, job_run_id: str) -> list[dict[str, Any]]:
        with self._changed:
            return [e for e in self.events if e["detail"]["jobRunId"] == job_run_id]

    def states(self, job_run_id: str) -> list[str]:
        return [e["detail"]["state"] for e in self.of(job_run_id)]

    def wait_for(self, condition: Callable[[], bool], timeout: float) -> None:
        with self._changed:
            if not self._changed.wait_for(condition, timeout):
                pytest.fail(f"timed out; reported so far: {[e['detail'] for e in self.events]}")

    def wait_for_state(self, job_run_id: str, states: set[str], timeout: float = SPARK_TIMEOUT) -> str:
        self.wait_for(lambda: bool(set(self.states(job_run_id)) & states), timeout)
        return next(s for s in self.states(job_run_id) if s in states)

    def reported_at(self, job_run_id: str, state: str) -> float:
        """When the launcher reported a state (epoch seconds, from the event's updatedAt)."""
        (detail,) = [e["detail"] for e in self.of(job_run_id) if e["detail"]["state"] == state]
        return datetime.strptime(detail["updatedAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(log_dir=tmp_path_factory.mktemp("moto"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def emr_client(moto: MotoServer) -> Any:
    return client("emr-serverless", moto.endpoint)


@pytest.fixture
def s3_client(moto: MotoServer) -> Any:
    return client("s3", moto.endpoint)


@pytest.fixture
def emr(emr_client: Any, s3_client: Any) -> EmrServerlessLauncher:
    suffix = uuid.uuid4().hex[:10]
    bucket = f"runs-{suffix}"
    s3_client.create_bucket(Bucket=bucket)
    application_id = emr_client.create_application(
        name=f"assetflow-{suffix}", releaseLabel=EMR_RELEASE_LABEL, type="SPARK", clientToken=suffix
    )["applicationId"]
    return EmrServerlessLauncher(
        emr_client=emr_client,
        s3_client=s3_client,
        application_id=application_id,
        execution_role_arn=ROLE,
        runs_bucket=bucket,
        events_table="assetflow-events",
        region=LOCAL_REGION,
    )


@pytest.fixture
def spark_submit() -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the Spark tests need Java 17 (java on PATH or JAVA_HOME)", pytrace=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder whose jobs/ holds the test jobs (the launcher's repo_root), with the shared module."""
    jobs = tmp_path / "project" / "jobs"
    jobs.mkdir(parents=True)
    shared = tmp_path / "project" / "spark_jobs"
    shared.mkdir()
    for module in ("__init__.py", "common.py"):
        shutil.copy(REPO_ROOT / "spark_jobs" / module, shared / module)
    for name, code in (
        ("tiny.py", TINY_SPARK_JOB),
        ("failing.py", FAILING_JOB),
        ("timed.py", TIMED_JOB),
        ("sleeping.py", SLEEPING_JOB),
        ("first_line.py", FIRST_LINE_JOB),
    ):
        (jobs / name).write_text(code)
    return tmp_path / "project"


def project_jobs(project: Path) -> list[str]:
    """The test project's job entry points, relative to it (what the launcher ships the imports of)."""
    return sorted(p.relative_to(project).as_posix() for p in (project / "jobs").glob("*.py"))


@pytest.fixture
def make_launcher(
    emr: EmrServerlessLauncher, project: Path, tmp_path: Path, moto: MotoServer
) -> Iterator[Callable[..., LocalSparkLauncher]]:
    made: list[LocalSparkLauncher] = []

    def make(**kwargs: Any) -> LocalSparkLauncher:
        launcher = LocalSparkLauncher(
            emr=emr,
            repo_root=project,
            entry_points=project_jobs(project),
            work_dir=tmp_path / "work",
            job_env=dict(LOCAL_AWS_ENV) | {"AWS_ENDPOINT_URL_S3": moto.endpoint},
            **kwargs,
        )
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.close()


def pipeline(pipeline_id: str, entry_point: str, *arguments: str) -> Pipeline:
    return Pipeline(pipeline_id, schedule=[LANDING], job=SparkJob(entry_point, arguments), outlets=[OUT])


def new_run(pipeline_id: str) -> Run:
    return Run(
        run_id=f"{pipeline_id}-{uuid.uuid4().hex[:12]}",
        pipeline=pipeline_id,
        state=RunState.QUEUED,
        created_at=datetime.now(UTC),
    )


# ---- the event shape ------------------------------------------------------------------------------------


def test_job_state_event_is_shaped_as_eventbridge_sends_it() -> None:
    now = datetime(2026, 11, 21, 21, 7, 42, 299487, tzinfo=UTC)
    created = datetime(2026, 11, 21, 21, 7, 25, 325900, tzinfo=UTC)

    event = job_state_event(
        application_id="00f1982r1uukb925",
        job_run_id="00f1cbn5g4bb0c01",
        state="FAILED",
        previous_state="RUNNING",
        job_run_name="orders_etl-r1",
        state_details="spark-submit exited with status 1: ValueError: boom",
        now=now,
        created_at=created,
    )

    assert {k: v for k, v in event.items() if k != "id"} == {
        "version": "0",
        "detail-type": JOB_STATE_DETAIL_TYPE,
        "source": JOB_STATE_SOURCE,
        "account": LOCAL_ACCOUNT_ID,
        "time": "2026-11-21T21:07:42Z",
        "region": LOCAL_REGION,
        "resources": [],
        "detail": {
            "jobRunId": "00f1cbn5g4bb0c01",
            "jobRunName": "orders_etl-r1",
            "applicationId": "00f1982r1uukb925",
            "arn": f"arn:aws:emr-serverless:{LOCAL_REGION}:{LOCAL_ACCOUNT_ID}:/applications/00f1982r1uukb925"
            "/jobruns/00f1cbn5g4bb0c01",
            "releaseLabel": EMR_RELEASE_LABEL,
            "state": "FAILED",
            "previousState": "RUNNING",
            "createdBy": event["detail"]["createdBy"],
            "updatedAt": "2026-11-21T21:07:42.299487Z",
            "createdAt": "2026-11-21T21:07:25.325900Z",
            "stateDetails": "spark-submit exited with status 1: ValueError: boom",
        },
    }
    assert re.fullmatch(rf"arn:aws:(sts|iam)::{LOCAL_ACCOUNT_ID}:\S+", event["detail"]["createdBy"])
    assert str(uuid.UUID(event["id"])) == event["id"]
    parsed = EventBridgeEvent(event)
    assert (parsed.source, parsed.detail_type, parsed.detail["state"]) == (
        "aws.emr-serverless",
        "EMR Serverless Job Run State Change",
        "FAILED",
    )
    first = job_state_event(application_id="a1", job_run_id="j1", state="SUBMITTED")["detail"]
    assert "previousState" not in first and "stateDetails" not in first and "jobRunName" not in first
    assert first["createdAt"] == first["updatedAt"]


# ---- spark-submit on this machine ------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_a_spark_job_reports_submitted_running_success_once_with_its_log(
    make_launcher: Callable[..., LocalSparkLauncher],
    emr: EmrServerlessLauncher,
    emr_client: Any,
    s3_client: Any,
    tmp_path: Path,
) -> None:
    # Given
    reports = Reports()
    launcher = make_launcher(report=reports)
    tiny = pipeline("tiny", "jobs/tiny.py", "5")
    run = new_run("tiny")

    # When: the evaluator submits the run, and submits it again (a retry, or concurrent evaluators)
    began = time.monotonic()
    job_run_id = launcher.submit(run, tiny)
    submitted_in = time.monotonic() - began
    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(launcher.submit(run, tiny))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}) == "SUCCESS", launcher.log_path(
        run.run_id
    ).read_text()[-3000:]
    seconds = time.monotonic() - began

    # Then: one job run, its states in order with their previous states, from EMR's real job run id
    assert submitted_in < 5.0  # submit never waits for Spark
    assert answers == [job_run_id] * 4
    assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "SUCCESS"]
    details = [e["detail"] for e in reports.of(job_run_id)]
    assert [d.get("previousState") for d in details] == [None, "SUBMITTED", "RUNNING"]
    assert {d["applicationId"] for d in details} == {emr.application_id}
    assert {d["jobRunName"] for d in details} == {run.run_id}
    job = emr_client.get_job_run(applicationId=emr.application_id, jobRunId=job_run_id)["jobRun"]
    assert job["tags"]["assetflow:run-id"] == run.run_id
    assert launcher.run_id_of_job(job_run_id) == run.run_id
    assert launcher.stats() == {"queued": 0, "running": 0, "succeeded": 1, "failed": 0}
    # The log: the command line first, run with EMR's arguments; Spark started once.
    log = launcher.log_path(run.run_id)
    assert log == tmp_path / "work" / "logs" / "tiny" / f"{run.run_id}.log"
    text = log.read_text()
    first_lines = text.splitlines()[:2]
    assert first_lines[0] == f"# job run {job_run_id} of run {run.run_id}"
    assert first_lines[1].startswith("$ ") and "spark-submit --master 'local[2]'" in first_lines[1]
    assert text.count("\n$ ") == 1 and text.count("outlet metadata written") == 1
    command = launcher.command(run, tiny)
    request = emr.job_request(run, tiny)["jobDriver"]["sparkSubmit"]
    assert command[-len(request["entryPointArguments"]) - 1 :] == [
        str(launcher.repo_root / "jobs" / "tiny.py"),
        *request["entryPointArguments"],
    ]
    assert command[command.index("--py-files") + 1] == str(launcher.py_files)
    # The job read its context from moto's S3 and wrote its outlet metadata there.
    metadata = read_outlet_metadata(s3_client, outlet_metadata_uri(emr.runs_bucket, "tiny", run.run_id))
    assert metadata is not None
    assert [(e["asset"], e["extra"]) for e in metadata["events"]] == [
        (OUT.uri, {"rows": 5, "run_id": run.run_id})
    ]
    print(f"tiny spark job: submit {submitted_in:.2f} s, SUCCESS reported after {seconds:.1f} s")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_a_job_that_exits_non_zero_reports_failed_with_its_error(
    make_launcher: Callable[..., LocalSparkLauncher],
) -> None:
    reports = Reports()
    launcher = make_launcher(report=reports)
    run = new_run("failing")

    job_run_id = launcher.submit(run, pipeline("failing", "jobs/failing.py"))

    assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}) == "FAILED"
    assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "FAILED"]
    details = reports.of(job_run_id)[-1]["detail"]
    assert details["previousState"] == "RUNNING"
    assert details["stateDetails"].startswith("spark-submit exited with status 1")
    assert "ValueError: no rows for partition 42" in details["stateDetails"]
    assert len(details["stateDetails"]) <= 1000
    assert "ValueError: no rows for partition 42" in launcher.log_path(run.run_id).read_text()
    assert launcher.stats() == {"queued": 0, "running": 0, "succeeded": 0, "failed": 1}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_one_worker_runs_two_jobs_one_after_the_other(
    make_launcher: Callable[..., LocalSparkLauncher], tmp_path: Path
) -> None:
    reports = Reports()
    launcher = make_launcher(report=reports, max_concurrent=1)
    marks = [tmp_path / "a.txt", tmp_path / "b.txt"]
    runs = [
        (new_run(f"timed{i}"), pipeline(f"timed{i}", "jobs/timed.py", str(marks[i]), "1")) for i in (0, 1)
    ]

    job_run_ids = [launcher.submit(run, p) for run, p in runs]
    # Both queued at once: the second waits for the worker.
    reports.wait_for(lambda: all(reports.states(j)[:1] == ["SUBMITTED"] for j in job_run_ids), 10)
    for job_run_id in job_run_ids:
        assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}) == "SUCCESS"

    (a_start, a_end), (b_start, b_end) = (map(float, mark.read_text().split()) for mark in marks)
    assert a_end <= b_start or b_end <= a_start, "the two jobs overlapped"
    order = [(e["detail"]["jobRunId"], e["detail"]["state"]) for e in reports.events]
    first, second = sorted(job_run_ids, key=lambda j: order.index((j, "RUNNING")))
    assert order.index((first, "SUCCESS")) < order.index((second, "RUNNING"))


@pytest.mark.spark
@pytest.mark.usefixtures("spark_submit")
def test_a_job_over_the_run_timeout_is_killed_and_fails(
    make_launcher: Callable[..., LocalSparkLauncher], tmp_path: Path
) -> None:
    reports = Reports()
    launcher = make_launcher(report=reports, run_timeout=1.0)
    run = new_run("sleepy")

    job_run_id = launcher.submit(run, pipeline("sleepy", "jobs/sleeping.py", str(tmp_path / "pid")))

    assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}, timeout=30) == "FAILED"
    assert "timed out after 1 s" in reports.of(job_run_id)[-1]["detail"]["stateDetails"]
    assert "over the run timeout" in launcher.log_path(run.run_id).read_text()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_close_kills_running_jobs_and_reports_nothing_more(
    make_launcher: Callable[..., LocalSparkLauncher], tmp_path: Path
) -> None:
    # Given: a job whose Python driver is running
    reports = Reports()
    launcher = make_launcher(report=reports)
    run = new_run("sleepy")
    pid_file = tmp_path / "pid"
    job_run_id = launcher.submit(run, pipeline("sleepy", "jobs/sleeping.py", str(pid_file)))
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), launcher.log_path(run.run_id).read_text()[-3000:]
    driver = int(pid_file.read_text())
    reports.wait_for_state(job_run_id, {"RUNNING"}, timeout=10)

    # When
    began = time.monotonic()
    launcher.close(timeout=10)
    closing = time.monotonic() - began
    launcher.close()  # idempotent

    # Then: the driver (a grandchild, in the job's process group) is gone, and nothing more was reported
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(driver, 0)
    assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING"]
    with pytest.raises(SubmissionError):
        launcher.submit(new_run("sleepy"), pipeline("sleepy", "jobs/sleeping.py", str(pid_file)))
    assert closing < 10
    assert "the launcher closed" in launcher.log_path(run.run_id).read_text()


# ---- the EMR Serverless API alone ------------------------------------------------------------------------


@pytest.mark.integration
def test_emr_api_launcher_reports_moto_success_and_retries_a_failing_reporter(
    emr: EmrServerlessLauncher, emr_client: Any, s3_client: Any
) -> None:
    # Given: a reporter (the job-state handler) that fails twice before it works
    reports = Reports(fail_first=2)
    launcher = EmrApiLauncher(emr=emr, emr_client=emr_client, report=reports, poll_interval=0.05)
    runs = [new_run("tiny"), new_run("tiny")]
    tiny = pipeline("tiny", "jobs/tiny.py", "5")
    try:
        # When
        job_run_ids = [launcher.submit(run, tiny) for run in runs]
        assert launcher.submit(runs[0], tiny) == job_run_ids[0]
        reports.wait_for(lambda: all("SUCCESS" in reports.states(j) for j in job_run_ids), 15)
        time.sleep(0.3)  # anything more would come within a few polls

        # Then: every state once, in order, as EventBridge would send them
        for run, job_run_id in zip(runs, job_run_ids, strict=True):
            assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "SUCCESS"]
            details = [e["detail"] for e in reports.of(job_run_id)]
            assert [d.get("previousState") for d in details] == [None, "SUBMITTED", "RUNNING"]
            assert {d["jobRunName"] for d in details} == {run.run_id}
            assert launcher.run_id_of_job(job_run_id) == run.run_id
            # (the context travels in the job's arguments: inline when small, else through S3)
            job = emr_client.get_job_run(applicationId=emr.application_id, jobRunId=job_run_id)["jobRun"]
            arguments = job["jobDriver"]["sparkSubmit"]["entryPointArguments"]
            context = read_bytes(split_context_argument(arguments)[0], s3_client=s3_client)
            assert json.loads(context)["run_id"] == run.run_id
        assert reports.calls == 2 + 6
        assert launcher.stats() == {"queued": 0, "running": 0, "succeeded": 2, "failed": 0}
        assert len(emr_client.list_job_runs(applicationId=emr.application_id)["jobRuns"]) == 2
    finally:
        launcher.close()
    with pytest.raises(SubmissionError):
        launcher.submit(new_run("tiny"), tiny)


# ---- warm Spark drivers ------------------------------------------------------------------------------


def wait_until_warm(launcher: LocalSparkLauncher) -> None:
    assert launcher.pool is not None
    assert launcher.pool.wait_ready(timeout=SPARK_TIMEOUT), "no warm driver became ready"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_deliveries_etl_runs_unchanged_on_a_warm_driver(
    emr_client: Any, s3_client: Any, tmp_path: Path, moto: MotoServer
) -> None:
    # Given: sample deliveries in the local folder of the demo bucket, and a launcher with a warm driver
    bucket = tmp_path / "assetflow-demo"
    bodies = sample_data.write_delivery_files(bucket / "landing" / "deliveries", deliveries=1)
    runs_bucket = f"runs-{uuid.uuid4().hex[:10]}"
    s3_client.create_bucket(Bucket=runs_bucket)
    emr = EmrServerlessLauncher(
        emr_client=emr_client,
        s3_client=s3_client,
        application_id=emr_client.create_application(
            name=runs_bucket, releaseLabel=EMR_RELEASE_LABEL, type="SPARK", clientToken=runs_bucket
        )["applicationId"],
        execution_role_arn=ROLE,
        runs_bucket=runs_bucket,
        events_table="assetflow-events",
        region=LOCAL_REGION,
        path_map={"s3://assetflow-demo/": str(bucket)},
    )
    reports = Reports()
    launcher = LocalSparkLauncher(
        emr=emr,
        repo_root=REPO_ROOT,
        entry_points=example_entry_points(),
        work_dir=tmp_path / "work",
        job_env=dict(LOCAL_AWS_ENV) | {"AWS_ENDPOINT_URL_S3": moto.endpoint},
        report=reports,
        warm_workers=1,
    )
    try:
        wait_until_warm(launcher)
        etl = Pipeline(
            "deliveries_etl",
            schedule=[Asset(LANDING_DELIVERIES)],
            job=SparkJob("spark_jobs/deliveries_etl.py"),
            outlets=[Asset(CURATED_DELIVERIES)],
        )
        landed = AssetEvent(
            asset=LANDING_DELIVERIES,
            id="m-1",
            timestamp=datetime(2026, 11, 21, 15, tzinfo=UTC),
            extra={"payload": json.loads(bodies[0]), "message": {"queue": "landing", "message_id": "m-1"}},
            source={"type": "watcher", "watcher": "landing", "kind": "sqs"},
        )
        run = Run(
            run_id=f"deliveries_etl-{uuid.uuid4().hex[:12]}",
            pipeline="deliveries_etl",
            state=RunState.QUEUED,
            created_at=datetime.now(UTC),
            triggering_asset_events={LANDING_DELIVERIES: (landed,)},
        )

        # When
        job_run_id = launcher.submit(run, etl)

        # Then: the job succeeded on the warm driver, with the outlet metadata of a spark-submit run
        assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}) == "SUCCESS", launcher.log_path(
            run.run_id
        ).read_text()[-3000:]
        assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "SUCCESS"]
        log = launcher.log_path(run.run_id).read_text()
        assert log.splitlines()[1].startswith("# warm Spark driver pid ")
        assert "\n$ " not in log and "outlet metadata written" in log
        metadata = read_outlet_metadata(
            s3_client, outlet_metadata_uri(runs_bucket, "deliveries_etl", run.run_id)
        )
        assert metadata is not None
        assert [(e["asset"], e["extra"]) for e in metadata["events"]] == [
            (
                CURATED_DELIVERIES,
                {"row_count": 8, "rejected_rows": 4, "duplicate_rows": 1, "delivery_ids": ["d-001"]},
            )
        ]
        assert list((bucket / "curated" / "deliveries").rglob("*.parquet"))
    finally:
        launcher.close()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_static_settings_run_cold_and_close_stops_warm_drivers_and_their_jobs(
    make_launcher: Callable[..., LocalSparkLauncher], tmp_path: Path
) -> None:
    # Given: a warm driver, ready
    reports = Reports()
    launcher = make_launcher(report=reports, warm_workers=1)
    wait_until_warm(launcher)
    assert launcher.pool is not None
    (ready,) = launcher.pool._idle

    # When: a job asks for a setting Spark takes only at start
    static = Pipeline(
        "static",
        schedule=[LANDING],
        job=SparkJob(
            "jobs/timed.py", (str(tmp_path / "static.txt"), "0"), spark_conf={"spark.driver.memory": "1g"}
        ),
        outlets=[OUT],
    )
    static_run = new_run("static")
    static_id = launcher.submit(static_run, static)

    # Then: it runs with spark-submit (the setting on its command line) and the driver stays ready
    assert reports.wait_for_state(static_id, {"SUCCESS", "FAILED"}) == "SUCCESS"
    assert reports.states(static_id) == ["SUBMITTED", "RUNNING", "SUCCESS"]
    lines = launcher.log_path(static_run.run_id).read_text().splitlines()
    assert lines[1] == "# spark-submit: spark.driver.memory cannot be set on a warm Spark driver"
    assert lines[2].startswith("$ ") and "--conf spark.driver.memory=1g" in lines[2]
    assert launcher.pool._idle == [ready]

    # When: a long job runs on the warm driver, and the launcher closes
    pid_file = tmp_path / "pid"
    sleepy_run = new_run("sleepy")
    sleepy_id = launcher.submit(sleepy_run, pipeline("sleepy", "jobs/sleeping.py", str(pid_file)))
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert int(pid_file.read_text()) == ready.pid
    reports.wait_for_state(sleepy_id, {"RUNNING"}, timeout=10)
    starting = [d for d in launcher.pool._drivers if d is not ready]
    assert len(starting) == 1  # its replacement
    began = time.monotonic()
    launcher.close(timeout=10)

    # Then: the job's driver, its JVM and the replacement are gone, and nothing more was reported
    assert time.monotonic() - began < 10
    time.sleep(0.5)
    assert [live_members(driver.pid) for driver in (ready, *starting)] == [[], []]
    assert reports.states(sleepy_id) == ["SUBMITTED", "RUNNING"]
    assert "the launcher closed" in launcher.log_path(sleepy_run.run_id).read_text()
    assert launcher.pool.acquire() is None


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_warm_drivers_start_jobs_sooner_than_spark_submit(
    make_launcher: Callable[..., LocalSparkLauncher], tmp_path: Path
) -> None:
    """Submit to RUNNING, to the job's first line and to SUCCESS for a small job: cold, then warm."""
    measured: dict[str, list[tuple[float, float, float]]] = {"cold": [], "warm": []}
    for kind, warm_workers in (("cold", 0), ("warm", 1)):
        reports = Reports()
        launcher = make_launcher(report=reports, warm_workers=warm_workers, max_concurrent=1)
        for i in range(3):
            if warm_workers:
                wait_until_warm(launcher)  # each run finds a ready driver, as between the demo's runs
            mark = tmp_path / f"{kind}-{i}.txt"
            run = new_run(f"{kind}{i}")
            submitted = time.time()
            job_run_id = launcher.submit(run, pipeline(f"{kind}{i}", "jobs/first_line.py", str(mark)))
            assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}) == "SUCCESS"
            first_line, rows = mark.read_text().split()
            assert rows == "10"
            measured[kind].append(
                (
                    reports.reported_at(job_run_id, "RUNNING") - submitted,
                    float(first_line) - submitted,
                    reports.reported_at(job_run_id, "SUCCESS") - submitted,
                )
            )
        launcher.close()

    medians = {
        kind: [statistics.median(sample[i] for sample in samples) for i in range(3)]
        for kind, samples in measured.items()
    }
    for kind, (running, first_line, success) in medians.items():
        print(
            f"{kind}: median of {len(measured[kind])}: RUNNING after {running:.2f} s, first job line after"
            f" {first_line:.2f} s, SUCCESS after {success:.2f} s; all: {measured[kind]}"
        )
    assert medians["warm"][1] < medians["cold"][1]
    assert medians["warm"][2] < medians["cold"][2]


@pytest.mark.integration
def test_a_warm_job_over_the_run_timeout_is_stopped_and_fails(
    emr: EmrServerlessLauncher,
    project: Path,
    tmp_path: Path,
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given: a warm driver (a stand-in that speaks the driver's protocol, without Spark) and jobs that hang
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")
    script = tmp_path / "fake_driver.py"
    script.write_text(FAKE_DRIVER)
    monkeypatch.setattr(spark_pool, "WORKER_SCRIPT", script)
    reports = Reports()
    launcher = LocalSparkLauncher(
        emr=emr,
        repo_root=project,
        entry_points=project_jobs(project),
        work_dir=tmp_path / "work",
        job_env=dict(LOCAL_AWS_ENV) | {"AWS_ENDPOINT_URL_S3": moto.endpoint, "FAKE_SLEEP": "60"},
        report=reports,
        run_timeout=1.0,
        warm_workers=1,
    )
    try:
        wait_until_warm(launcher)
        assert launcher.pool is not None
        (driver,) = launcher.pool._idle
        run = new_run("hangs")

        # When
        job_run_id = launcher.submit(run, pipeline("hangs", "jobs/timed.py", "x", "1"))

        # Then
        assert reports.wait_for_state(job_run_id, {"SUCCESS", "FAILED"}, timeout=30) == "FAILED"
        assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "FAILED"]
        assert reports.of(job_run_id)[-1]["detail"]["stateDetails"] == "Job run timed out after 1 s"
        lines = launcher.log_path(run.run_id).read_text().splitlines()
        assert lines[1].startswith(f"# warm Spark driver pid {driver.pid}")
        # (a small context travels inline in the job's arguments)
        assert lines[3].startswith(
            f"ran {project / 'jobs' / 'timed.py'} x 1 --assetflow-context {INLINE_CONTEXT_PREFIX}"
        )
        assert "over the run timeout of 1 s" in lines[-1]
        assert driver.wait(10) and live_members(driver.pid) == []
        assert launcher.stats() == {"queued": 0, "running": 0, "succeeded": 0, "failed": 1}
    finally:
        launcher.close()


# ---- cancel ---------------------------------------------------------------------------------------------


def _wait_for_pid(pid_file: Path, launcher: LocalSparkLauncher, run: Run) -> int:
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), launcher.log_path(run.run_id).read_text()[-3000:]
    return int(pid_file.read_text())


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("spark_submit")
def test_cancel_really_stops_a_running_job_and_a_queued_one_never_starts(
    make_launcher: Callable[..., LocalSparkLauncher],
    emr: EmrServerlessLauncher,
    emr_client: Any,
    tmp_path: Path,
) -> None:
    from dataclasses import replace

    from assetflow.ports import JobAlreadyEndedError

    # Given: one worker, a job running (its Python driver sleeping) and a second one queued behind it
    reports = Reports()
    launcher = make_launcher(report=reports, max_concurrent=1)
    running, queued = new_run("sleepy"), new_run("sleepy")
    pid_file = tmp_path / "pid"
    running_job = launcher.submit(running, pipeline("sleepy", "jobs/sleeping.py", str(pid_file)))
    queued_job = launcher.submit(queued, pipeline("sleepy", "jobs/sleeping.py", str(tmp_path / "never")))
    driver = _wait_for_pid(pid_file, launcher, running)
    reports.wait_for_state(running_job, {"RUNNING"}, timeout=10)

    # When: both are cancelled (the queued one first)
    launcher.cancel(replace(queued, job_run_id=queued_job))
    began = time.monotonic()
    launcher.cancel(replace(running, job_run_id=running_job))
    reports.wait_for_state(running_job, {"CANCELLED"}, timeout=30)
    stopping = time.monotonic() - began

    # Then: the driver is gone, EMR's API says CANCELLED, the queued job never ran, and a second cancel is refused
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(driver, 0)
    assert reports.states(running_job) == ["SUBMITTED", "RUNNING", "CANCELLING", "CANCELLED"]
    assert reports.states(queued_job) == ["SUBMITTED", "CANCELLING", "CANCELLED"]
    assert not (tmp_path / "never").exists()
    for job in (running_job, queued_job):
        assert (
            emr_client.get_job_run(applicationId=emr.application_id, jobRunId=job)["jobRun"]["state"]
            == "CANCELLED"
        )
    with pytest.raises(JobAlreadyEndedError):
        launcher.cancel(replace(running, job_run_id=running_job))
    assert stopping < 15
    assert "the run was cancelled" in launcher.log_path(running.run_id).read_text()
    assert launcher.stats()["running"] == 0


def test_a_warm_job_is_cancelled_by_stopping_its_driver(
    emr: EmrServerlessLauncher,
    project: Path,
    tmp_path: Path,
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")
    script = tmp_path / "fake_driver.py"
    script.write_text(FAKE_DRIVER)
    monkeypatch.setattr(spark_pool, "WORKER_SCRIPT", script)
    reports = Reports()
    launcher = LocalSparkLauncher(
        emr=emr,
        repo_root=project,
        entry_points=project_jobs(project),
        work_dir=tmp_path / "work",
        job_env=dict(LOCAL_AWS_ENV) | {"AWS_ENDPOINT_URL_S3": moto.endpoint, "FAKE_SLEEP": "60"},
        report=reports,
        warm_workers=1,
    )
    try:
        wait_until_warm(launcher)
        assert launcher.pool is not None
        (driver,) = launcher.pool._idle
        run = new_run("hangs")
        job_run_id = launcher.submit(run, pipeline("hangs", "jobs/timed.py", "x", "1"))
        reports.wait_for_state(job_run_id, {"RUNNING"}, timeout=30)

        launcher.cancel(replace(run, job_run_id=job_run_id))

        assert (
            reports.wait_for_state(job_run_id, {"CANCELLED", "FAILED", "SUCCESS"}, timeout=30) == "CANCELLED"
        )
        assert reports.states(job_run_id) == ["SUBMITTED", "RUNNING", "CANCELLING", "CANCELLED"]
        assert driver.wait(10) and live_members(driver.pid) == []
    finally:
        launcher.close()
