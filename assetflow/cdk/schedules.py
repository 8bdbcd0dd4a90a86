"""Time schedules: one EventBridge Scheduler schedule per AssetOrTimeSchedule pipeline, invoking the tick function."""

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
from assetflow.core.schedules import AssetOrTimeSchedule

TICK_HANDLER = "assetflow.functions.handle_schedule_tick"


def time_pipelines(catalog: Catalog) -> dict[str, AssetOrTimeSchedule]:
    """The pipelines with a time part (``AssetOrTimeSchedule``), by id."""
    return {
        pid: p.schedule for pid, p in catalog.pipelines.items() if isinstance(p.schedule, AssetOrTimeSchedule)
    }


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
            self.schedules[pipeline_id] = scheduler.Schedule(
                self,
                f"Tick-{pipeline_id}",
                description=f"assetflow time schedule of pipeline {pipeline_id}: {schedule.cron} ({schedule.timezone})",
                schedule=scheduler.ScheduleExpression.expression(
                    schedule.eventbridge_expression(), TimeZone.of(schedule.timezone)
                ),
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
        acknowledge(
            self.role,
            wildcard_resource(self.handler.function, ":*"),
            "LambdaInvoke's grant_invoke also names the function's versions and aliases (<arn>:*); the schedules "
            "invoke the tick function only.",
        )
