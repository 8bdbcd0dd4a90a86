"""The DynamoDB store: one table, one module per aggregate (events, queues, runs, quarantine).

``DynamoDbStore`` is all of them over one client, the ``Store`` port; see the README's data model for the
keys and access patterns.
"""

from __future__ import annotations

from assetflow.adapters.dynamodb.control import DynamoDbPipelineStore
from assetflow.adapters.dynamodb.events import DynamoDbEventStore
from assetflow.adapters.dynamodb.expectations import DynamoDbExpectationStore
from assetflow.adapters.dynamodb.quarantine import DynamoDbQuarantineStore
from assetflow.adapters.dynamodb.queues import DynamoDbQueueStore
from assetflow.adapters.dynamodb.runs import DynamoDbRunStore
from assetflow.adapters.dynamodb.table import (
    DEDUPE_TTL,
    INDEXES,
    DynamoDbTable,
    InvalidPageTokenError,
    plain_item,
    table_definition,
)
from assetflow.adapters.dynamodb.watermarks import DynamoDbWatermarkStore


class DynamoDbStore(
    DynamoDbEventStore,
    DynamoDbQueueStore,
    DynamoDbPipelineStore,
    DynamoDbRunStore,
    DynamoDbQuarantineStore,
    DynamoDbExpectationStore,
    DynamoDbWatermarkStore,
):
    """Reads and writes every record of assetflow in one DynamoDB table (the ``Store`` port)."""


__all__ = [
    "DEDUPE_TTL",
    "INDEXES",
    "DynamoDbEventStore",
    "DynamoDbExpectationStore",
    "DynamoDbPipelineStore",
    "DynamoDbQuarantineStore",
    "DynamoDbQueueStore",
    "DynamoDbRunStore",
    "DynamoDbStore",
    "DynamoDbTable",
    "DynamoDbWatermarkStore",
    "InvalidPageTokenError",
    "plain_item",
    "table_definition",
]
