"""The table and the evaluator's stream mapping: stream, TTL, PITR, KMS; bisect, retries, DLQ and the filter."""

from __future__ import annotations

import json

import pytest
from aws_cdk import RemovalPolicy
from aws_cdk.assertions import Match

from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra


def test_table_has_string_keys_a_stream_ttl_pitr_and_on_demand_billing(env: Synthesised) -> None:
    env.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": Match.array_with(
                [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
            ),
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {
                "StreamViewType": Match.string_like_regexp("^NEW_(IMAGE|AND_OLD_IMAGES)$")
            },
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {
                "SSEEnabled": True,
                "SSEType": "KMS",
                "KMSMasterKeyId": {"Fn::GetAtt": [env.logical_id(env.stack.service.key), "Arn"]},
            },
        },
    )


def test_table_has_every_index_the_store_queries(env: Synthesised) -> None:
    from assetflow.adapters.dynamodb import table_definition

    (table,) = env.template.find_resources("AWS::DynamoDB::Table").values()
    deployed = {
        index["IndexName"]: (index["KeySchema"], index["Projection"]["ProjectionType"])
        for index in table["Properties"].get("GlobalSecondaryIndexes", [])
    }
    wanted = {
        index["IndexName"]: (index["KeySchema"], index["Projection"]["ProjectionType"])
        for index in table_definition()["GlobalSecondaryIndexes"]
    }
    assert deployed == wanted
    assert {"gsi1", "gsi2", "gsi3"} <= deployed.keys()


def test_table_removal_policy_follows_the_config(env: Synthesised) -> None:
    table = env.resources[env.logical_id(env.stack.service.event_store.table)]
    expected = "Delete" if env.config.removal_policy == RemovalPolicy.DESTROY else "Retain"
    assert table["DeletionPolicy"] == expected
    assert table["Properties"].get("DeletionProtectionEnabled", False) is (expected == "Retain")


def _evaluator_mapping(env: Synthesised) -> dict:
    function = env.logical_id(env.stack.service.evaluator.handler.function)
    (mapping,) = [
        r["Properties"]
        for r in env.of_type("AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return mapping


def test_evaluator_reads_the_stream_with_bisect_bounded_retries_and_a_failure_destination(
    env: Synthesised,
) -> None:
    mapping = _evaluator_mapping(env)
    assert mapping["EventSourceArn"] == {
        "Fn::GetAtt": [env.logical_id(env.stack.service.event_store.table), "StreamArn"]
    }
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == env.config.stream_retry_attempts
    assert mapping["MaximumRecordAgeInSeconds"] == env.config.stream_max_record_age.to_seconds()
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [env.logical_id(env.stack.service.failures.bucket), "Arn"]
    }


def test_stream_filter_passes_only_inserts_of_asset_event_items(env: Synthesised) -> None:
    (criteria,) = _evaluator_mapping(env)["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == {
        "eventName": ["INSERT"],
        "dynamodb": {"Keys": {"sk": {"S": [{"prefix": "EVENT#"}]}}},
    }
