"""The evaluator: the function on the table's stream that queues events and starts runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.event_store import EVENT_SORT_KEY_PREFIX, SORT_KEY
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.nag import acknowledge

EVALUATOR_HANDLER = "assetflow.functions.handle_asset_events"


def new_asset_events_filter() -> Mapping[str, Any]:
    """The stream filter: only INSERTs of asset event items (sort key ``EVENT#...``) reach the evaluator.

    Queue entries, runs and the evaluator's own writes never invoke it, so it cannot feed on itself.
    """
    return lambda_.FilterCriteria.filter(
        {
            "eventName": lambda_.FilterRule.is_equal("INSERT"),
            "dynamodb": {"Keys": {SORT_KEY: {"S": lambda_.FilterRule.begins_with(EVENT_SORT_KEY_PREFIX)}}},
        }
    )


class Evaluator(Construct):
    """The stream-driven evaluator with bisect-on-error, bounded retries and an on-failure destination.

    A batch that keeps failing is split until the failing record is alone; after the retries or the record
    age run out it goes to ``on_failure`` (the failures bucket: the invocation record with the records
    themselves, replayable after the stream's 24 hours).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        service: str,
        on_failure: lambda_.IEventSourceDlq,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = ServiceFunction(
            self,
            "Handler",
            defaults=defaults,
            handler_module=EVALUATOR_HANDLER,
            description="assetflow evaluator: queues new asset events and starts the runs they satisfy",
            service=service,
            timeout=config.evaluator_timeout,
            memory_mb=config.evaluator_memory_mb,
        )
        self.source = sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=config.stream_batch_size,
            parallelization_factor=config.stream_parallelization_factor,
            bisect_batch_on_error=True,
            retry_attempts=config.stream_retry_attempts,
            max_record_age=config.stream_max_record_age,
            report_batch_item_failures=True,
            on_failure=on_failure,
            filters=[new_asset_events_filter()],
            # OnFailureDestinationDeliveredEventCount, which the failed-batches alarm watches.
            metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
        )
        self.handler.function.add_event_source(self.source)
        acknowledge(
            self.handler,
            "AwsSolutions-IAM5[Resource::*]",
            "Besides X-Ray, DynamoEventSource grants dynamodb:ListStreams, which AWS authorises only on '*'; "
            "reading records is granted on the table's stream ARN.",
        )
