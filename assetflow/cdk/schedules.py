"""Time schedules: an EventBridge Scheduler schedule per time-scheduled pipeline, and one-time wake-ups.

Every pipeline whose schedule has a time part gets a recurring schedule invoking the tick function: time-only
schedules (cron strings, presets, timedeltas), ``AssetOrTimeSchedule``, ``AssetAndTimeSchedule`` and
``CronPartitionTimetable``. Manual (``schedule=None``) and asset-only pipelines get none. The functions that
evaluate queues create one-time ``at(...)`` schedules in the wake-up group when a debounce or max-wait deadline
is due; each deletes itself after it ran.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack, TimeZone
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.nag import acknowledge, wildcard_resource
from assetflow.cdk.queues import dead_letter_queue
from assetflow.core.catalog import Catalog
from assetflow.core.schedules import Schedule

TICK_HANDLER = "assetflow.functions.handle_schedule_tick"


def time_pipelines(catalog: Catalog) -> dict[str, Schedule]:
    """The pipelines whose schedule has a time part, by id."""
    return {pid: p.schedule for pid, p in catalog.pipelines.items() if p.schedule.time is not None}


class TimeSchedules(Construct):
    """The tick function and, per time pipeline, a schedule sending ``{"pipeline", "scheduled_time"}``.

    All schedules share one role that may invoke the tick function and write to the schedules' DLQ.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalog: Catalog,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        key: kms.IKey,
        service: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = ServiceFunction(
            self,
            "Handler",
            defaults=defaults,
            handler_module=TICK_HANDLER,
            description="assetflow schedule tick: starts the run of a time-scheduled pipeline",
            service=service,
            timeout=config.evaluator_timeout,
            memory_mb=config.evaluator_memory_mb,
        )
        self.dlq = dead_letter_queue(
            self, "DeadLetters", key=key, retention=config.dlq_retention, removal_policy=config.removal_policy
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
            description="Lets assetflow's schedules invoke the tick function",
        )
        # Scheduler sends dead letters with this role, so the role encrypts them with the DLQ's key.
        key.grant(self.role, "kms:GenerateDataKey", "kms:Decrypt")
        self.schedules: dict[str, scheduler.Schedule] = {}
        for pipeline_id, schedule in time_pipelines(catalog).items():
            spec = schedule.time
            assert spec is not None  # noqa: S101  (time_pipelines selects schedules with a time part)
            self.schedules[pipeline_id] = scheduler.Schedule(
                self,
                f"Tick-{pipeline_id}",
                description=f"assetflow time schedule of pipeline {pipeline_id} ({schedule.kind}): "
                f"{spec.source} ({spec.timezone})",
                schedule=scheduler.ScheduleExpression.expression(spec.expression, TimeZone.of(spec.timezone)),
                start=spec.start,
                target=scheduler_targets.LambdaInvoke(
                    self.handler.function,
                    input=scheduler.ScheduleTargetInput.from_object(
                        {"pipeline": pipeline_id, "scheduled_time": scheduler.ContextAttribute.scheduled_time}
                    ),
                    role=self.role,
                    dead_letter_queue=self.dlq,
                    retry_attempts=5,
                    max_event_age=Duration.hours(1),
                ),
            )
        # One-time wake-ups: the evaluating functions create them here; Scheduler deletes each after it ran.
        self.wake_group = scheduler.ScheduleGroup(self, "WakeUps")
        acknowledge(
            self.role,
            wildcard_resource(self.handler.function, ":*"),
            "LambdaInvoke's grant_invoke also names the function's versions and aliases (<arn>:*); the schedules "
            "invoke the tick function only.",
        )

    def grant_wake_ups(self, *functions: ServiceFunction) -> None:
        """Let these functions create one-time wake-ups (and tell them where: group, target, role, DLQ).

        The tick function finds its own ARN at run time (an environment variable naming itself would be a
        circular reference).
        """
        group = self.wake_group.schedule_group_name
        for function in functions:
            if function is not self.handler:
                function.function.add_environment("WAKE_TARGET_ARN", self.handler.function.function_arn)
            function.function.add_environment("WAKE_SCHEDULE_GROUP", group)
            function.function.add_environment("WAKE_ROLE_ARN", self.role.role_arn)
            function.function.add_environment("WAKE_DLQ_ARN", self.dlq.queue_arn)
            function.role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="CreateWakeUps",
                    actions=["scheduler:CreateSchedule"],
                    resources=[
                        Stack.of(self).format_arn(
                            service="scheduler", resource="schedule", resource_name=f"{group}/*"
                        )
                    ],
                )
            )
            function.role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="PassWakeUpRole",
                    actions=["iam:PassRole"],
                    resources=[self.role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                )
            )
            acknowledge(
                function.role,
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:"
                f"schedule/{Stack.of(self).resolve(group)}/*]",
                "One-time wake-ups are created at run time in this group only; their names derive from the queue "
                "and the deadline.",
            )
