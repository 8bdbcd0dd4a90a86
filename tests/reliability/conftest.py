"""The emulators for the reliability suites: the integration tests' fixtures, with a DynamoDB Local per module.

DynamoDB Local slows down with every stream record it keeps (those of deleted tables too), and these suites
write tens of thousands of events: a fresh instance per module keeps one suite from slowing the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assetflow_dev import DynamoDbLocal
from tests.integration.conftest import (
    _start,
    dynamodb_client,
    emulator_log_dir,
    kafka_broker,
    moto_server,
    s3_client,
    sqs_client,
)


@pytest.fixture(scope="module")
def dynamodb_local(emulator_log_dir: Path, request: pytest.FixtureRequest) -> Iterator[DynamoDbLocal]:
    log_dir = emulator_log_dir / request.module.__name__.rsplit(".", 1)[-1]
    emulator = DynamoDbLocal(log_dir=log_dir)
    _start(emulator)
    yield emulator
    emulator.stop()


__all__ = [
    "dynamodb_client",
    "dynamodb_local",
    "emulator_log_dir",
    "kafka_broker",
    "moto_server",
    "s3_client",
    "sqs_client",
]
