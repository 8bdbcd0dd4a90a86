"""The local moto server keeps its module list and error tables: same answers, no per-request rebuild."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from botocore.exceptions import ClientError

from assetflow_dev import client
from assetflow_dev.emulators import MotoServer
from assetflow_dev.moto_server import PATCHED_MOTO

CHECK = textwrap.dedent(
    """
    import os
    from botocore.loaders import Loader
    from botocore.model import ServiceModel
    from moto import backends
    from moto.core import errors
    from assetflow_dev.moto_server import patch_dispatch

    before = list(backends.list_of_moto_modules())
    patch_dispatch()
    patch_dispatch()  # idempotent

    def no_disk(*args, **kwargs):
        raise AssertionError("the module list was read from the disk again")

    listdir, os.listdir = os.listdir, no_disk
    assert list(backends.list_of_moto_modules()) == before and "s3" in before
    os.listdir = listdir
    s3 = ServiceModel(Loader().load_service_model("s3", "service-2"), "s3")
    first = errors.ErrorLookupFactory().for_service(s3)
    assert errors.ErrorLookupFactory().for_service(s3) is first  # built once, not per error answer
    import logging
    assert logging.getLogger("werkzeug").level == logging.WARNING  # no access-log line per request
    print("ok")
    """
)


def test_the_patched_dispatch_answers_from_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_runtimes_moto_still_answers_each_service_and_its_errors(moto_server: MotoServer) -> None:
    s3 = client("s3", moto_server.endpoint)
    sqs = client("sqs", moto_server.endpoint)
    bucket = f"dispatch-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    for _ in range(2):  # the second answer comes from the kept table
        with pytest.raises(ClientError) as missing:
            s3.get_object(Bucket=bucket, Key="runs/none/metadata.json")
        assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as no_queue:
        sqs.get_queue_url(QueueName=f"absent-{uuid.uuid4().hex[:8]}")
    assert "NonExistentQueue" in no_queue.value.response["Error"]["Code"]
    url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "x"


def test_job_runs_are_found_by_id_and_an_unknown_one_is_still_refused(moto_server: MotoServer) -> None:
    emr = client("emr-serverless", moto_server.endpoint)
    tag = uuid.uuid4().hex[:8]
    application = emr.create_application(
        name=f"dispatch-{tag}", releaseLabel="emr-7.12.0", type="SPARK", clientToken=tag
    )["applicationId"]
    started = [
        emr.start_job_run(
            applicationId=application,
            executionRoleArn="arn:aws:iam::123456789012:role/jobs",
            clientToken=f"{tag}-{n}",
            name=f"run-{n}",
            jobDriver={"sparkSubmit": {"entryPoint": "s3://code/job.py"}},
        )["jobRunId"]
        for n in range(3)
    ]
    for n, job_run_id in enumerate(started):
        found = emr.get_job_run(applicationId=application, jobRunId=job_run_id)["jobRun"]
        assert found["jobRunId"] == job_run_id and found["name"] == f"run-{n}"
    with pytest.raises(ClientError) as unknown:
        emr.get_job_run(applicationId=application, jobRunId="0000000000000000")
    assert unknown.value.response["Error"]["Code"] == "ResourceNotFoundException"


REFUSE = textwrap.dedent(
    """
    import sys
    import moto
    from assetflow_dev import moto_server

    moto.__version__ = "0.0.0"
    try:
        getattr(moto_server, sys.argv[1])()
    except RuntimeError as exc:
        print(exc)
    else:
        print("patched")
    """
)


@pytest.mark.parametrize(
    ("patch", "what"), [("patch_sqs", "SQS"), ("patch_dispatch", "dispatch"), ("patch_kinesis", "Kinesis")]
)
def test_each_patch_refuses_a_moto_it_was_not_written_for(patch: str, what: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", REFUSE, patch], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"assetflow patches moto {PATCHED_MOTO}'s {what}; found moto 0.0.0"
