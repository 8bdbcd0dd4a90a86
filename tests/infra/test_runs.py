"""Runs: the EMR Serverless application, its job role, the job-state rule and the time schedules."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from assetflow.cdk.config import split_location
from assetflow.core.schedules import AssetOrTimeSchedule
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra


def _statements(env: Synthesised, role) -> list[dict]:
    role_id = env.logical_id(role)
    return [
        s
        for p in env.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_emr_application_release_capacity_and_auto_start_stop(env: Synthesised) -> None:
    emr = env.config.emr
    env.template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "Type": "SPARK",
            "ReleaseLabel": emr.release_label,
            "AutoStartConfiguration": {"Enabled": True},
            "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": emr.idle_timeout_minutes},
            "MaximumCapacity": {"Cpu": emr.max_cpu, "Memory": emr.max_memory, "Disk": emr.max_disk},
        },
    )


def test_release_label_comes_from_assetflow_versions_by_default(synthesised: dict[str, Synthesised]) -> None:
    from assetflow.versions import EMR_RELEASE_LABEL

    assert synthesised["dev"].config.emr.release_label == EMR_RELEASE_LABEL


def test_job_state_rule_matches_this_applications_state_changes_only(env: Synthesised) -> None:
    service = env.stack.service
    env.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.emr-serverless"],
                "detail-type": ["EMR Serverless Job Run State Change"],
                "detail": {
                    "applicationId": [
                        {"Fn::GetAtt": [env.logical_id(service.spark.application), "ApplicationId"]}
                    ]
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [env.logical_id(service.run_state.handler.function), "Arn"]},
                        "DeadLetterConfig": {
                            "Arn": {"Fn::GetAtt": [env.logical_id(service.run_state.dlq), "Arn"]}
                        },
                    }
                )
            ],
        },
    )


def test_a_schedule_per_time_pipeline_with_its_expression_timezone_and_input(env: Synthesised) -> None:
    # Every schedule with a time part ticks, whatever its kind; manual and asset-only ones never do.
    time_pipelines = {
        pid: p.schedule for pid, p in env.catalog.pipelines.items() if p.schedule.time is not None
    }
    assert time_pipelines
    assert any(isinstance(s, AssetOrTimeSchedule) for s in time_pipelines.values())
    schedules = [r["Properties"] for r in env.of_type("AWS::Scheduler::Schedule").values()]
    by_pipeline = {json.loads(s["Target"]["Input"])["pipeline"]: s for s in schedules}
    assert set(by_pipeline) == set(time_pipelines)
    tick = env.logical_id(env.stack.service.schedules.handler.function)
    for pid, schedule in time_pipelines.items():
        found = by_pipeline[pid]
        assert found["ScheduleExpression"] == schedule.eventbridge_expression()
        assert found["ScheduleExpressionTimezone"] == schedule.timezone
        assert json.loads(found["Target"]["Input"]) == {
            "pipeline": pid,
            "scheduled_time": "<aws.scheduler.scheduled-time>",
        }
        assert found["Target"]["Arn"] == {"Fn::GetAtt": [tick, "Arn"]}
        assert found["Target"]["DeadLetterConfig"]["Arn"] == {
            "Fn::GetAtt": [env.logical_id(env.stack.service.schedules.dlq), "Arn"]
        }


def test_start_job_run_is_scoped_to_the_application_and_pass_role_to_the_job_role(env: Synthesised) -> None:
    service = env.stack.service
    application_arn = {"Fn::GetAtt": [env.logical_id(service.spark.application), "Arn"]}
    job_role_arn = {"Fn::GetAtt": [env.logical_id(service.spark.job_role), "Arn"]}
    wake_role_arn = {"Fn::GetAtt": [env.logical_id(service.schedules.role), "Arn"]}
    # The API starts runs too (manual, replayed, backfilled) and cancels them; the sweep finishes stuck runs.
    starters = {
        service.evaluator.handler,
        service.run_state.handler,
        service.schedules.handler,
        service.reconciliation.handler,
        service.api.handler,
    }
    for function in service.functions:
        statements = _statements(env, function.role)
        starts = [s for s in statements if "emr-serverless:StartJobRun" in _actions(s)]
        passes = [s for s in statements if "iam:PassRole" in _actions(s)]
        if function not in starters:
            assert not starts and not passes, function.node.path
            continue
        assert [s["Resource"] for s in starts] == [application_arn]
        by_resource = {json.dumps(s["Resource"], sort_keys=True): s["Condition"] for s in passes}
        assert by_resource == {
            json.dumps(job_role_arn, sort_keys=True): {
                "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
            },
            # ...and the schedules' role, to the one-time wake-ups they create
            json.dumps(wake_role_arn, sort_keys=True): {
                "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
            },
        }


def test_wake_ups_are_created_in_their_group_only_by_the_functions_that_evaluate_queues(
    env: Synthesised,
) -> None:
    service = env.stack.service
    group = env.stack.resolve(service.schedules.wake_group.schedule_group_name)
    for function in service.functions:
        creates = [s for s in _statements(env, function.role) if "scheduler:CreateSchedule" in _actions(s)]
        environment = env.resources[env.logical_id(function.function)]["Properties"]["Environment"][
            "Variables"
        ]
        if function is service.api.handler or function in (
            service.evaluator.handler,
            service.run_state.handler,
            service.schedules.handler,
            service.reconciliation.handler,
        ):
            (statement,) = creates
            assert group in json.dumps(statement["Resource"]) and json.dumps(statement["Resource"]).endswith(
                '/*"]]}'
            )
            assert environment["WAKE_SCHEDULE_GROUP"] == group
            assert ("WAKE_TARGET_ARN" in environment) is (function is not service.schedules.handler)
        else:
            assert not creates, function.node.path


def test_put_events_on_the_listener_bus_only_for_evaluator_run_state_the_sweep_and_ticks(
    env: Synthesised,
) -> None:
    service = env.stack.service
    bus_arn = {"Fn::GetAtt": [env.logical_id(service.event_bus), "Arn"]}
    # The tick function announces missed deadlines (AssetLate).
    publishers = (
        service.evaluator.handler,
        service.run_state.handler,
        service.reconciliation.handler,
        service.schedules.handler,
    )
    for function in service.functions:
        puts = [s for s in _statements(env, function.role) if "events:PutEvents" in _actions(s)]
        if function in publishers:
            assert [s["Resource"] for s in puts] == [bus_arn]
        else:
            assert not puts, function.node.path


def test_job_role_reaches_exactly_the_configured_data_locations_and_runs_prefixes(env: Synthesised) -> None:
    service = env.stack.service
    statements = _statements(env, service.spark.job_role)
    object_resources = {
        json.dumps(r, sort_keys=True)
        for s in statements
        if any(a in ("s3:GetObject", "s3:PutObject") for a in _actions(s))
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    bucket = env.logical_id(service.runs.bucket)
    expected = {
        json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, suffix]]}, sort_keys=True)
        # Under runs/: read contexts, write outlet metadata, nothing else (run-scoped by the runs' tokens).
        for suffix in ("/runs/*/context.json", "/runs/*/outlets.json", "/code/*", "/extras/*")
    }
    for location in (*env.config.data_read_locations, *env.config.data_write_locations):
        name, prefix = split_location(location)
        expected.add(
            json.dumps(
                {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":s3:::{name}/{prefix}*"]]},
                sort_keys=True,
            )
        )
    assert object_resources == expected
    writes = [s for s in statements if "s3:PutObject" in _actions(s)]
    written = {
        json.dumps(r, sort_keys=True)
        for s in writes
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    assert not any("/code/" in r for r in written), "job code is read-only for jobs"
    assert not any("context.json" in r for r in written), "run contexts are read-only for jobs"
    listings = [s for s in statements if "s3:ListBucket" in _actions(s)]
    assert not any("runs/" in json.dumps(s) for s in listings), "jobs may not list runs/ (the runs' tokens)"


def test_only_the_functions_may_make_run_tokens(env: Synthesised) -> None:
    service = env.stack.service
    key = env.logical_id(service.spark.run_token_key)
    makers = {
        service.evaluator.handler,
        service.run_state.handler,
        service.schedules.handler,
        service.reconciliation.handler,
        service.api.handler,  # manual, replayed and backfilled runs start there too
    }
    for function in service.functions:
        macs = [s for s in _statements(env, function.role) if "kms:GenerateMac" in _actions(s)]
        if function in makers:
            assert [s["Resource"] for s in macs] == [{"Fn::GetAtt": [key, "Arn"]}], function.node.path
        else:
            assert not macs, function.node.path
    assert not [s for s in _statements(env, service.spark.job_role) if "kms:GenerateMac" in _actions(s)]
    spec = env.resources[key]["Properties"]
    assert (spec["KeySpec"], spec["KeyUsage"]) == ("HMAC_256", "GENERATE_VERIFY_MAC")


def test_job_role_trusts_emr_serverless_for_this_application(env: Synthesised) -> None:
    role = env.resources[env.logical_id(env.stack.service.spark.job_role)]["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "emr-serverless.amazonaws.com"}
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == {
        "Fn::GetAtt": [env.logical_id(env.stack.service.spark.application), "Arn"]
    }


def test_job_code_is_deployed_under_the_code_prefix_of_the_runs_bucket(env: Synthesised) -> None:
    env.template.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {
            "DestinationBucketName": {"Ref": env.logical_id(env.stack.service.runs.bucket)},
            "DestinationBucketKeyPrefix": "code/",
            "Prune": True,
        },
    )
