"""The local runtime sends the run-state function the job states the stack's rule matches, and no others."""

from __future__ import annotations

from typing import Any

from assetflow.adapters.emr import RUN_MOVING_STATES
from assetflow_dev.launcher import job_state_event
from assetflow_dev.runtime import moving_states_only

EMR_STATES = ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "SUCCESS", "FAILED", "CANCELLING", "CANCELLED")


def test_only_the_states_that_move_a_run_reach_the_run_state_function() -> None:
    # Given the launcher's report wired as the runtime wires it
    delivered: list[dict[str, Any]] = []
    report = moving_states_only(lambda event, context: delivered.append(event))

    # When a job goes through every state EMR Serverless reports
    for state in EMR_STATES:
        report(job_state_event(application_id="app", job_run_id="j1", state=state))
    # (and with a context, as a wrapper passes one)
    report(job_state_event(application_id="app", job_run_id="j2", state="SUCCESS"), None)

    # Then the function got those the stack's rule matches, in order: the ends (a run is created queued and
    # running from its submission: SUBMITTED to RUNNING would change nothing, and CANCELLING is not an end)
    moved = ["SUCCESS", "FAILED", "CANCELLED"]
    assert [e["detail"]["state"] for e in delivered] == [*moved, "SUCCESS"]
    assert set(RUN_MOVING_STATES) == {"SUCCESS", "FAILED", "CANCELLED"}
