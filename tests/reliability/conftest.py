"""The emulators for the reliability suites: the integration tests' session fixtures, shared as they are."""

from __future__ import annotations

from tests.integration.conftest import (
    dynamodb_client,
    dynamodb_local,
    emulator_log_dir,
    kafka_broker,
    moto_server,
    s3_client,
    sqs_client,
)

__all__ = [
    "dynamodb_client",
    "dynamodb_local",
    "emulator_log_dir",
    "kafka_broker",
    "moto_server",
    "s3_client",
    "sqs_client",
]
