"""The service's CloudWatch dashboard: each stage's throughput and latency, the functions, the table, the DLQs.

The stage metrics are the functions' own (Powertools Metrics, EMF, namespace ``assetflow``, one dimension
``service``): events stored and messages quarantined by ingest; events evaluated, runs created, runs submitted,
evaluation latency and the latency from an event (and from its message) to its run by the evaluator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from assetflow.cdk.alarms import QUARANTINE_METRIC, QUARANTINE_NAMESPACE

if TYPE_CHECKING:
    from assetflow.cdk.assetflow import AssetflowService

_PERIOD = Duration.minutes(1)
_WIDTH = 8
#: The evaluator's service name (its POWERTOOLS_SERVICE_NAME), the dimension of its stage metrics.
EVALUATOR_SERVICE = "assetflow-evaluator"


def _stage(name: str, service: str, statistic: str = "Sum", label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=QUARANTINE_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=_PERIOD,
        label=label or name,
    )


class ServiceDashboard(Construct):
    """One dashboard per environment, built from the service's parts (``AssetflowService`` composes it)."""

    def __init__(self, scope: Construct, construct_id: str, *, service: AssetflowService) -> None:
        super().__init__(scope, construct_id)
        ingest = service.ingest_service_name
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            default_interval=Duration.hours(3),
            period_override=cloudwatch.PeriodOverride.AUTO,
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# assetflow {service.config.name}\nEach stage per minute: messages in, events "
                "stored, runs created and submitted; latencies p50 / p99; failures land in the DLQs below and in the "
                "failures bucket.",
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Ingest: events stored, messages quarantined",
                left=[_stage("EventsStored", ingest), _stage(QUARANTINE_METRIC, ingest)],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Evaluator: events evaluated, runs created and submitted",
                left=[
                    _stage("EventsEvaluated", EVALUATOR_SERVICE),
                    _stage("RunsCreated", EVALUATOR_SERVICE),
                    _stage("RunsSubmitted", EVALUATOR_SERVICE),
                ],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Latency (ms): evaluation of a batch, event and message to run",
                left=[
                    _stage(name, EVALUATOR_SERVICE, statistic, f"{name} {statistic}")
                    for name in ("EvaluationLatency", "EventToRunLatency", "MessageToRunLatency")
                    for statistic in ("p50", "p99")
                ],
                width=_WIDTH,
            ),
        )
        functions = service.functions
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Functions: invocations",
                left=[f.function.metric_invocations(period=_PERIOD, label=f.node.id) for f in functions],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Functions: errors and throttles",
                left=[
                    f.function.metric_errors(period=_PERIOD, label=f"{f.node.id} errors") for f in functions
                ],
                right=[
                    f.function.metric_throttles(period=_PERIOD, label=f"{f.node.id} throttles")
                    for f in functions
                ],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Functions: duration p99 (ms)",
                left=[
                    f.function.metric_duration(period=_PERIOD, statistic="p99", label=f.node.id)
                    for f in functions
                ],
                width=_WIDTH,
            ),
        )
        table = service.event_store.table
        # The evaluator's and Kafka's failed batches go to the failures bucket (their alarms count them).
        dead_letters = [
            *(w.dlq for w in service.ingest.watchers if w.dlq is not None),
            service.run_state.dlq,
            service.schedules.dlq,
            service.reconciliation.failures,
        ]
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Evaluator stream: iterator age (max, ms)",
                left=[
                    service.evaluator.handler.function.metric(
                        "IteratorAge", statistic="Maximum", period=_PERIOD, label="IteratorAge"
                    )
                ],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Table: consumed capacity, throttled requests",
                left=[
                    table.metric_consumed_write_capacity_units(period=_PERIOD, label="write units"),
                    table.metric_consumed_read_capacity_units(period=_PERIOD, label="read units"),
                ],
                right=[
                    table.metric(
                        "WriteThrottleEvents", statistic="Sum", period=_PERIOD, label="write throttles"
                    ),
                    table.metric(
                        "ReadThrottleEvents", statistic="Sum", period=_PERIOD, label="read throttles"
                    ),
                ],
                width=_WIDTH,
            ),
            cloudwatch.GraphWidget(
                title="Dead letters waiting",
                left=[
                    q.metric_approximate_number_of_messages_visible(
                        period=_PERIOD, label=q.node.path.split("/")[-2]
                    )
                    for q in dead_letters
                ],
                width=_WIDTH,
            ),
        )


__all__ = ["EVALUATOR_SERVICE", "ServiceDashboard"]
