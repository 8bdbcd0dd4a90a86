"""Cost on AWS: dollars per million events from counted requests, and the idle cost per day of a deployment.

Two parts (issue 6, item 4):

1. **Per million events.** ``cost_per_million(counts, events)`` prices what a workload was counted doing
   (``benchmarks._counting.RequestCounter.counts()``: Lambda invocations and GB-seconds, DynamoDB read and
   write units, SQS requests, S3 requests, EventBridge events, KMS requests, log bytes) with the us-east-1 prices of
   ``PRICES``. Until the burst benchmark (item 2) exists, this script measures its own workload: messages
   sent to SQS, the real handlers (ingest, evaluator, run state) invoked as the event source mappings and
   EventBridge would invoke them, on DynamoDB Local and moto, with the real EMR Serverless launcher, the
   job-side helper writing outlet metadata, and every EMR job state change delivered to the run-state
   function. Two scenarios, as in the burst: a single-asset pipeline and an ``a & b`` pipeline.
2. **Idle per day.** ``idle_cost_per_day(template)`` reads a synthesised CloudFormation template and prices
   what is billed with no traffic at all (KMS keys, alarms, provisioned Kafka pollers, the SQS pollers'
   empty receives, schedules); everything else is marked per-request, storage or free, and unknown
   resource types are listed as unpriced rather than ignored.

No free tier is applied anywhere: these are marginal costs of an account already past it.

Run: ``.venv/bin/python -m benchmarks.cost [--quick] [--messages N] [--template PATH]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from assetflow.adapters.emr import RUN_MOVING_STATES
from benchmarks._common import (
    ROOT,
    CountingSink,
    check,
    emulators,
    parser,
    print_table,
    progress,
    redirect_logger_streams,
    runs_of,
    summarize,
    write_result,
)
from benchmarks._counting import RequestCounter, item_kind

NAME = "cost"

# ---- prices -------------------------------------------------------------------------------------------------

#: The day the prices below were looked up (every one of them, on that day).
PRICES_CHECKED = "2026-11-21"
REGION = "us-east-1"
HOURS_PER_MONTH = 730  # AWS's convention for monthly prices
DAYS_PER_MONTH = HOURS_PER_MONTH / 24


@dataclass(frozen=True)
class Price:
    """``usd`` per ``per`` units of ``unit`` in us-east-1, with where it comes from and when it was read."""

    usd: float
    per: float
    unit: str
    source: str
    checked: str = PRICES_CHECKED
    note: str = ""

    def of(self, quantity: float) -> float:
        """The price of ``quantity`` units."""
        return self.usd * quantity / self.per


_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
_CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"

#: Public on-demand prices, us-east-1. Where the official page renders its rates client-side (most of them),
#: the note names the public page that quotes the rate.
PRICES: Mapping[str, Price] = {
    "lambda_request": Price(
        0.20, 1e6, "requests", _LAMBDA, note="x86 and Arm alike; quoted in api-evangelist/aws-lambda plans"
    ),
    "lambda_gb_second": Price(
        0.0000166667,
        1,
        "GB-seconds (x86, first 6 billion a month)",
        _LAMBDA,
        note="quoted in api-evangelist/aws-lambda plans/aws-lambda-plans-pricing.yml and cloudchipr.com",
    ),
    "lambda_kafka_poller_hour": Price(
        0.185,
        1,
        "event poller unit hours (Kafka event source mapping, provisioned mode)",
        _LAMBDA,
        note="AWS Price List API (AWSLambda offer, 2026-09-19) as transcribed in a public pricing note; "
        "SQS provisioned pollers are $0.00925/h",
    ),
    "dynamodb_write_unit": Price(
        0.625,
        1e6,
        "write request units (on-demand, Standard class)",
        _DYNAMODB,
        note="after the November 2024 cut; quoted on airbyte.com/data-engineering-resources/dynamodb-pricing",
    ),
    "dynamodb_read_unit": Price(
        0.125,
        1e6,
        "read request units (on-demand, Standard class)",
        _DYNAMODB,
        note="as above; a strongly consistent 4 KB read is one unit, eventually consistent half",
    ),
    "dynamodb_storage_gb_month": Price(
        0.25, 1, "GB-months stored (table and indexes)", "https://aws.amazon.com/dynamodb/pricing/"
    ),
    "dynamodb_pitr_gb_month": Price(
        0.20,
        1,
        "GB-months of table size under point-in-time recovery",
        "https://finops.com.py/services/dynamodb/backups",
    ),
    "sqs_request": Price(
        0.40,
        1e6,
        "requests, standard queues (each 64 KB chunk one request)",
        "https://aws.amazon.com/sqs/pricing/",
        note="quoted on cloudburn.io/blog/amazon-sqs-pricing (March 2026); FIFO queues $0.50",
    ),
    "s3_tier1_request": Price(
        0.005,
        1000,
        "PUT, COPY, POST, LIST requests (S3 Standard)",
        "https://aws.amazon.com/s3/pricing/",
        note="quoted on c3x.dev/blog/s3-request-fees-explained",
    ),
    "s3_tier2_request": Price(
        0.0004,
        1000,
        "GET, SELECT and other requests (S3 Standard)",
        "https://aws.amazon.com/s3/pricing/",
        note="as above",
    ),
    "eventbridge_event": Price(
        1.00,
        1e6,
        "custom events put on a bus (each 64 KB chunk one event)",
        "https://aws.amazon.com/eventbridge/pricing/",
        note="quoted on cloudburn.io/blog/amazon-eventbridge-pricing (March 2026); AWS service events are free",
    ),
    "scheduler_invocation": Price(
        1.00,
        1e6,
        "EventBridge Scheduler invocations",
        "https://aws.amazon.com/eventbridge/pricing/",
        note="14 million a month free; quoted on cloudburn.io/blog/amazon-eventbridge-pricing",
    ),
    "cloudwatch_logs_gb": Price(
        0.50,
        1,
        "GB of logs ingested (standard class)",
        _CLOUDWATCH,
        note="quoted on factualminds.com/blog/amazon-cloudwatch-pricing-metrics-logs-alarms-dashboards",
    ),
    "cloudwatch_alarm_month": Price(
        0.10,
        1,
        "standard-resolution alarm-months",
        _CLOUDWATCH,
        note="quoted on c3x.dev/resources/aws/aws_cloudwatch_metric_alarm; 10 a month free",
    ),
    "cloudwatch_dashboard_month": Price(
        3.00,
        1,
        "dashboard-months",
        _CLOUDWATCH,
        note="3 dashboards of up to 50 metrics a month free per account; quoted on factualminds.com",
    ),
    "kms_key_month": Price(
        1.00,
        1,
        "customer managed key-months",
        "https://aws.amazon.com/kms/pricing/",
        note="automatic rotation adds $1/month for each of the first two rotations (capped since April 2024)",
    ),
    "kms_request": Price(
        0.03,
        10_000,
        "requests (GenerateMac, data keys for SQS and S3 encryption)",
        "https://aws.amazon.com/kms/pricing/",
        note="20,000 a month free",
    ),
    "kinesis_on_demand_stream_hour": Price(
        0.04,
        1,
        "on-demand stream-hours (Kinesis Data Streams; data in and out billed per GB on top)",
        "https://aws.amazon.com/kinesis/data-streams/pricing/",
        note="the page renders its rates client-side; the us-east-1 rate as widely quoted",
    ),
    "kinesis_shard_hour": Price(
        0.015,
        1,
        "provisioned shard-hours (Kinesis Data Streams)",
        "https://aws.amazon.com/kinesis/data-streams/pricing/",
        note="as above; PUT payload units billed per million on top",
    ),
    "xray_trace": Price(
        5.00, 1e6, "traces recorded", "https://aws.amazon.com/xray/pricing/", note="100,000 a month free"
    ),
}

#: Bytes Lambda itself logs per invocation (START, END and REPORT lines, with the X-Ray trace id under
#: active tracing), estimated from their documented format: as plain text, and as the JSON log format's
#: platform.start, platform.runtimeDone and platform.report records. All three are INFO: a function whose
#: system log level is WARN (the stack's default, ``EnvironmentConfig.system_log_level``) logs none of them.
LAMBDA_PLATFORM_LOG_BYTES = 350
LAMBDA_PLATFORM_LOG_BYTES_JSON = 900
#: The share of invocations X-Ray records under the default sampling rule (the first request each second,
#: then 5%): at the rates a burst reaches, about 5%. The stack turns active tracing on for every function.
XRAY_SAMPLING = 0.05
#: Empty receives an idle SQS event source mapping makes: Lambda long-polls with five pollers, 20 s each,
#: i.e. 15 a minute (observed in CloudWatch's NumberOfEmptyReceives, github.com/getlift/lift/issues/132).
IDLE_SQS_RECEIVES_PER_MINUTE = 15

#: What ``cost_per_million`` prices, and what it accepts but does not price (free or priced elsewhere).
PRICED_COUNTS = (
    "lambda_invocations",
    "lambda_gb_seconds",
    "dynamodb_read_units",
    "dynamodb_write_units",
    "sqs_requests",
    "s3_tier1_requests",
    "s3_tier2_requests",
    "eventbridge_events",
    "kms_requests",
    "log_bytes",
)
FREE_COUNTS = ("dynamodb_requests", "emr_api_requests")
COUNT_KEYS = PRICED_COUNTS + FREE_COUNTS


def cost_per_million(
    counts: Mapping[str, float],
    events: float,
    *,
    prices: Mapping[str, Price] = PRICES,
    xray_sampling: float = XRAY_SAMPLING,
    platform_log_bytes: float = LAMBDA_PLATFORM_LOG_BYTES,
) -> dict[str, Any]:
    """Dollars per million events of a workload that handled ``events`` events and made ``counts``.

    ``counts`` holds the keys of ``COUNT_KEYS`` (missing ones count as 0); CloudWatch Logs adds Lambda's own
    lines per invocation (``platform_log_bytes``: see ``platform_log_bytes``) and X-Ray the sampled share of
    invocations. Returns the lines (quantity per million
    events, unit, dollars per million events) and their total.

    Raises:
        ValueError: ``events`` is not positive, or ``counts`` has a key this model does not know.
    """
    if events <= 0:
        raise ValueError("events must be positive")
    unknown = sorted(set(counts) - set(COUNT_KEYS))
    if unknown:
        raise ValueError(f"unknown count keys {unknown}; known: {list(COUNT_KEYS)}")

    def count(key: str) -> float:
        return float(counts.get(key, 0.0))

    invocations = count("lambda_invocations")
    log_gb = (count("log_bytes") + invocations * platform_log_bytes) / 1024**3
    priced = [
        ("Lambda requests", invocations, "lambda_request"),
        ("Lambda duration", count("lambda_gb_seconds"), "lambda_gb_second"),
        ("DynamoDB writes", count("dynamodb_write_units"), "dynamodb_write_unit"),
        ("DynamoDB reads", count("dynamodb_read_units"), "dynamodb_read_unit"),
        ("SQS requests", count("sqs_requests"), "sqs_request"),
        ("S3 PUT/LIST", count("s3_tier1_requests"), "s3_tier1_request"),
        ("S3 GET", count("s3_tier2_requests"), "s3_tier2_request"),
        ("EventBridge events", count("eventbridge_events"), "eventbridge_event"),
        ("KMS requests", count("kms_requests"), "kms_request"),
        ("CloudWatch Logs", log_gb, "cloudwatch_logs_gb"),
        ("X-Ray traces", invocations * xray_sampling, "xray_trace"),
    ]
    scale = 1e6 / events
    lines = [
        {
            "item": item,
            "quantity_per_million": quantity * scale,
            "unit": prices[key].unit,
            "usd_per_million": prices[key].of(quantity * scale),
        }
        for item, quantity, key in priced
    ]
    return {
        "events": events,
        "lines": lines,
        "total_usd_per_million": sum(line["usd_per_million"] for line in lines),
    }


# ---- storage --------------------------------------------------------------------------------------------

#: Kinds of items whose TTL removes them after 15 days (dedupe records, counted and seen markers).
TRANSIENT_KINDS = frozenset({"dedupe", "counted", "seen"})
_INDEX_OVERHEAD_BYTES = 100  # DynamoDB adds 100 bytes of indexing overhead per item and per index entry


def _attribute_bytes(value: Mapping[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind in ("S", "B"):
        return len(raw.encode() if isinstance(raw, str) else raw)
    if kind == "N":
        return len(str(raw).lstrip("-").replace(".", "")) // 2 + 2
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + _attribute_bytes(v) for v in raw)
    if kind == "M":
        return 3 + sum(len(k) + 1 + _attribute_bytes(v) for k, v in raw.items())
    return len(json.dumps(raw, default=str))


def stored_bytes(item: Mapping[str, Any]) -> int:
    """An item's storage in the table and its global secondary indexes (projection ALL), per DynamoDB's rules."""
    size = sum(len(name) + _attribute_bytes(value) for name, value in item.items())
    indexes = sum(1 for name in item if name.endswith("pk") and name.startswith("gsi"))
    return (size + _INDEX_OVERHEAD_BYTES) * (1 + indexes)


def storage_per_million(bytes_by_kind: Mapping[str, float], events: float) -> dict[str, Any]:
    """Storage a million events leave behind, and what a month of keeping it costs (table, indexes, PITR)."""
    scale = 1e6 / events
    kept = sum(b for kind, b in bytes_by_kind.items() if kind not in TRANSIENT_KINDS) * scale / 1024**3
    transient = sum(b for kind, b in bytes_by_kind.items() if kind in TRANSIENT_KINDS) * scale / 1024**3
    storage, pitr = PRICES["dynamodb_storage_gb_month"], PRICES["dynamodb_pitr_gb_month"]
    return {
        "kept_gb_per_million": kept,
        "transient_gb_per_million": transient,
        "usd_per_month_per_million": storage.of(kept) + pitr.of(kept),
        "bytes_per_event_by_kind": {k: b / events for k, b in sorted(bytes_by_kind.items())},
    }


# ---- idle cost ------------------------------------------------------------------------------------------

#: Resource types with nothing billed while idle, and why.
IDLE_FREE: Mapping[str, tuple[str, str]] = {
    "AWS::IAM::Role": ("free", "no charge"),
    "AWS::IAM::Policy": ("free", "no charge"),
    "AWS::IAM::ManagedPolicy": ("free", "no charge (the API's read, emit and operate policies)"),
    "AWS::Lambda::Permission": ("free", "no charge"),
    "AWS::Lambda::EventInvokeConfig": (
        "free",
        "no charge (asynchronous retries and the on-failure destination)",
    ),
    "AWS::Lambda::LayerVersion": ("free", "the public Powertools layer; code storage only"),
    "AWS::SQS::QueuePolicy": ("free", "no charge"),
    "AWS::Scheduler::ScheduleGroup": (
        "free",
        "no charge (holds the one-time wake-ups, billed per invocation when they fire)",
    ),
    "AWS::S3::BucketPolicy": ("free", "no charge"),
    "AWS::CDK::Metadata": ("free", "no charge"),
    "AWS::ApiGatewayV2::Integration": ("free", "part of the API"),
    "AWS::ApiGatewayV2::Route": ("free", "part of the API"),
    "AWS::ApiGatewayV2::Stage": ("free", "part of the API"),
    "Custom::CDKBucketDeployment": ("free", "runs at deployment only"),
    "Custom::EventBridgeNotifications": (
        "free",
        "runs at deployment only (turns a watched bucket's EventBridge notifications on)",
    ),
    "AWS::Lambda::Function": ("per-request", "invocations and duration; no provisioned concurrency"),
    "AWS::ApiGatewayV2::Api": ("per-request", "HTTP API requests"),
    "AWS::SQS::Queue": ("per-request", "requests (the pollers' empty receives are on the mapping line)"),
    "AWS::Events::EventBus": ("per-request", "custom events put"),
    "AWS::Events::Rule": (
        "per-request",
        "matches AWS service events and starts the reconciliation sweep on its rate: free (the sweep's "
        "invocations, 288 a day at 5 min, are Lambda requests: well under a cent)",
    ),
    "AWS::DynamoDB::Table": ("storage", "on-demand: requests, storage and PITR by size; ~$0 when empty"),
    "AWS::Logs::LogGroup": ("storage", "ingestion and storage by size"),
    "AWS::S3::Bucket": (
        "storage",
        "requests and storage by size (code, run contexts and failure records: megabytes)",
    ),
}


def _ref_type(value: Any, resources: Mapping[str, Any]) -> str | None:
    if isinstance(value, Mapping):
        target = value.get("Fn::GetAtt", [None])[0] if "Fn::GetAtt" in value else value.get("Ref")
        if isinstance(target, str) and target in resources:
            return str(resources[target]["Type"])
    if isinstance(value, str):
        for service, kind in ((":sqs:", "AWS::SQS::Queue"), (":kafka:", "kafka"), (":dynamodb:", "stream")):
            if service in value:
                return kind
    return None


def _schedule_runs_per_day(expression: str) -> float:
    expression = expression.strip()
    if expression.startswith("rate("):
        amount, unit = expression[5:-1].split()
        seconds = {"minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]
        return 86400 / (int(amount) * seconds)
    if expression.startswith("cron("):
        from croniter import croniter

        minute, hour, day, month, weekday, *_year = expression[5:-1].split()
        cron = " ".join(f.replace("?", "*") for f in (minute, hour, day, month, weekday))
        start = datetime(2026, 1, 1, tzinfo=UTC)
        ticks = croniter(cron, start - timedelta(seconds=1))  # the start itself counts
        count = 0
        while ticks.get_next(datetime) < start + timedelta(days=28):
            count += 1
        return count / 28
    return 0.0  # at(...): once


def idle_cost_per_day(template: Mapping[str, Any], *, prices: Mapping[str, Price] = PRICES) -> dict[str, Any]:
    """What a deployed stack costs per day with no traffic, from its synthesised template.

    Fixed lines: KMS keys, CloudWatch alarms, provisioned Kafka pollers (``MinimumPollers``), the empty
    receives of each SQS event source mapping, Scheduler schedules firing (their invocations only), and EMR
    Serverless pre-initialised capacity (flagged, not priced). Everything else is per-request, storage or
    free; an unknown resource type is listed under ``unpriced``.
    """
    resources: Mapping[str, Any] = template.get("Resources", {})
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for resource in resources.values():
        by_type.setdefault(str(resource["Type"]), []).append(resource.get("Properties") or {})

    lines: list[dict[str, Any]] = []
    unpriced: list[str] = []

    def line(item: str, resource_type: str, count: float, kind: str, usd_per_day: float, basis: str) -> None:
        lines.append(
            {
                "item": item,
                "resource_type": resource_type,
                "count": count,
                "kind": kind,
                "usd_per_day": usd_per_day,
                "basis": basis,
            }
        )

    for resource_type, props in sorted(by_type.items()):
        count = len(props)
        if resource_type == "AWS::KMS::Key":
            rotating = sum(1 for p in props if p.get("EnableKeyRotation"))
            key = prices["kms_key_month"]
            line(
                "KMS keys",
                resource_type,
                count,
                "fixed",
                key.of(count) / DAYS_PER_MONTH,
                f"${key.usd}/key-month; {rotating} rotating: +$1/month after each of the first two rotations",
            )
        elif resource_type == "AWS::CloudWatch::Alarm":
            alarm = prices["cloudwatch_alarm_month"]
            line(
                "CloudWatch alarms",
                resource_type,
                count,
                "fixed",
                alarm.of(count) / DAYS_PER_MONTH,
                f"${alarm.usd}/alarm-month (standard resolution)",
            )
        elif resource_type == "AWS::Lambda::EventSourceMapping":
            kafka_pollers = sqs_mappings = stream_mappings = 0
            for p in props:
                source = _ref_type(p.get("EventSourceArn"), resources)
                is_kafka = bool(p.get("Topics")) or source == "kafka"
                if is_kafka and p.get("ProvisionedPollerConfig"):
                    kafka_pollers += int(p["ProvisionedPollerConfig"].get("MinimumPollers", 1))
                elif source == "AWS::SQS::Queue":
                    sqs_mappings += 1
                elif source in ("AWS::DynamoDB::Table", "stream"):
                    stream_mappings += 1
            if kafka_pollers:
                poller = prices["lambda_kafka_poller_hour"]
                line(
                    "Kafka pollers (provisioned mode)",
                    resource_type,
                    kafka_pollers,
                    "fixed",
                    poller.of(kafka_pollers * 24),
                    f"MinimumPollers summed over Kafka mappings x 24 h x ${poller.usd}/EPU-hour",
                )
            if sqs_mappings:
                receives = sqs_mappings * IDLE_SQS_RECEIVES_PER_MINUTE * 60 * 24
                line(
                    "SQS pollers' empty receives",
                    resource_type,
                    sqs_mappings,
                    "fixed",
                    prices["sqs_request"].of(receives),
                    f"{IDLE_SQS_RECEIVES_PER_MINUTE} long polls a minute per SQS mapping ({receives:,} a day)",
                )
            if stream_mappings:
                line(
                    "DynamoDB stream pollers",
                    resource_type,
                    stream_mappings,
                    "free",
                    0.0,
                    "GetRecords by Lambda triggers is free",
                )
        elif resource_type == "AWS::CloudWatch::Dashboard":
            dashboard = prices["cloudwatch_dashboard_month"]
            line(
                "CloudWatch dashboards",
                resource_type,
                count,
                "fixed",
                dashboard.of(count) / DAYS_PER_MONTH,
                f"${dashboard.usd}/dashboard-month (the first 3 of an account are free)",
            )
        elif resource_type == "AWS::Scheduler::Schedule":
            fires = sum(_schedule_runs_per_day(str(p.get("ScheduleExpression", ""))) for p in props)
            line(
                "Scheduler schedules",
                resource_type,
                count,
                "fixed",
                prices["scheduler_invocation"].of(fires),
                f"{fires:g} invocations a day (each starts a tick function and possibly a run)",
            )
        elif resource_type == "AWS::Kinesis::Stream":
            # A stream the stack creates for a KinesisStream watcher (an existing one is the user's own cost).
            on_demand = sum(
                1
                for p in props
                if (p.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED") == "ON_DEMAND"
            )
            shards = sum(
                int(p.get("ShardCount", 1))
                for p in props
                if (p.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED") != "ON_DEMAND"
            )
            stream_hour, shard_hour = prices["kinesis_on_demand_stream_hour"], prices["kinesis_shard_hour"]
            line(
                "Kinesis streams",
                resource_type,
                count,
                "fixed",
                stream_hour.of(on_demand * 24) + shard_hour.of(shards * 24),
                f"{on_demand} on demand x 24 h x ${stream_hour.usd}/stream-hour, {shards} provisioned shards "
                f"x 24 h x ${shard_hour.usd}/shard-hour (a watcher of an existing stream adds none)",
            )
        elif resource_type == "AWS::EMRServerless::Application":
            initial = [p for p in props if p.get("InitialCapacity")]
            if initial:
                unpriced.append(
                    f"{resource_type} with InitialCapacity (pre-initialised workers bill while started)"
                )
            stops = sorted(
                {int((p.get("AutoStopConfiguration") or {}).get("IdleTimeoutMinutes", 15)) for p in props}
            )
            line(
                "EMR Serverless application",
                resource_type,
                count,
                "per-request",
                0.0,
                f"no pre-initialised capacity: billed per job's vCPU/GB-hours only; auto-stop after {stops} min",
            )
        elif resource_type in IDLE_FREE:
            kind, basis = IDLE_FREE[resource_type]
            line(resource_type.split("::", 1)[1], resource_type, count, kind, 0.0, basis)
        else:
            unpriced.append(resource_type)
    fixed = sum(entry["usd_per_day"] for entry in lines)
    return {
        "lines": lines,
        "usd_per_day": fixed,
        "usd_per_month": fixed * DAYS_PER_MONTH,
        "unpriced": unpriced,
    }


def synthesize_template(env: str, workdir: Path, *, timeout: float = 300) -> dict[str, Any]:
    """Synthesise the stack of ``env`` with ``app.py`` into ``workdir`` (nothing written in the repository).

    Raises:
        RuntimeError: the synth failed (its output's tail is in the message).
    """
    outdir, build = workdir / f"cdk.out-{env}", workdir / f"build-{env}"
    environment = dict(
        os.environ,
        CDK_OUTDIR=str(outdir),
        ASSETFLOW_BUILD_DIR=str(build),
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    done = subprocess.run(
        [sys.executable, "app.py", "-c", f"env={env}"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    path = outdir / f"assetflow-{env}.template.json"
    if done.returncode != 0 or not path.exists():
        raise RuntimeError(
            f"synth of {env} failed ({done.returncode}): {(done.stdout + done.stderr)[-2000:]}"
        )
    return dict(json.loads(path.read_text()))


# ---- the measured workload ------------------------------------------------------------------------------

#: Memory of the functions (assetflow/cdk/config.py's defaults; checked against the synthesised template).
MEMORY_MB = {
    "assetflow.functions.handle_sqs_messages": 256,
    "assetflow.functions.handle_asset_events": 512,
    "assetflow.functions.handle_job_state": 512,
}
#: The evaluator's stream batch size (assetflow/cdk/config.py ``stream_batch_size``) and SQS's largest receive.
STREAM_BATCH = 100
SQS_BATCH = 10
#: The states EventBridge reports for an EMR Serverless job run that succeeds (SUBMITTED, PENDING, SCHEDULED,
#: RUNNING, SUCCESS) that the stack's rule delivers to the run-state function: those that move a run
#: (``assetflow.adapters.emr.RUN_MOVING_STATES``: a run is running from its submission).
JOB_STATES = tuple(
    s for s in ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "SUCCESS") if s in RUN_MOVING_STATES
)
#: The listener events the stack's example environments subscribe to (``EnvironmentConfig.listener_events``):
#: the run-state function's alias events and the evaluator's asset-created ones; none per event.
LISTENER_EVENTS = frozenset({"AssetCreated", "AssetAliasCreated"})
ROLE = "arn:aws:iam::123456789012:role/assetflow-bench-job"


@dataclass(frozen=True)
class Scenario:
    """A catalog and the queues its messages go to, in turn, ``SQS_BATCH`` at a time."""

    name: str
    description: str
    queues: tuple[str, ...]

    @property
    def min_messages(self) -> int:
        """One round: a full batch to each queue."""
        return SQS_BATCH * len(self.queues)

    def definitions(self) -> list[Any]:
        """The scenario's pipelines (each with an outlet, as a real job has)."""
        from assetflow import Asset, AssetWatcher, Pipeline, SparkJob, SqsQueue

        assets = [
            Asset(f"s3://bench-lake/landing/{q}", watchers=[AssetWatcher(q, SqsQueue(q))])
            for q in self.queues
        ]
        schedule = assets[0]
        for asset in assets[1:]:
            schedule = schedule & asset
        return [
            Pipeline(
                f"{self.name}_pipeline",
                schedule=schedule,
                job=SparkJob("spark_jobs/bench.py"),
                outlets=[Asset(f"s3://bench-lake/curated/{self.name}")],
            )
        ]


SCENARIOS = (
    Scenario("single", "one queue, one pipeline on its asset: a run per message", ("bench-a",)),
    Scenario(
        "and",
        "two queues, one `a & b` pipeline; 10 messages to a, then 10 to b, in turn",
        ("bench-a", "bench-b"),
    ),
)


@dataclass
class LambdaContext:
    """The context attributes Powertools reads."""

    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        """The function's ARN."""
        return f"arn:aws:lambda:{REGION}:123456789012:function:{self.function_name}"


class Workload:
    """One scenario on the emulators: the stack's resources, the functions' dependencies, the pollers."""

    def __init__(
        self, scenario: Scenario, *, ddb: str, moto: str, counter: RequestCounter, workdir: Path
    ) -> None:
        import boto3

        from assetflow.adapters.dynamodb import DynamoDbStore
        from assetflow.composition import Dependencies, Settings
        from assetflow.core.catalog import Catalog
        from assetflow_dev import LOCAL_CLIENT_KWARGS, client

        self.scenario = scenario
        self.counter = counter
        tag = uuid.uuid4().hex[:8]
        self.table = f"bench-cost-{scenario.name}-{tag}"
        self.bucket = f"bench-runs-{tag}"
        # Uncounted clients: set-up, the pollers' own reads (free or simulated), checks.
        self.ddb, self.streams = client("dynamodb", ddb), client("dynamodbstreams", ddb)
        self.sqs, self.s3, self.emr = client("sqs", moto), client("s3", moto), client("emr-serverless", moto)
        self.store = DynamoDbStore(self.ddb, self.table)
        self.store.create_table()
        self.s3.create_bucket(Bucket=self.bucket)
        bus = f"bench-bus-{tag}"
        client("events", moto).create_event_bus(Name=bus)
        self.application_id = self.emr.create_application(
            name=f"bench-{tag}", releaseLabel="emr-7.12.0", type="SPARK", clientToken=tag
        )["applicationId"]
        # The stack's run-token key: a run's outlet metadata goes under a secret token, as deployed.
        self.run_token_key = client("kms", moto).create_key(
            KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC"
        )["KeyMetadata"]["Arn"]
        self.queue_urls = {
            q: self.sqs.create_queue(QueueName=f"{q}-{tag}")["QueueUrl"] for q in scenario.queues
        }
        self.queue_arns = {
            q: self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            for q, url in self.queue_urls.items()
        }
        catalog_path = workdir / f"catalog-{tag}.json"
        catalog_path.write_text(json.dumps(Catalog.build(scenario.definitions()).to_document()))
        session = boto3.session.Session(**LOCAL_CLIENT_KWARGS)
        endpoints = {s: moto for s in ("s3", "sqs", "events", "emr-serverless", "kms")} | {"dynamodb": ddb}

        class CountedDependencies(Dependencies):
            """The composition root with every client it builds reporting to the counter."""

            def client(self, service: str) -> Any:
                return counter.attach(super().client(service))

        def deps(watcher: str | None = None) -> Dependencies:
            settings = Settings(
                table_name=self.table,
                catalog_path=str(catalog_path),
                event_bus_name=bus,
                listener_events=LISTENER_EVENTS,
                runs_bucket=self.bucket,
                emr_application_id=self.application_id,
                emr_job_role_arn=ROLE,
                run_token_key=self.run_token_key,
                region=REGION,
                watcher_name=watcher,
            )
            return CountedDependencies(settings, session=session, endpoints=endpoints)

        # One container per function (per watcher for ingest), as the stack deploys them.
        self.ingest_deps = {q: deps(q) for q in scenario.queues}
        self.evaluator_deps = deps()
        self.run_state_deps = deps()
        self.producer = counter.attach(client("sqs", moto))
        self.job_s3 = counter.attach(client("s3", moto))
        self._stream_iterators: dict[str, str | None] = {}
        self._seen_records: set[str] = set()
        self._seen_jobs: set[str] = set()
        self.job_states_delivered = 0

    def close(self) -> None:
        """Drop the table (DynamoDB Local keeps tables in memory)."""
        self.ddb.delete_table(TableName=self.table)

    # ---- the work ----------------------------------------------------------------------------------------

    def send(self, messages: int) -> None:
        """The producer: ``messages`` SendMessage calls, ``SQS_BATCH`` to each queue in turn."""
        for n in range(messages):
            queue = self.scenario.queues[(n // SQS_BATCH) % len(self.scenario.queues)]
            body = {"file": f"s3://bench-lake/landing/{queue}/{n:06d}.csv", "rows": n}
            self.producer.send_message(QueueUrl=self.queue_urls[queue], MessageBody=json.dumps(body))

    def _invoke(self, module: Any, event: Mapping[str, Any], deps: Any, *, records: int) -> Any:
        name = module.__name__
        context = LambdaContext(name.rsplit(".", 1)[-1], MEMORY_MB[name])
        started = time.perf_counter()
        answer = module.lambda_handler(dict(event), context, deps=deps)
        self.counter.record_invocation(
            name, memory_mb=MEMORY_MB[name], seconds=time.perf_counter() - started, records=records
        )
        return answer

    def pump_ingest(self) -> int:
        """The SQS event source mappings: one receive per queue, the function on the batch, then the delete."""
        from assetflow.functions import handle_sqs_messages

        handled = 0
        for queue, url in self.queue_urls.items():
            # The mapping's own ReceiveMessage and DeleteMessageBatch are billed: the counted producer client
            # makes them (Lambda long-polls; moto answers at once).
            received = self.producer.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=SQS_BATCH,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not received:
                continue
            event = {"Records": [self._sqs_record(m, self.queue_arns[queue]) for m in received]}
            answer = self._invoke(handle_sqs_messages, event, self.ingest_deps[queue], records=len(received))
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
            check(not failed, f"ingest failed messages {failed}")
            self.producer.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)],
            )
            handled += len(received)
        return handled

    @staticmethod
    def _sqs_record(message: Mapping[str, Any], arn: str) -> dict[str, Any]:
        attributes = {
            name: {"stringValue": a.get("StringValue"), "dataType": a.get("DataType", "String")}
            for name, a in (message.get("MessageAttributes") or {}).items()
        }
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": dict(message.get("Attributes") or {}),
            "messageAttributes": attributes,
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": REGION,
        }

    def _stream_records(self) -> list[dict[str, Any]]:
        arn = self.store.stream_arn()
        found: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            iterator = self._stream_iterators.get(shard_id)
            if shard_id not in self._stream_iterators:
                iterator = self.streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            while iterator:
                page = self.streams.get_records(ShardIterator=iterator)
                iterator = page.get("NextShardIterator")
                for record in page["Records"]:
                    sequence = record["dynamodb"]["SequenceNumber"]
                    if sequence in self._seen_records:
                        continue
                    self._seen_records.add(sequence)
                    dynamodb = dict(record["dynamodb"])
                    dynamodb["ApproximateCreationDateTime"] = int(
                        dynamodb["ApproximateCreationDateTime"].timestamp()
                    )
                    found.append({**record, "dynamodb": dynamodb, "eventSourceARN": arn})
                if not page["Records"]:
                    break
            self._stream_iterators[shard_id] = iterator
        return found

    def pump_stream(self) -> int:
        """The stream's event source mapping: its filter (new asset events only), then batches of 25."""
        from assetflow.functions import handle_asset_events

        wanted = [
            r
            for r in self._stream_records()
            if r["eventName"] == "INSERT" and r["dynamodb"]["Keys"]["sk"]["S"].startswith("EVENT#")
        ]
        for start in range(0, len(wanted), STREAM_BATCH):
            batch = wanted[start : start + STREAM_BATCH]
            answer = self._invoke(
                handle_asset_events, {"Records": batch}, self.evaluator_deps, records=len(batch)
            )
            check(not answer.get("batchItemFailures"), f"evaluator failed records: {answer}")
        return len(wanted)

    def pump_jobs(self) -> int:
        """Each new job run: the job-side helper's S3 reads and writes, then its states through EventBridge."""
        import assetflow_job
        from assetflow.functions import handle_job_state

        jobs = [
            j["id"]
            for page in self.emr.get_paginator("list_job_runs").paginate(applicationId=self.application_id)
            for j in page["jobRuns"]
        ]
        new = [j for j in jobs if j not in self._seen_jobs]
        for job_run_id in new:
            self._seen_jobs.add(job_run_id)
            job = self.emr.get_job_run(applicationId=self.application_id, jobRunId=job_run_id)["jobRun"]
            arguments = job["jobDriver"]["sparkSubmit"]["entryPointArguments"]
            for state in JOB_STATES:
                if state == "SUCCESS":
                    # The job reads its context and, succeeding, writes its outlet metadata.
                    with assetflow_job.run(arguments, s3_client=self.job_s3):
                        pass
                self._invoke(
                    handle_job_state,
                    self._job_state_event(job_run_id, state, name=job.get("name")),
                    self.run_state_deps,
                    records=1,
                )
                self.job_states_delivered += 1
        return len(new)

    def _job_state_event(self, job_run_id: str, state: str, *, name: str | None = None) -> dict[str, Any]:
        from assetflow_dev.launcher import job_state_event

        # EMR Serverless names the job (jobRunName) in its state changes; assetflow names it after its run.
        return job_state_event(
            application_id=self.application_id, job_run_id=job_run_id, state=state, job_run_name=name
        )

    def drain(self, *, rounds: int = 10_000) -> None:
        """Pump every source until a whole pass finds nothing to do."""
        for _ in range(rounds):
            work = self.pump_ingest() + self.pump_stream() + self.pump_jobs()
            if not work:
                return
        raise RuntimeError("the workload did not settle")

    # ---- what is left -------------------------------------------------------------------------------------

    def items(self) -> Iterator[dict[str, Any]]:
        """Every item of the table (uncounted)."""
        paginator = self.ddb.get_paginator("scan")
        for page in paginator.paginate(TableName=self.table):
            yield from page["Items"]


