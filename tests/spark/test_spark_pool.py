"""Warm PySpark drivers: one job per driver process, run as spark-submit would run it.

The pool's own rules (how many drivers, who waits for which, failed starts, close) are checked quickly with a
stand-in driver that speaks the same protocol without Spark; the driver itself with real Spark.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assetflow_dev import spark_pool
from assetflow_dev.spark_pool import (
    MAX_START_FAILURES,
    SparkPool,
    WarmDriverLostError,
    WarmJob,
    WarmJobRefusedError,
)
from assetflow_job.local import LOCAL_SPARK_CONF
from tests.examples import example_py_files_zip

#: A driver's start on this 2-core machine takes 10-30 s; leave room for a busy machine.
READY_TIMEOUT = 240.0

# Records what a job sees of its process.
PROBE_JOB = """
import json, os, sys, threading
from pyspark.sql import SparkSession
import assetflow_job, spark_jobs.common

spark = SparkSession.builder.appName("probe").config("spark.sql.session.timeZone", "UTC").getOrCreate()
facts = {
    "pid": os.getpid(),
    "name": __name__,
    "argv": sys.argv,
    "path_head": sys.path[:2],
    "helper_from": assetflow_job.__file__,
    "common_from": spark_jobs.common.__file__,
    "env": os.environ.get("PROBE_VALUE"),
    "leaked": sorted(k for k in os.environ if k.startswith("ASSETFLOW_WARM")),
    "cwd": os.getcwd(),
    "partitions": spark.conf.get("spark.sql.shuffle.partitions"),
    "time_zone": spark.conf.get("spark.sql.session.timeZone"),
    "active": SparkSession.getActiveSession() is spark,
    "master": spark.sparkContext.master,
    "rows": spark.range(7).count(),
}
with open(sys.argv[1], "w") as out:
    json.dump(facts, out)
print("probe done", flush=True)
sys.exit(0)
"""
FAILING_JOB = """
def check(partition):
    raise ValueError(f"no rows for partition {partition}")

print("about to fail", flush=True)
check(42)
"""


def live_members(pgid: int) -> list[int]:
    """The processes of a process group that still run (zombies wait for init to reap them, so they don't)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


# ---- the pool, with a stand-in driver -----------------------------------------------------------------

# Speaks the driver's protocol without Spark. FAKE_MODE=fail: exits before it is ready; =vanish: exits when
# offered a job. Settings named static.* are refused. The job's env FAKE_STATUS is its exit status,
# FAKE_SLEEP how long it runs.
FAKE_DRIVER = """
import json, os, socket, sys, time
settings = json.loads(os.environ.pop("ASSETFLOW_WARM_DRIVER"))
mode = os.environ.get("FAKE_MODE", "")
if mode == "fail":
    print("no Java here", flush=True)
    sys.exit(3)
time.sleep(float(os.environ.get("FAKE_START_SECONDS", "0")))
sock = socket.create_connection(tuple(settings["address"]))
reader = sock.makefile("rb")

def send(**message):
    sock.sendall(json.dumps(message).encode() + b"\\n")

send(type="ready", token=settings["token"], pid=os.getpid(), seconds=0.0)
while True:
    line = reader.readline()
    if not line:
        sys.exit(0)
    job = json.loads(line)
    if mode == "vanish":
        sys.exit(9)
    refused = [key for key in job["spark_conf"] if key.startswith("static.")]
    if not refused:
        break
    send(type="refused", keys=refused)
send(type="accepted")
with open(job["log_path"], "a") as log:
    log.write(job["log_header"] + "ran " + " ".join([job["entry_point"], *job["argv"]]) + "\\n")
time.sleep(float(job["env"].get("FAKE_SLEEP", "0")))
status = int(job["env"].get("FAKE_STATUS", "0"))
send(type="finished", status=status, summary=f"FakeError: status {status}" if status else "")
sys.exit(status)
"""


@pytest.fixture
def fake_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., SparkPool]]:
    script = tmp_path / "fake_driver.py"
    script.write_text(FAKE_DRIVER)
    monkeypatch.setattr(spark_pool, "WORKER_SCRIPT", script)
    made: list[SparkPool] = []

    def make(size: int = 1, idle_stop: float | None = None, **env: str) -> SparkPool:
        pool = SparkPool(
            size=size,
            python=sys.executable,
            master="local[1]",
            spark_conf={},
            py_files=[],
            env=dict(os.environ) | env,
            work_dir=tmp_path / "warm",
            start_timeout=20,
            idle_stop=idle_stop,
        )
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()


