"""EMR Serverless CancelJobRun through the launcher port: what it answers for ended and cancelling job runs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from assetflow_dev import MotoServer, client

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/jobs"


def test_cancel_job_run_answers_for_ended_and_cancelling_job_runs(moto_server: MotoServer) -> None:
    from botocore.stub import Stubber

    from assetflow.adapters.emr import EmrServerlessLauncher
    from assetflow.core.events import Run, RunState
    from assetflow.ports import JobAlreadyEndedError, JobServiceUnavailableError

    # Failure shapes moto cannot produce (it cancels any job run): botocore's Stubber answers as EMR does.
    emr: Any = client("emr-serverless", moto_server.endpoint)
    launcher = EmrServerlessLauncher(
        emr_client=emr,
        s3_client=None,
        application_id="app1",
        execution_role_arn=ROLE,
        runs_bucket="b",
        events_table="t",
    )
    run = Run("r1", "p", RunState.RUNNING, NOW, job_run_id="job1")
    job = {
        "applicationId": "app1",
        "jobRunId": "job1",
        "arn": "arn:aws:emr-serverless:us-east-1:123456789012:/applications/app1/jobruns/job1",
        "createdBy": "arn:aws:iam::123456789012:user/assetflow",
        "createdAt": NOW,
        "updatedAt": NOW,
        "executionRole": ROLE,
        "releaseLabel": "emr-7.5.0",
        "jobDriver": {"sparkSubmit": {"entryPoint": "s3://b/job.py"}},
    }
    with Stubber(emr) as stub:
        stub.add_client_error("cancel_job_run", "ValidationException", "Job run is in terminal state")
        stub.add_response("get_job_run", {"jobRun": {**job, "state": "SUCCESS", "stateDetails": "-"}})
        with pytest.raises(JobAlreadyEndedError, match="SUCCESS"):
            launcher.cancel(run)
        stub.add_client_error("cancel_job_run", "ValidationException", "Job run is cancelling")
        stub.add_response("get_job_run", {"jobRun": {**job, "state": "CANCELLING", "stateDetails": "-"}})
        launcher.cancel(run)  # a second cancel while it stops is harmless
        stub.add_client_error("cancel_job_run", "ThrottlingException", "slow down", http_status_code=429)
        with pytest.raises(JobServiceUnavailableError):
            launcher.cancel(run)
        stub.add_client_error(
            "cancel_job_run", "ResourceNotFoundException", "no such job run", http_status_code=404
        )
        with pytest.raises(JobAlreadyEndedError, match="no longer exists"):
            launcher.cancel(run)
