"""The reconciliation sweep: a function on a schedule that repairs what the give-up paths left behind."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.failures import keep_async_failures
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.queues import dead_letter_queue

RECONCILE_HANDLER = "assetflow.functions.handle_reconcile"


class Reconciliation(Construct):
    """The sweep function, invoked every ``reconcile_interval``, and the queue its failed invocations go to.

    A missed sweep is harmless (the next one does its work), so the schedule's own delivery is retried briefly;
    an invocation that fails after Lambda's retries is kept in ``failures`` for the runbook.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        key: kms.IKey,
        service: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = service
        self.handler = ServiceFunction(
            self,
            "Handler",
            defaults=defaults,
            handler_module=RECONCILE_HANDLER,
            description="assetflow reconciliation sweep: finishes, fails or releases runs that nothing else will",
            service=service,
            timeout=Duration.minutes(5),
            memory_mb=config.evaluator_memory_mb,
        )
        self.failures = dead_letter_queue(
            self,
            "FailedSweeps",
            key=key,
            retention=config.dlq_retention,
            removal_policy=config.removal_policy,
        )
        keep_async_failures(self.handler, self.failures, config=config)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs assetflow's reconciliation sweep",
            schedule=events.Schedule.rate(config.reconcile_interval),
        )
        self.rule.add_target(
            targets.LambdaFunction(
                self.handler.function,
                event=events.RuleTargetInput.from_object({}),
                retry_attempts=2,
                max_event_age=config.reconcile_interval,
            )
        )
