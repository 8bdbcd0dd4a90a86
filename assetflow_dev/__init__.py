"""The local runtime's adapters: emulators of the AWS services and Kafka, and clients pointed at them."""

from __future__ import annotations

from assetflow_dev.aws import (
    LOCAL_ACCOUNT_ID,
    LOCAL_AWS_ENV,
    LOCAL_CLIENT_CONFIG,
    LOCAL_CLIENT_KWARGS,
    LOCAL_REGION,
    client,
)
from assetflow_dev.emulators import (
    LOCAL_KAFKA_CONSUMER_TIMEOUTS,
    DynamoDbLocal,
    Emulator,
    EmulatorError,
    EmulatorNotInstalledError,
    EmulatorStartError,
    MotoServer,
    TansuBroker,
)
from assetflow_dev.processes import free_port

__all__ = [
    "LOCAL_ACCOUNT_ID",
    "LOCAL_AWS_ENV",
    "LOCAL_CLIENT_CONFIG",
    "LOCAL_CLIENT_KWARGS",
    "LOCAL_KAFKA_CONSUMER_TIMEOUTS",
    "LOCAL_REGION",
    "DynamoDbLocal",
    "Emulator",
    "EmulatorError",
    "EmulatorNotInstalledError",
    "EmulatorStartError",
    "MotoServer",
    "TansuBroker",
    "client",
    "free_port",
]