@contextmanager
def _counting_logs(counter: RequestCounter) -> Iterator[None]:
    """Count what the functions' Powertools loggers write (and keep it off the terminal)."""
    from assetflow.functions import handle_asset_events, handle_job_state, handle_sqs_messages

    sink = CountingSink()
    loggers = (
        handle_sqs_messages.logger.service,
        handle_asset_events.logger.service,
        handle_job_state.logger.service,
    )
    redirect_logger_streams(loggers, sink)
    try:
        yield
    finally:
        counter.record_log_bytes(sink.bytes)


def run_scenario(
    scenario: Scenario, messages: int, *, endpoints: Mapping[str, str], workdir: Path
) -> dict[str, Any]:
    """Send ``messages`` through a fresh deployment of ``scenario``; return the counts and what was made.

    Raises:
        BenchmarkCheckError: a message, event or run went missing.
    """
    counter = RequestCounter()
    with counter.paused():
        workload = Workload(
            scenario, ddb=endpoints["dynamodb"], moto=endpoints["moto"], counter=counter, workdir=workdir
        )
    started = time.perf_counter()
    try:
        with _counting_logs(counter):
            workload.send(messages)
            workload.drain()
        seconds = time.perf_counter() - started
        with counter.paused():
            runs = workload.store.list_runs(limit=1000).items
            items = list(workload.items())
    finally:
        workload.close()
    kinds: dict[str, int] = {}
    for item in items:
        kinds[item_kind(item)] = kinds.get(item_kind(item), 0) + 1
    bytes_by_kind: dict[str, float] = {}
    for item in items:
        bytes_by_kind[item_kind(item)] = bytes_by_kind.get(item_kind(item), 0) + stored_bytes(item)
    succeeded = sum(1 for r in runs if r["state"] == "success")
    check(len(runs) == succeeded == len(workload._seen_jobs), f"runs {len(runs)}, succeeded {succeeded}")
    # Every message made one event, and every run one outlet event.
    check(
        kinds.get("event", 0) == messages + len(runs), f"{kinds.get('event')} events for {messages} messages"
    )
    # None: a message's event is its own dedupe (keyed by SQS's time), as a run's outlet events are (keyed
    # by the run's end).
    check(kinds.get("dedupe", 0) == 0, f"{kinds.get('dedupe')} dedupe records")
    return {
        "messages": messages,
        "runs": len(runs),
        "events": kinds["event"],
        "job_states": workload.job_states_delivered,
        "seconds": seconds,
        "items_by_kind": dict(sorted(kinds.items())),
        "bytes_by_kind": bytes_by_kind,
        **counter.snapshot(),
    }