def fake_job(tmp_path: Path, *, spark_conf: dict[str, str] | None = None, **env: str) -> WarmJob:
    return WarmJob(
        entry_point=tmp_path / "job.py",
        arguments=("--assetflow-context", "s3://runs/ctx.json"),
        env=env,
        log_path=tmp_path / "job.log",
        spark_conf=spark_conf or {},
        log_header="# header\n",
    )


def test_a_pool_keeps_its_drivers_ready_and_replaces_each_that_takes_a_job(
    fake_pool: Callable[..., SparkPool], tmp_path: Path
) -> None:
    # Given
    pool = fake_pool(size=2)
    assert pool.wait_ready(timeout=20)
    assert pool.counts() == {"starting": 0, "idle": 2, "reserved": 0, "busy": 0}
    first = pool.acquire()
    assert first is not None

    # When: a job the driver refuses, then one it takes
    with pytest.raises(WarmJobRefusedError):
        first.offer(fake_job(tmp_path, spark_conf={"static.memory": "1g", "runtime.x": "1"}))
    assert pool.refused_settings({"static.memory": "1g"}) == ["static.memory"]
    assert pool.counts()["idle"] == 2
    again = pool.acquire()
    assert again is not None
    again.offer(fake_job(tmp_path, FAKE_STATUS="4"))

    # Then: the job's outcome; the driver ends and a replacement takes its place
    outcome = again.result(20)
    assert outcome is not None and (outcome.status, outcome.summary) == (4, "FakeError: status 4")
    assert (tmp_path / "job.log").read_text() == (
        f"# header\nran {tmp_path / 'job.py'} --assetflow-context s3://runs/ctx.json\n"
    )
    assert again.wait(10)
    assert pool.wait_ready(timeout=20)
    assert again not in pool._drivers and len(pool._drivers) == 2


def test_a_driver_that_dies_before_it_accepts_is_lost_and_replaced(
    fake_pool: Callable[..., SparkPool], tmp_path: Path
) -> None:
    pool = fake_pool(FAKE_MODE="vanish")
    assert pool.wait_ready(timeout=20)
    driver = pool.acquire()
    assert driver is not None

    with pytest.raises(WarmDriverLostError):
        driver.offer(fake_job(tmp_path))

    assert driver.wait(10)
    assert pool.wait_ready(timeout=20)
    assert pool.acquire() is not driver


def test_acquire_waits_only_for_a_driver_no_earlier_caller_waits_for(
    fake_pool: Callable[..., SparkPool],
) -> None:
    # Given: one driver, still starting
    pool = fake_pool(FAKE_START_SECONDS="1")
    assert pool.counts()["starting"] == 1
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire()))
    waiter.start()
    deadline = time.monotonic() + 5
    while pool._waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)

    # When: a second caller asks while the first waits for that driver
    began = time.monotonic()
    second = pool.acquire()

    # Then: the second goes cold at once; the first gets the driver when it is ready
    assert second is None and time.monotonic() - began < 0.5
    waiter.join(20)
    assert len(got) == 1 and got[0] is not None
    assert pool.counts()["reserved"] == 1


def test_drivers_that_keep_failing_to_start_stop_the_pool_starting_more(
    fake_pool: Callable[..., SparkPool], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="assetflow_dev.spark_pool")
    pool = fake_pool(FAKE_MODE="fail")

    began = time.monotonic()
    assert pool.acquire() is None  # it waits through the failed starts, then gives up

    assert time.monotonic() - began < 20
    assert pool.counts() == {"starting": 0, "idle": 0, "reserved": 0, "busy": 0}
    assert pool.acquire() is None
    failures = [r for r in caplog.records if r.getMessage() == "warm driver failed to start"]
    assert len(failures) == MAX_START_FAILURES
    assert "no Java here" in failures[0].__dict__["output"]
    assert any(r.getMessage().startswith("warm drivers keep failing") for r in caplog.records)
    assert len(list((pool.work_dir).glob("*.log"))) == MAX_START_FAILURES  # kept, to tell why


