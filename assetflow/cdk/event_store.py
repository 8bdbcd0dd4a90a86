"""The event store: the single DynamoDB table (asset events, queue entries, runs) and its stream."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from assetflow.adapters.dynamodb import table_definition

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"
#: Asset event items have sort keys with this prefix; the evaluator's stream filter relies on it.
EVENT_SORT_KEY_PREFIX = "EVENT#"


def deny_insecure_transport(service: str) -> iam.PolicyDocument:
    """A resource policy refusing every request to the resource that does not come over TLS.

    DynamoDB still answers plain HTTP on its regional endpoints; the policy makes such a request fail
    whoever signs it. ``Resource: "*"`` is the resource the policy is attached to (CloudFormation cannot name
    a table's own ARN in its policy).
    """
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                sid="DenyInsecureTransport",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=[f"{service}:*"],
                resources=["*"],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        ]
    )


class EventStore(Construct):
    """One table with string keys ``pk``/``sk``, a NEW_IMAGE stream, TTL, PITR and a customer-managed key.

    The table and its stream both refuse requests made without TLS (resource policies).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=removal_policy != RemovalPolicy.DESTROY,
            removal_policy=removal_policy,
            resource_policy=deny_insecure_transport("dynamodb"),
        )
        # The stream has a policy of its own; Table exposes none, so it is set on the CloudFormation resource.
        cfn_table = self.table.node.default_child
        if not isinstance(cfn_table, dynamodb.CfnTable):
            raise TypeError(f"{self.table.node.path} has no CfnTable")
        cfn_table.stream_specification = dynamodb.CfnTable.StreamSpecificationProperty(
            stream_view_type=dynamodb.StreamViewType.NEW_IMAGE.value,
            resource_policy=dynamodb.CfnTable.ResourcePolicyProperty(
                policy_document=deny_insecure_transport("dynamodb")
            ),
        )
        # The indexes the store queries, taken from the store itself so the two never drift apart.
        for index in table_definition()["GlobalSecondaryIndexes"]:
            keys = {k["KeyType"]: k["AttributeName"] for k in index["KeySchema"]}
            self.add_index(
                index["IndexName"],
                partition_key=keys["HASH"],
                sort_key=keys.get("RANGE"),
                projection=dynamodb.ProjectionType(index["Projection"]["ProjectionType"]),
            )

    def add_index(
        self,
        index_name: str,
        *,
        partition_key: str,
        sort_key: str | None = None,
        projection: dynamodb.ProjectionType = dynamodb.ProjectionType.ALL,
    ) -> None:
        """Add a global secondary index over string attributes (the hook for views that need one)."""
        self.table.add_global_secondary_index(
            index_name=index_name,
            partition_key=dynamodb.Attribute(name=partition_key, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING)
            if sort_key
            else None,
            projection_type=projection,
        )
