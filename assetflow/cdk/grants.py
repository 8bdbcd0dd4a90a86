"""Grants with explicit actions (no ``*`` in action names) for the table, the runs bucket and the data key."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from assetflow.cdk.nag import acknowledge, wildcard_resource

#: Item reads and writes, conditional writes and transactions (TransactWriteItems is authorised per item
#: action). No Scan: every view is a query on a key.
TABLE_DATA_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
)
TABLE_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:DescribeTable")
KEY_READ_ACTIONS = ("kms:Decrypt", "kms:DescribeKey")
KEY_WRITE_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")


def grant_table_data(table: dynamodb.ITable, grantee: iam.IGrantable, *, write: bool = True) -> None:
    """Item access to the table (and its indexes), with its key."""
    table.grant(grantee, *(TABLE_DATA_ACTIONS if write else TABLE_READ_ACTIONS))
    if isinstance(grantee, Construct) and isinstance(table, Construct):
        acknowledge(
            grantee,
            wildcard_resource(table, "/index/*"),
            "Queries on this table's own indexes (gsi1-3: assets, runs, runs to submit); index ARNs only.",
        )
    if table.encryption_key is not None:
        table.encryption_key.grant(grantee, *(KEY_WRITE_ACTIONS if write else KEY_READ_ACTIONS))


def grant_objects(
    bucket: s3.IBucket, grantee: iam.IGrantable, prefix: str, *, write: bool, key: kms.IKey | None = None
) -> None:
    """Get (and put) the objects under ``prefix`` of ``bucket``, list that prefix, and use the bucket's key."""
    actions = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"] if write else ["s3:GetObject"]
    iam.Grant.add_to_principal(
        grantee=grantee, actions=actions, resource_arns=[bucket.arn_for_objects(f"{prefix}*")]
    )
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["s3:ListBucket"],
        resource_arns=[bucket.bucket_arn],
        conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
    )
    encryption_key = key or bucket.encryption_key
    if encryption_key is not None:
        encryption_key.grant(grantee, *(KEY_WRITE_ACTIONS if write else KEY_READ_ACTIONS))