def test_close_stops_ready_and_busy_drivers(fake_pool: Callable[..., SparkPool], tmp_path: Path) -> None:
    # Given: one driver running a long job and its replacement ready
    pool = fake_pool()
    assert pool.wait_ready(timeout=20)
    busy = pool.acquire()
    assert busy is not None
    busy.offer(fake_job(tmp_path, FAKE_SLEEP="60"))
    assert pool.wait_ready(timeout=20)
    (ready,) = pool._idle

    # When
    began = time.monotonic()
    pool.close(timeout=10)

    # Then: both gone, the job's result is its driver's end, and nothing more starts
    assert time.monotonic() - began < 10
    assert busy.wait(5) and ready.wait(5)
    outcome = busy.result(5)
    assert outcome is not None and outcome.status < 0  # killed by a signal
    assert [live_members(d.pid) for d in (busy, ready)] == [[], []]
    assert pool.acquire() is None and pool.counts() == {"starting": 0, "idle": 0, "reserved": 0, "busy": 0}
    pool.close()  # idempotent


def test_ready_drivers_stop_after_their_idle_time_and_start_again_for_the_next_job(
    fake_pool: Callable[..., SparkPool], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As EMR Serverless stops an idle application: no driver process left, the next job waits for one."""
    caplog.set_level(logging.INFO, logger="assetflow_dev.spark_pool")
    # Given: two ready drivers nobody asks for
    pool = fake_pool(size=2, idle_stop=1.0)
    assert pool.wait_ready(timeout=20)
    ready = list(pool._idle)

    # When: their idle time passes
    assert all(driver.wait(10) for driver in ready)

    # Then: stopped, none started in their place, and no warning about drivers lost
    time.sleep(0.5)
    assert pool._drivers == [] and pool.counts() == {"starting": 0, "idle": 0, "reserved": 0, "busy": 0}
    assert [live_members(d.pid) for d in ready] == [[], []]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    # And the next job gets a driver started for it (the pool refills to its size)
    driver = pool.acquire()
    assert driver is not None and driver not in ready
    driver.offer(fake_job(tmp_path))
    outcome = driver.result(20)
    assert outcome is not None and outcome.status == 0
    assert pool.wait_ready(timeout=20) and len(pool._idle) == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("warm drivers stopped after their idle time; the next run starts one") == 1
    assert messages.count("warm drivers starting again after their idle stop") == 1


def test_no_driver_stops_while_a_job_runs_and_the_idle_time_counts_from_its_end(
    fake_pool: Callable[..., SparkPool], tmp_path: Path
) -> None:
    # Given: a job of 3 s on one driver, its replacement ready beside it, an idle stop of 1 s
    pool = fake_pool(idle_stop=1.0)
    assert pool.wait_ready(timeout=20)
    busy = pool.acquire()
    assert busy is not None
    busy.offer(fake_job(tmp_path, FAKE_SLEEP="3"))
    began = time.monotonic()
    assert pool.wait_ready(timeout=20)
    (replacement,) = pool._idle

    # Then: the replacement stays while the job runs, and stops about its idle time after the job's end
    assert busy.result(20) is not None
    ended = time.monotonic()
    assert ended - began >= 2.5 and replacement.state == "idle"
    assert replacement.wait(10)
    assert time.monotonic() - ended >= 0.9
    assert pool._drivers == []


# ---- the driver, with real Spark ---------------------------------------------------------------------


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[SparkPool]:
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -r requirements-spark.txt)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the Spark tests need Java 17 (java on PATH or JAVA_HOME)", pytrace=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    env |= {
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        "PROBE_VALUE": "from the pool",
    }
    spark_pool = SparkPool(
        size=1,
        python=sys.executable,
        master="local[2]",
        spark_conf=LOCAL_SPARK_CONF,
        py_files=[str(example_py_files_zip(tmp_path / "assetflow_jobs.zip"))],
        env=env,
        work_dir=tmp_path / "warm",
    )
    yield spark_pool
    spark_pool.close()


@pytest.mark.spark
@pytest.mark.slow
def test_a_warm_driver_runs_one_job_as_spark_submit_would_and_exits(pool: SparkPool, tmp_path: Path) -> None:
    # Given: a ready driver, and jobs outside the repo (their helpers come from the py-files zip)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "probe.py").write_text(PROBE_JOB)
    (jobs / "failing.py").write_text(FAILING_JOB)
    facts_path, probe_log = tmp_path / "facts.json", tmp_path / "logs" / "probe.log"
    probe_log.parent.mkdir()
    probe_log.write_text("# job run j-1 of run r-1\n")
    assert pool.wait_ready(timeout=READY_TIMEOUT), "no warm driver became ready"
    driver = pool.acquire()
    assert driver is not None and pool.counts() == {"starting": 0, "idle": 0, "reserved": 1, "busy": 0}

    # When: a job with a setting Spark takes only at start
    def job(entry_point: Path, log: Path, spark_conf: dict[str, str], *arguments: str) -> WarmJob:
        env = {"PROBE_VALUE": "from the job"}
        return WarmJob(entry_point, arguments, env, log, spark_conf, log_header="# on a warm driver\n")

    with pytest.raises(WarmJobRefusedError) as refused:
        driver.offer(job(jobs / "probe.py", probe_log, {"spark.driver.memory": "2g"}))

    # Then: refused, and the driver is ready for another job
    assert refused.value.keys == ("spark.driver.memory",)
    assert pool.refused_settings({"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "3"}) == [
        "spark.driver.memory"
    ]
    assert pool.refused_settings({"spark.driver.memory": "1g"}) == []
    assert pool.counts()["idle"] == 1
    assert pool.acquire() is driver

    # When: a job whose settings are runtime SQL settings, or static ones the driver started with
    runtime_conf = {"spark.sql.shuffle.partitions": "3", "spark.ui.enabled": "false"}
    driver.offer(job(jobs / "probe.py", probe_log, runtime_conf, str(facts_path), "x y"))

    # Then: it runs in the driver's process, with the driver's session, as spark-submit would run it
    outcome = driver.result(READY_TIMEOUT)
    assert outcome is not None and (outcome.status, outcome.summary) == (0, ""), probe_log.read_text()[-3000:]
    facts = json.loads(facts_path.read_text())
    zip_path = pool.py_files[0]
    assert facts["pid"] == driver.pid
    assert facts["name"] == "__main__"
    assert facts["argv"] == [str(jobs / "probe.py"), str(facts_path), "x y"]
    assert facts["path_head"] == [str(jobs), zip_path]
    assert facts["helper_from"].startswith(zip_path + os.sep)
    assert facts["common_from"].startswith(zip_path + os.sep)
    assert (facts["env"], facts["leaked"]) == ("from the job", [])
    assert Path(facts["cwd"]) == driver.folder.resolve()
    assert (facts["partitions"], facts["time_zone"], facts["active"]) == ("3", "UTC", True)
    assert (facts["master"], facts["rows"]) == ("local[2]", 7)
    # The run's log: the launcher's line, the driver's header, then the job's output and the JVM's
    log = probe_log.read_text()
    assert log.startswith("# job run j-1 of run r-1\n# on a warm driver\n")
    assert "probe done" in log
    assert "WARN SparkSession: Using an existing Spark session" in log  # the JVM's output, relayed
    # One job per process: the driver and its JVM end, a replacement starts
    assert driver.wait(60)
    assert live_members(driver.pid) == []
    assert pool.counts()["starting"] + pool.counts()["idle"] == 1

    # When: a job that raises, on the replacement
    failing_log = tmp_path / "logs" / "failing.log"
    replacement = pool.acquire()
    assert replacement is not None and replacement is not driver
    replacement.offer(job(jobs / "failing.py", failing_log, {}))

    # Then: exit status 1, the exception's line as the summary, Python's traceback without the driver's frames
    outcome = replacement.result(READY_TIMEOUT)
    assert outcome is not None and (outcome.status, outcome.summary) == (
        1,
        "ValueError: no rows for partition 42",
    )
    lines = failing_log.read_text().splitlines()
    assert lines[:2] == ["# on a warm driver", "about to fail"]
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[3].endswith(f'{jobs / "failing.py"}", line 6, in <module>')
    assert lines[-1] == "ValueError: no rows for partition 42"