def platform_log_bytes(template: Mapping[str, Any]) -> float:
    """Bytes of Lambda's own lines per invocation of the stack's functions, from their logging configuration.

    None at system log level WARN; else the plain-text or JSON lines (the most any service function logs).
    """
    found = [0.0]
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties", {})
        if resource["Type"] != "AWS::Lambda::Function" or not str(props.get("Handler", "")).endswith(
            ".lambda_handler"
        ):
            continue
        logging = props.get("LoggingConfig", {})
        if logging.get("SystemLogLevel") == "WARN":
            continue
        json_format = logging.get("LogFormat") == "JSON"
        found.append(LAMBDA_PLATFORM_LOG_BYTES_JSON if json_format else LAMBDA_PLATFORM_LOG_BYTES)
    return max(found)


def _template_memory(template: Mapping[str, Any]) -> dict[str, int]:
    found = {}
    for resource in template.get("Resources", {}).values():
        if resource["Type"] == "AWS::Lambda::Function":
            handler = str(resource["Properties"].get("Handler", "")).removesuffix(".lambda_handler")
            if handler in MEMORY_MB:
                found[handler] = int(resource["Properties"].get("MemorySize", 128))
    return found


def _background(function: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``function`` in a thread now; calling the result waits for it and returns (or raises) its result."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def result() -> Any:
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both scenarios, price them, price the idle stack; print and write the results."""
    started = time.perf_counter()
    arguments = parser(__doc__.splitlines()[0], default_runs=3, quick_runs=1)
    arguments.add_argument(
        "--messages",
        type=int,
        default=None,
        help="messages per scenario, at least one batch of 10 per queue (100; 10 with --quick)",
    )
    arguments.add_argument(
        "--template", type=Path, action="append", default=None, help="a synthesised template (else synth)"
    )
    arguments.add_argument(
        "--envs", nargs="+", default=None, help="environments to synthesise (dev prod; dev with --quick)"
    )
    args = arguments.parse_args(argv)
    runs = runs_of(args)
    messages = args.messages or (SQS_BATCH if args.quick else 100)
    if messages < 1:
        raise SystemExit("--messages must be positive")
    counts = {s.name: max(messages, s.min_messages) for s in SCENARIOS}
    envs = args.envs or (["dev"] if args.quick else ["dev", "prod"])

    with tempfile.TemporaryDirectory(prefix="assetflow-cost-") as tmp:
        workdir = Path(tmp)
        if args.template:
            templates = {p.stem: json.loads(p.read_text()) for p in args.template}
            waiting: Callable[[], dict[str, Any]] = lambda: templates  # noqa: E731
        else:
            # The synth runs while the workload does: it is slow and uses another core.
            waiting = _background(lambda: {f"assetflow-{e}": synthesize_template(e, workdir) for e in envs})
        measured: dict[str, list[dict[str, Any]]] = {s.name: [] for s in SCENARIOS}
        for run in range(runs):
            # Fresh emulators per run: DynamoDB Local slows down over a long session (the GB-seconds follow).
            with emulators() as started_emulators:
                endpoints = {name: e.endpoint for name, e in started_emulators.items()}
                for scenario in SCENARIOS:
                    measured[scenario.name].append(
                        run_scenario(scenario, counts[scenario.name], endpoints=endpoints, workdir=workdir)
                    )
                    progress(
                        f"run {run + 1}/{runs}, {scenario.name}: "
                        f"{measured[scenario.name][-1]['seconds']:.1f} s, {measured[scenario.name][-1]['runs']} runs"
                    )
        templates = waiting()

    # Priced as production is configured (the first environment synthesised when prod is not).
    priced_env = "assetflow-prod" if "assetflow-prod" in templates else sorted(templates)[0]
    platform_bytes = platform_log_bytes(templates[priced_env])
    per_scenario: dict[str, Any] = {}
    for scenario in SCENARIOS:
        results = measured[scenario.name]
        priced = [
            cost_per_million(r["counts"], r["messages"], platform_log_bytes=platform_bytes) for r in results
        ]
        items = [line["item"] for line in priced[0]["lines"]]
        last = results[-1]
        messages = last["messages"]
        per_scenario[scenario.name] = {
            "description": scenario.description,
            "messages": messages,
            "runs_per_message": last["runs"] / messages,
            "events_per_message": last["events"] / messages,
            "usd_per_million_messages": summarize([p["total_usd_per_million"] for p in priced]),
            "lines": {
                item: {
                    "quantity_per_million": summarize(
                        [p["lines"][i]["quantity_per_million"] for p in priced]
                    ),
                    "unit": priced[0]["lines"][i]["unit"],
                    "usd_per_million": summarize([p["lines"][i]["usd_per_million"] for p in priced]),
                }
                for i, item in enumerate(items)
            },
            "storage": storage_per_million(last["bytes_by_kind"], messages),
            "counts_per_message": {k: v / messages for k, v in last["counts"].items()},
            "operations_per_message": {
                service: {op: round(t["calls"] / messages, 3) for op, t in ops.items()}
                for service, ops in last["operations"].items()
            },
            "write_units_per_message": {
                op: round((t["write_units"] + t["estimated_write_units"]) / messages, 3)
                for op, t in last["operations"].get("dynamodb", {}).items()
                if t["write_units"] + t["estimated_write_units"]
            },
            # What the write units go to: each kind of write (an update by the attributes it changes; a
            # transaction's items one by one), per message.
            "write_units_by_write": {
                label: {
                    "writes_per_message": round(t["writes"] / messages, 3),
                    "units_per_message": round(t["write_units"] / messages, 3),
                }
                for label, t in last["writes"].items()
            },
            "functions_per_message": {
                name: {k: v / messages for k, v in f.items()} for name, f in last["functions"].items()
            },
            "seconds": summarize([r["seconds"] for r in results]),
        }

    idle = {name: idle_cost_per_day(template) for name, template in sorted(templates.items())}
    notes = [
        f"Prices: us-east-1, looked up {PRICES_CHECKED}; no free tier applied.",
        "Per message: the producer's SendMessage, the SQS mapping's receive and delete (full batches of 10), "
        "ingest, the evaluator on filtered stream batches of 25, the launcher's S3 PUT and StartJobRun, the job "
        "helper's S3 GET and PUT, every EMR job state (5 per run) into the run-state function, outlet events.",
        "Lambda GB-seconds are measured locally against emulators (slower than AWS's DynamoDB): an upper estimate.",
        f"X-Ray: {XRAY_SAMPLING:.0%} of invocations traced; logs: Powertools output plus "
        f"{platform_bytes:g} bytes of Lambda's own lines per invocation ({priced_env}'s system log level; "
        f"{LAMBDA_PLATFORM_LOG_BYTES} as text, {LAMBDA_PLATFORM_LOG_BYTES_JSON} as JSON at INFO).",
        "KMS requests: as counted (a run's outlet token is an HMAC under a key each function derives once); SQS's "
        "and S3's data keys are cached by the services and not counted.",
        "Not priced here: Spark job compute on EMR Serverless (per job, not per event), the HTTP API.",
    ]
    for name, template in sorted(templates.items()):
        memory = _template_memory(template)
        if memory and memory != MEMORY_MB:
            notes.append(f"{name}: function memory {memory} differs from the measured {MEMORY_MB}")

    _print(per_scenario, idle, runs)
    write_result(
        NAME,
        {
            "per_million_messages": per_scenario,
            "idle_per_day": idle,
            "prices": {k: vars(p) for k, p in PRICES.items()},
        },
        results_dir=args.results_dir,
        quick=args.quick,
        parameters={
            "runs": runs,
            "messages": counts,
            "envs": sorted(templates),
            "priced_env": priced_env,
            "platform_log_bytes": platform_bytes,
            "region": REGION,
        },
        notes=notes,
        started=started,
    )
    return 0


def _print(per_scenario: Mapping[str, Any], idle: Mapping[str, Any], runs: int) -> None:
    names = list(per_scenario)
    first = per_scenario[names[0]]["lines"]
    rows = [
        [item, *(per_scenario[n]["lines"][item]["usd_per_million"]["median"] for n in names)]
        for item in first
    ]
    rows.append(["total", *(per_scenario[n]["usd_per_million_messages"]["median"] for n in names)])
    rows.append(["runs per message", *(per_scenario[n]["runs_per_message"] for n in names)])
    rows.append(
        ["storage $/month kept", *(per_scenario[n]["storage"]["usd_per_month_per_million"] for n in names)]
    )
    print_table(f"$ per million messages, us-east-1 (median of {runs} runs)", ["item", *names], rows)
    for name in names:
        writes = per_scenario[name]["write_units_by_write"]
        print_table(
            f"DynamoDB write units a message, {name} (last run), by write",
            ["write", "writes", "units"],
            [[label, w["writes_per_message"], w["units_per_message"]] for label, w in writes.items()],
        )
    for name, found in idle.items():
        print_table(
            f"Idle cost per day of {name}: ${found['usd_per_day']:.3f} (${found['usd_per_month']:.2f}/month)",
            ["item", "count", "kind", "$/day", "basis"],
            [
                [line["item"], line["count"], line["kind"], line["usd_per_day"], line["basis"]]
                for line in found["lines"]
                if line["kind"] != "free"
            ],
        )
        if found["unpriced"]:
            print(f"unpriced: {', '.join(found['unpriced'])}")


if __name__ == "__main__":
    sys.exit(main())
