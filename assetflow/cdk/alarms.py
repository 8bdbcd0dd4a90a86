"""Alarms: dead letters and failed batches, quarantine, evaluator errors, a lagging stream, the sweep's repairs."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: The custom metric the ingest functions publish (Powertools Metrics, EMF) for each quarantined message,
#: with one dimension, ``service`` = the ingest functions' POWERTOOLS_SERVICE_NAME.
QUARANTINE_NAMESPACE = "assetflow"
QUARANTINE_METRIC = "QuarantinedMessages"
_PERIOD = Duration.minutes(5)


class Alarms(Construct):
    """CloudWatch alarms with an optional SNS topic (from the environment config) as their action."""

    def __init__(self, scope: Construct, construct_id: str, *, topic_arn: str | None) -> None:
        super().__init__(scope, construct_id)
        self._action = (
            cloudwatch_actions.SnsAction(sns.Topic.from_topic_arn(self, "Topic", topic_arn))
            if topic_arn
            else None
        )
        self.alarms: list[cloudwatch.Alarm] = []

    def _add(
        self, construct_id: str, *, metric: cloudwatch.IMetric, threshold: float, description: str
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        if self._action is not None:
            alarm.add_alarm_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def dead_letters(self, construct_id: str, queue: sqs.IQueue, *, what: str) -> cloudwatch.Alarm:
        """Alarm as soon as one message waits in a dead-letter queue."""
        return self._add(
            construct_id,
            metric=queue.metric_approximate_number_of_messages_visible(period=_PERIOD, statistic="Maximum"),
            threshold=1,
            description=f"Dead letters of {what}: inspect and redrive them",
        )

    def quarantined_messages(self, construct_id: str, *, service: str) -> cloudwatch.Alarm:
        """Alarm when an ingest function quarantines a message (malformed, or failing filter or schema)."""
        metric = cloudwatch.Metric(
            namespace=QUARANTINE_NAMESPACE,
            metric_name=QUARANTINE_METRIC,
            dimensions_map={"service": service},
            statistic="Sum",
            period=_PERIOD,
        )
        return self._add(
            construct_id,
            metric=metric,
            threshold=1,
            description="Watchers quarantined messages: see `assetflow quarantine list`",
        )

    def function_errors(
        self, construct_id: str, function: lambda_.IFunction, *, what: str
    ) -> cloudwatch.Alarm:
        """Alarm on any invocation error of a function."""
        return self._add(
            construct_id,
            metric=function.metric_errors(period=_PERIOD, statistic="Sum"),
            threshold=1,
            description=f"{what} failed; failing stream batches are bisected and retried, then dead-lettered",
        )

    def failed_batches(self, construct_id: str, mapping_id: str, *, what: str) -> cloudwatch.Alarm:
        """Alarm as soon as an event-source mapping sends a batch to its on-failure destination."""
        metric = cloudwatch.Metric(
            namespace="AWS/Lambda",
            metric_name="OnFailureDestinationDeliveredEventCount",
            dimensions_map={"EventSourceMappingUUID": mapping_id},
            statistic="Sum",
            period=_PERIOD,
        )
        return self._add(
            construct_id,
            metric=metric,
            threshold=1,
            description=f"Records of {what} failed their retries and went to the failures bucket: "
            "see docs/runbook-failures.md (`assetflow replay-failures`)",
        )

    def destination_failures(
        self, construct_id: str, function: lambda_.IFunction, *, what: str
    ) -> cloudwatch.Alarm:
        """Alarm when Lambda could not deliver a failed batch or invocation to its destination (it is lost)."""
        return self._add(
            construct_id,
            metric=function.metric("DestinationDeliveryFailures", period=_PERIOD, statistic="Sum"),
            threshold=1,
            description=f"{what} could not put a failed batch or event in its on-failure destination",
        )

    def sweep(
        self, construct_id: str, *, service: str, metric_name: str, description: str
    ) -> cloudwatch.Alarm:
        """Alarm on a metric of the reconciliation sweep (what it repaired, or its own failures)."""
        metric = cloudwatch.Metric(
            namespace=QUARANTINE_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"service": service},
            statistic="Sum",
            period=_PERIOD,
        )
        return self._add(construct_id, metric=metric, threshold=1, description=description)

    def iterator_age(
        self, construct_id: str, function: lambda_.IFunction, *, limit: Duration
    ) -> cloudwatch.Alarm:
        """Alarm when the oldest stream record a function reads is older than ``limit``."""
        return self._add(
            construct_id,
            metric=function.metric("IteratorAge", period=_PERIOD, statistic="Maximum"),
            threshold=limit.to_milliseconds(),
            description=f"The evaluator lags the table's stream by more than {limit.to_human_string()}",
        )
