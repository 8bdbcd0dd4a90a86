"""The assetflow stack: one ``AssetflowService`` and the outputs that the CLI's ``--env`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from assetflow.cdk.assetflow import AssetflowService
from assetflow.cdk.config import EnvironmentConfig
from assetflow.core.catalog import Catalog

#: Stack output keys (stable: the CLI's ``--env`` and docs/deploy.md rely on them).
OUTPUT_TABLE_NAME = "TableName"
OUTPUT_API_URL = "ApiUrl"
OUTPUT_EVENT_BUS_NAME = "EventBusName"
OUTPUT_RUNS_BUCKET = "RunsBucket"
OUTPUT_EMR_APPLICATION_ID = "EmrApplicationId"
OUTPUT_REGION = "Region"
OUTPUT_QUEUE_URLS = "QueueUrls"
#: Followed by the watcher's id (``sensor-readings`` → ``QueueUrlSensorReadings``).
OUTPUT_QUEUE_URL_PREFIX = "QueueUrl"
#: What ``assetflow replay-failures --env`` and ``assetflow reconcile-runs --env`` read: the functions' names
#: (by the runtime's names for them), the failures bucket, the on-failure queues (by function) and the
#: watchers' dead-letter queues (by watcher).
OUTPUT_FUNCTION_NAMES = "FunctionNames"
OUTPUT_FAILURES_BUCKET = "FailuresBucket"
OUTPUT_FAILURE_QUEUES = "FailureQueueUrls"
OUTPUT_DEAD_LETTER_QUEUES = "DeadLetterQueueUrls"
#: The Kinesis stream of each Kinesis watcher (the stack names the streams it creates), by watcher name.
OUTPUT_STREAM_NAMES = "StreamNames"


class AssetflowStack(Stack):
    """One environment of assetflow: the service and its outputs (``build_dir`` defaults to ``build/``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalog: Catalog,
        config: EnvironmentConfig,
        project_root: Path,
        vendor_dependencies: bool = True,
        build_dir: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.service = AssetflowService(
            self,
            "Assetflow",
            catalog=catalog,
            config=config,
            project_root=project_root,
            vendor_dependencies=vendor_dependencies,
            build_dir=build_dir,
        )
        service = self.service
        self._output(OUTPUT_TABLE_NAME, service.event_store.table.table_name, "The events table")
        self._output(OUTPUT_API_URL, service.api.url, "The operator HTTP API (IAM-authorised)")
        self._output(OUTPUT_EVENT_BUS_NAME, service.event_bus.event_bus_name, "The bus of listener events")
        self._output(
            OUTPUT_RUNS_BUCKET, service.runs.bucket.bucket_name, "Run contexts (runs/) and job code (code/)"
        )
        self._output(
            OUTPUT_EMR_APPLICATION_ID,
            service.spark.application.attr_application_id,
            "The EMR Serverless application",
        )
        self._output(OUTPUT_REGION, self.region, "The region of the stack")
        for permission, policy in service.api.policies.items():
            self._output(
                f"Api{permission.capitalize()}PolicyArn",
                policy.managed_policy_arn,
                f"Managed policy that lets an operator {permission} through the HTTP API",
            )
        queues = {w.watcher: w.queue.queue_url for w in service.ingest.watchers if w.queue is not None}
        self._output(
            OUTPUT_QUEUE_URLS, self.to_json_string(queues), "SQS queue URL of each watcher, by watcher name"
        )
        for watcher, url in queues.items():
            key = f"{OUTPUT_QUEUE_URL_PREFIX}{service.watcher_output_id(watcher)}"
            self._output(key, url, f"SQS queue URL of watcher {watcher}")
        functions = {
            "evaluator": service.evaluator.handler.function.function_name,
            "run-state": service.run_state.handler.function.function_name,
            "schedule-tick": service.schedules.handler.function.function_name,
            "reconcile": service.reconciliation.handler.function.function_name,
            "api": service.api.handler.function.function_name,
            **{f"ingest-{w.watcher}": w.function.function.function_name for w in service.ingest.watchers},
        }
        self._output(OUTPUT_FUNCTION_NAMES, self.to_json_string(functions), "Function names, by role")
        self._output(
            OUTPUT_FAILURES_BUCKET,
            service.failures.bucket.bucket_name,
            "Failed stream and Kafka batches, with their records (assetflow replay-failures)",
        )
        failure_queues = {
            "run-state": service.run_state.dlq.queue_url,
            "schedule-tick": service.schedules.dlq.queue_url,
            "reconcile": service.reconciliation.failures.queue_url,
        }
        self._output(
            OUTPUT_FAILURE_QUEUES,
            self.to_json_string(failure_queues),
            "Events of asynchronous invocations that failed their retries, by function",
        )
        streams = {w.watcher: w.stream.stream_name for w in service.ingest.watchers if w.stream is not None}
        if streams:
            self._output(
                OUTPUT_STREAM_NAMES,
                self.to_json_string(streams),
                "Kinesis stream of each watcher, by watcher name",
            )
        dead_letters = {w.watcher: w.dlq.queue_url for w in service.ingest.watchers if w.dlq is not None}
        self._output(
            OUTPUT_DEAD_LETTER_QUEUES,
            self.to_json_string(dead_letters),
            "Dead-letter queue URL of each watcher's SQS queue, by watcher name",
        )

    def _output(self, key: str, value: str, description: str) -> None:
        output = CfnOutput(self, key, value=value, description=description)
        output.override_logical_id(key)
