"""Security properties of the synthesised stack (issue 7, item 4), checked on every environment's template.

- IAM: no ``*`` action; ``Resource: "*"`` only for actions that AWS authorises on nothing narrower, in our
  own statements and in the AWS managed policies the stack attaches.
- Encryption at rest: every queue, the table and every bucket; customer-managed, rotated keys where the
  service can use them.
- TLS only: every bucket, queue, the table and its stream refuse requests without TLS; every Kafka mapping
  reads its topic over TLS (see ``test_kafka_mappings_read_their_topics_over_tls_only``).
- Nothing public: only SigV4-signed requests reach the API, no resource policy allows anyone, buckets block
  public access, services invoke functions only from the stack's own sources.
- Logs: every log group keeps logs for the configured retention, and no function logs whole events.
- cdk-nag's AwsSolutions pack reports no unacknowledged error.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.aws_logs import LogGroup

from assetflow.core.watchers import KafkaTopic
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra

#: Actions that AWS authorises only on Resource "*", each with why the service needs it.
STAR_ONLY_ACTIONS: dict[str, str] = {
    "xray:PutTraceSegments": "active X-Ray tracing of every function",
    "xray:PutTelemetryRecords": "active X-Ray tracing of every function",
    "dynamodb:ListStreams": "the evaluator's stream mapping (DynamoEventSource) lists the table's streams",
    "ec2:DescribeNetworkInterfaces": "Kafka pollers inside a VPC (self-managed cluster)",
    "ec2:DescribeVpcs": "Kafka pollers inside a VPC (self-managed cluster)",
    "ec2:DescribeSubnets": "Kafka pollers inside a VPC (self-managed cluster)",
    "ec2:DescribeSecurityGroups": "Kafka pollers inside a VPC (self-managed cluster)",
}

#: The AWS managed policies a role of the stack may carry, as AWS publishes them (the template names them by
#: ARN only). AWSLambdaMSKExecutionRole v2 (edited 2022-08-02), from the AWS Managed Policy reference.
AWS_MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "service-role/AWSLambdaMSKExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "kafka:DescribeCluster",
                    "kafka:DescribeClusterV2",
                    "kafka:GetBootstrapBrokers",
                    "ec2:CreateNetworkInterface",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                ],
                "Resource": "*",
            }
        ],
    }
}

#: How a Kafka mapping authenticates, for the types that make Lambda read the topic over TLS.
KAFKA_TLS_AUTHENTICATIONS: dict[str, str] = {
    "SASL_SCRAM_512_AUTH": "SASL/SCRAM, which Lambda speaks only over TLS (SASL_SSL; no SASL_PLAINTEXT)",
    "SASL_SCRAM_256_AUTH": "SASL/SCRAM, which Lambda speaks only over TLS (SASL_SSL; no SASL_PLAINTEXT)",
    "BASIC_AUTH": "SASL/PLAIN, which Lambda sends only over TLS",
    "CLIENT_CERTIFICATE_TLS_AUTH": "mutual TLS",
}
#: The ones Amazon MSK accepts (it has no SASL/PLAIN); with none of them the mapping uses IAM authentication.
MSK_TLS_AUTHENTICATIONS = frozenset({"SASL_SCRAM_512_AUTH", "CLIENT_CERTIFICATE_TLS_AUTH"})

#: Buckets that cannot use KMS, with why.
S3_MANAGED_ENCRYPTION_ONLY = {
    "server access logs": "S3 delivers server access logs only to buckets encrypted with SSE-S3, not SSE-KMS",
}

#: Resource types that would open a way in besides the IAM-authorised HTTP API.
PUBLIC_ENTRY_POINTS = (
    "AWS::Lambda::Url",
    "AWS::ApiGateway::RestApi",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::SecurityGroupIngress",
    "AWS::AppSync::GraphQLApi",
)

#: What the module checked, over every environment, for one line of the terminal summary.
TALLY: Counter[str] = Counter()
CHECKED_ENVS: set[str] = set()


class _Summary:
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if TALLY:
            terminalreporter.write_line(
                f"stack security ({', '.join(sorted(CHECKED_ENVS))}): {TALLY['statements']} IAM statements "
                f"and {TALLY['managed']} managed policies checked for '*'; {TALLY['queues']} queues, "
                f"{TALLY['tables']} tables, {TALLY['buckets']} buckets encrypted and TLS-only; "
                f"{TALLY['kafka']} Kafka mappings TLS-only; {TALLY['routes']} routes IAM-only; "
                f"{TALLY['policies']} resource policies with no public Allow; {TALLY['log groups']} log "
                f"groups with retention; {TALLY['functions']} functions without event/debug logging"
            )


@pytest.fixture(autouse=True)
def summary(request: pytest.FixtureRequest) -> None:
    if not request.config.pluginmanager.has_plugin("assetflow-stack-security-summary"):
        request.config.pluginmanager.register(_Summary(), "assetflow-stack-security-summary")


_DEBUG_LEVELS = frozenset({"DEBUG", "TRACE"})
_CREDENTIAL_VALUE = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b|-----BEGIN [A-Z ]*PRIVATE KEY-----")
_CREDENTIAL_NAME = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|PRIVATE_KEY", re.IGNORECASE)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _policy_documents(env: Synthesised) -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for logical_id, resource in env.resources.items():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append((logical_id, props["PolicyDocument"]))
        elif resource["Type"] == "AWS::IAM::Role":
            documents.extend((logical_id, p["PolicyDocument"]) for p in props.get("Policies", []))
    return documents


def _star_problems(owner: str, document: dict[str, Any]) -> list[str]:
    problems = []
    for statement in _as_list(document["Statement"]):
        if statement["Effect"] != "Allow":
            continue
        actions = _as_list(statement["Action"])
        if "*" in actions or any(a.endswith(":*") for a in actions):
            problems.append(f"{owner}: wildcard action in {actions}")
        if "*" in _as_list(statement["Resource"]):
            unexpected = sorted(set(actions) - set(STAR_ONLY_ACTIONS))
            if unexpected:
                problems.append(f"{owner}: {unexpected} on Resource '*'")
    return problems


def _managed_policy_name(arn: Any) -> str:
    """``service-role/AWSLambdaMSKExecutionRole`` from the Fn::Join CDK writes for an AWS managed policy."""
    parts = arn["Fn::Join"][1] if isinstance(arn, dict) else [arn]
    text = "".join(p for p in parts if isinstance(p, str))
    return text.split(":iam::aws:policy/", 1)[-1]


def _kafka_mappings(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: r["Properties"]
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
        and (
            "SelfManagedEventSource" in r["Properties"]
            or "AmazonManagedKafkaEventSourceConfig" in r["Properties"]
            or ":kafka:" in str(r["Properties"].get("EventSourceArn", ""))
        )
    }


def _role_statements_of_function(resources: dict[str, Any], function_ref: Any) -> list[dict[str, Any]]:
    function = resources[function_ref["Ref"]]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"].get("Roles", [])
        for s in _as_list(r["Properties"]["PolicyDocument"]["Statement"])
    ]
    for inline in resources[role_id]["Properties"].get("Policies", []):
        statements += _as_list(inline["PolicyDocument"]["Statement"])
    return statements


def kafka_tls_problems(resources: dict[str, Any]) -> list[str]:
    """The Kafka mappings of a template that could read their topic without TLS, each with why."""
    problems = []
    for logical_id, mapping in _kafka_mappings(resources).items():
        methods = {c["Type"] for c in mapping.get("SourceAccessConfigurations", [])}
        if "SelfManagedEventSource" in mapping:
            if not methods & set(KAFKA_TLS_AUTHENTICATIONS):
                problems.append(
                    f"{logical_id}: a self-managed mapping without SASL or client-certificate authentication "
                    f"reads in plain text (access: {sorted(methods)})"
                )
            continue
        if methods & MSK_TLS_AUTHENTICATIONS:
            continue
        if methods:
            problems.append(f"{logical_id}: MSK mapping with {sorted(methods)}, none of them TLS")
            continue
        cluster = mapping["EventSourceArn"]
        connects = any(
            s["Effect"] == "Allow"
            and "kafka-cluster:Connect" in _as_list(s["Action"])
            and cluster in _as_list(s["Resource"])
            for s in _role_statements_of_function(resources, mapping["FunctionName"])
        )
        if not connects:
            problems.append(
                f"{logical_id}: MSK mapping with no SASL/SCRAM or mTLS secret and no IAM access "
                f"(kafka-cluster:Connect on {cluster}): Lambda would fall back to unauthenticated access"
            )
    return problems


def _uses_msk(env: Synthesised) -> bool:
    return any("SelfManagedEventSource" not in m for m in _kafka_mappings(env.resources).values())


def _ref(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` points at."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


# --- IAM ------------------------------------------------------------------------------------------------


def test_iam_statements_name_specific_resources(env: Synthesised) -> None:
    documents = _policy_documents(env)
    assert documents
    problems = [p for logical_id, document in documents for p in _star_problems(logical_id, document)]
    assert not problems, "\n".join(problems)
    TALLY["statements"] += sum(len(_as_list(d["Statement"])) for _, d in documents)
    CHECKED_ENVS.add(env.config.name)


def test_aws_managed_policies_name_specific_resources(env: Synthesised) -> None:
    problems = []
    for logical_id, role in env.of_type("AWS::IAM::Role").items():
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            name = _managed_policy_name(arn)
            if name not in AWS_MANAGED_POLICIES:
                problems.append(f"{logical_id}: unknown managed policy {name}; add its document to this test")
                continue
            problems += _star_problems(f"{logical_id} ({name})", AWS_MANAGED_POLICIES[name])
            TALLY["managed"] += 1
    assert not problems, "\n".join(problems)


def test_no_role_uses_an_aws_managed_policy(env: Synthesised) -> None:
    # ManagedKafkaEventSource attaches AWSLambdaMSKExecutionRole ('*' everywhere); the stack drops it and grants
    # the trigger's actions on the cluster instead.
    for logical_id, role in env.of_type("AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), logical_id
    if _uses_msk(env):
        statements = [
            statement
            for policy in env.of_type("AWS::IAM::Policy").values()
            for statement in _as_list(policy["Properties"]["PolicyDocument"]["Statement"])
        ]
        discovery = [s for s in statements if s.get("Sid") == "DiscoverMskCluster"]
        assert discovery, "the MSK ingest cannot discover its cluster"
        for statement in discovery:
            assert ":cluster/" in json.dumps(statement["Resource"]), statement


def test_every_function_has_a_role_of_its_own(env: Synthesised) -> None:
    roles = [f["Properties"]["Role"] for f in env.of_type("AWS::Lambda::Function").values()]
    assert len({str(r) for r in roles}) == len(roles)


# --- encryption at rest ---------------------------------------------------------------------------------


def test_queues_table_and_buckets_are_encrypted_at_rest(env: Synthesised) -> None:
    keys = set(env.of_type("AWS::KMS::Key"))
    for logical_id, key in env.of_type("AWS::KMS::Key").items():
        if key["Properties"].get("KeySpec") == "HMAC_256":
            continue  # the run tokens' HMAC key: KMS cannot rotate HMAC keys (and it encrypts nothing)
        assert key["Properties"]["EnableKeyRotation"] is True, logical_id
    queues = env.of_type("AWS::SQS::Queue")
    assert queues
    for logical_id, queue in queues.items():
        # A key of this stack, not SQS's own (alias/aws/sqs), so its policy and rotation are ours.
        assert _ref(queue["Properties"].get("KmsMasterKeyId")) in keys, logical_id
    for logical_id, table in env.of_type("AWS::DynamoDB::Table").items():
        sse = table["Properties"]["SSESpecification"]
        assert sse["SSEEnabled"] is True and sse["SSEType"] == "KMS", logical_id
        assert _ref(sse["KMSMasterKeyId"]) in keys, logical_id
    runs = env.logical_id(env.stack.service.runs.bucket)
    access_logs = env.logical_id(env.stack.service.runs.access_logs)
    for logical_id, bucket in env.of_type("AWS::S3::Bucket").items():
        (rule,) = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        default = rule["ServerSideEncryptionByDefault"]
        if logical_id == access_logs:
            assert default == {"SSEAlgorithm": "AES256"}, S3_MANAGED_ENCRYPTION_ONLY["server access logs"]
        else:
            assert default["SSEAlgorithm"] == "aws:kms" and _ref(default["KMSMasterKeyID"]) in keys, (
                logical_id
            )
    (rule,) = env.resources[runs]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"] == {
        "Fn::GetAtt": [env.logical_id(env.stack.service.key), "Arn"]
    }


# --- TLS only -------------------------------------------------------------------------------------------


def _denies_insecure_transport(document: dict[str, Any], service: str, resources: list[Any]) -> bool:
    """Whether a statement denies everyone every action of ``service`` on ``resources`` without TLS."""
    return any(
        s["Effect"] == "Deny"
        and s.get("Principal") in ("*", {"AWS": "*"})
        and f"{service}:*" in _as_list(s["Action"])
        and all(r in _as_list(s["Resource"]) for r in resources)
        and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
        for s in _as_list(document["Statement"])
    )


def test_every_bucket_and_queue_refuses_requests_without_tls(env: Synthesised) -> None:
    bucket_policies = {
        p["Properties"]["Bucket"]["Ref"]: p["Properties"]["PolicyDocument"]
        for p in env.of_type("AWS::S3::BucketPolicy").values()
    }
    for logical_id in env.of_type("AWS::S3::Bucket"):
        arn = {"Fn::GetAtt": [logical_id, "Arn"]}
        objects = {"Fn::Join": ["", [arn, "/*"]]}
        policy = bucket_policies.get(logical_id)
        assert policy and _denies_insecure_transport(policy, "s3", [arn, objects]), logical_id
    queue_policies: dict[str, dict[str, Any]] = {}
    for policy in env.of_type("AWS::SQS::QueuePolicy").values():
        for queue in policy["Properties"]["Queues"]:
            queue_policies[queue["Ref"]] = policy["Properties"]["PolicyDocument"]
    for logical_id in env.of_type("AWS::SQS::Queue"):
        arn = {"Fn::GetAtt": [logical_id, "Arn"]}
        policy = queue_policies.get(logical_id)
        assert policy and _denies_insecure_transport(policy, "sqs", [arn]), logical_id
    TALLY["queues"] += len(env.of_type("AWS::SQS::Queue"))
    TALLY["buckets"] += len(env.of_type("AWS::S3::Bucket"))


def test_the_table_and_its_stream_refuse_requests_without_tls(env: Synthesised) -> None:
    tables = env.of_type("AWS::DynamoDB::Table")
    assert tables
    for logical_id, table in tables.items():
        props = table["Properties"]
        # In a DynamoDB resource policy "*" is the table (or stream) the policy is attached to.
        for what, holder in (("table", props), ("stream", props["StreamSpecification"])):
            policy = holder.get("ResourcePolicy", {}).get("PolicyDocument")
            assert policy and _denies_insecure_transport(policy, "dynamodb", ["*"]), (logical_id, what)
    TALLY["tables"] += len(tables)


def test_kafka_mappings_read_their_topics_over_tls_only(env: Synthesised) -> None:
    """Every Kafka event-source mapping reads its topic over TLS, which the template can pin down as follows.

    ``AWS::Lambda::EventSourceMapping`` has no "TLS on/off" property: Lambda picks the transport from the
    mapping's ``SourceAccessConfigurations`` (its authentication method) and, for MSK, from what the cluster
    offers. So "TLS-only" means, per mapping:

    - self-managed cluster: a SASL/SCRAM (256 or 512), SASL/PLAIN (``BASIC_AUTH``) or client-certificate
      (``CLIENT_CERTIFICATE_TLS_AUTH``) secret. Lambda speaks SASL only as SASL_SSL and mTLS is TLS; with only
      VPC settings (or nothing) it would connect in PLAINTEXT, so that is refused (``assetflow/cdk/config.py``
      refuses such a cluster config too). ``SERVER_ROOT_CA_CERTIFICATE`` only adds a private CA.
    - MSK: a SASL/SCRAM-512 or mTLS secret, or none and IAM authentication, which MSK serves only on its
      TLS listener: the function's role must hold ``kafka-cluster:Connect`` on exactly that cluster. With no
      secret and no IAM access Lambda would use the cluster's unauthenticated listener, which may be plain.

    What the template cannot show (the cluster's own client-broker encryption setting, a broker certificate
    signed by a CA Lambda trusts) belongs to the cluster's owner. At rest, the records stay in the cluster;
    what a mapping writes itself goes to its on-failure destination (the failures bucket), which
    ``test_queues_table_and_buckets_are_encrypted_at_rest`` checks.
    """
    mappings = _kafka_mappings(env.resources)
    kafka_watchers = [w for w, _ in env.catalog.watchers.values() if isinstance(w.source, KafkaTopic)]
    assert len(mappings) == len(kafka_watchers) > 0
    problems = kafka_tls_problems(env.resources)
    assert not problems, "\n".join(problems)
    TALLY["kafka"] += len(mappings)
    for mapping in mappings.values():
        destination = mapping["DestinationConfig"]["OnFailure"]["Destination"]
        # The failures bucket (KMS, TLS-only: checked with the other buckets) keeps the failed records.
        assert env.resources[_ref(destination)]["Type"] == "AWS::S3::Bucket"


def test_the_kafka_tls_check_refuses_plaintext_mappings(env: Synthesised) -> None:
    # The check above is only as good as its helper: break each mapping and see it refused.
    for logical_id in _kafka_mappings(env.resources):
        broken = copy.deepcopy(env.resources)
        props = broken[logical_id]["Properties"]
        if "SelfManagedEventSource" in props:
            props["SourceAccessConfigurations"] = [
                c for c in props["SourceAccessConfigurations"] if c["Type"].startswith("VPC_")
            ]
        else:
            for resource in broken.values():
                if resource["Type"] == "AWS::IAM::Policy":
                    statements = _as_list(resource["Properties"]["PolicyDocument"]["Statement"])
                    resource["Properties"]["PolicyDocument"]["Statement"] = [
                        s for s in statements if "kafka-cluster:Connect" not in _as_list(s["Action"])
                    ]
        assert [p for p in kafka_tls_problems(broken) if p.startswith(logical_id)], logical_id


# --- nothing public -------------------------------------------------------------------------------------


def _resource_policies(env: Synthesised) -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for logical_id, resource in env.resources.items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind in ("AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"):
            documents.append((logical_id, props["PolicyDocument"]))
        elif kind == "AWS::KMS::Key":
            documents.append((logical_id, props["KeyPolicy"]))
        elif kind == "AWS::DynamoDB::Table":
            for holder in (props, props.get("StreamSpecification", {})):
                if "ResourcePolicy" in holder:
                    documents.append((logical_id, holder["ResourcePolicy"]["PolicyDocument"]))
    return documents


def _is_anyone(principal: Any) -> bool:
    if principal == "*":
        return True
    if isinstance(principal, dict):
        return any("*" in [str(p) for p in _as_list(v)] for v in principal.values())
    return False


def test_no_resource_policy_allows_anyone(env: Synthesised) -> None:
    documents = _resource_policies(env)
    assert documents
    for logical_id, document in documents:
        for statement in _as_list(document["Statement"]):
            if statement["Effect"] == "Allow":
                assert not _is_anyone(statement.get("Principal")), (logical_id, statement)
    TALLY["policies"] += len(documents)


def test_only_the_stacks_own_sources_invoke_its_functions(env: Synthesised) -> None:
    permissions = env.of_type("AWS::Lambda::Permission")
    assert permissions
    for logical_id, permission in permissions.items():
        props = permission["Properties"]
        assert props["Action"] == "lambda:InvokeFunction", logical_id
        assert str(props["Principal"]).endswith(".amazonaws.com"), logical_id
        # Only from the API or the rule of this stack, named by ARN: no other resource's calls qualify.
        sources = {_ref(v) for v in _walk(props.get("SourceArn"))} & set(env.resources)
        assert sources, (logical_id, props.get("SourceArn"))


def _walk(value: Any) -> list[Any]:
    found = [value]
    if isinstance(value, dict):
        for item in value.values():
            found += _walk(item)
    elif isinstance(value, list):
        for item in value:
            found += _walk(item)
    return found


def test_only_signed_requests_reach_the_service(env: Synthesised) -> None:
    present = sorted({r["Type"] for r in env.resources.values()} & set(PUBLIC_ENTRY_POINTS))
    assert not present, present
    routes = env.of_type("AWS::ApiGatewayV2::Route")
    assert routes
    for logical_id, route in routes.items():
        # $default included: a catch-all route would otherwise take unsigned requests to the handler.
        assert route["Properties"]["AuthorizationType"] == "AWS_IAM", (logical_id, route["Properties"])
    TALLY["routes"] += len(routes)
    for logical_id, role in env.of_type("AWS::IAM::Role").items():
        for statement in _as_list(role["Properties"]["AssumeRolePolicyDocument"]["Statement"]):
            # Roles are assumed by AWS services only, never by any principal or another account.
            assert set(statement["Principal"]) == {"Service"}, (logical_id, statement)


def test_buckets_block_public_access(env: Synthesised) -> None:
    for logical_id, bucket in env.of_type("AWS::S3::Bucket").items():
        assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, logical_id


# --- logs -----------------------------------------------------------------------------------------------


def test_every_log_group_keeps_logs_for_the_configured_retention(env: Synthesised) -> None:
    # The number of days the config's RetentionDays stands for (jsii gives Python the member's name only).
    probe = LogGroup(Stack(), "Probe", retention=env.config.log_retention).node.default_child
    configured = probe.retention_in_days  # type: ignore[union-attr]
    assert isinstance(configured, int) and configured > 0
    groups = env.of_type("AWS::Logs::LogGroup")
    for logical_id, group in groups.items():
        assert group.get("Properties", {}).get("RetentionInDays") == configured, logical_id
    # Every function writes to a log group of the stack (else Lambda makes /aws/lambda/<name>, kept forever).
    for logical_id, function in env.of_type("AWS::Lambda::Function").items():
        assert _ref(function["Properties"]["LoggingConfig"]["LogGroup"]) in groups, logical_id
    for logical_id, stage in env.of_type("AWS::ApiGatewayV2::Stage").items():
        assert _ref(stage["Properties"]["AccessLogSettings"]["DestinationArn"]) in groups, logical_id
    TALLY["log groups"] += len(groups)


def test_no_function_logs_whole_events_debug_output_or_credentials(env: Synthesised) -> None:
    for logical_id, function in env.of_type("AWS::Lambda::Function").items():
        props = function["Properties"]
        variables = props.get("Environment", {}).get("Variables", {})
        assert str(variables.get("POWERTOOLS_LOGGER_LOG_EVENT", "false")).lower() != "true", logical_id
        for name in ("POWERTOOLS_DEV", "POWERTOOLS_EVENT_HANDLER_DEBUG"):
            assert str(variables.get(name, "false")).lower() != "true", (logical_id, name)
        for name in ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL", "AWS_LAMBDA_LOG_LEVEL"):
            assert str(variables.get(name, "INFO")).upper() not in _DEBUG_LEVELS, (logical_id, name)
        assert props.get("LoggingConfig", {}).get("ApplicationLogLevel", "INFO") not in _DEBUG_LEVELS
        for name, value in variables.items():
            assert not (isinstance(value, str) and _CREDENTIAL_VALUE.search(value)), (logical_id, name)
            if _CREDENTIAL_NAME.search(name):
                # A secret's name or ARN is fine; the secret itself never goes into the environment.
                assert not isinstance(value, str) or value.startswith("arn:"), (logical_id, name)
        TALLY["functions"] += 1


# --- cdk-nag --------------------------------------------------------------------------------------------


def test_cdk_nag_reports_no_unacknowledged_error(env: Synthesised) -> None:
    errors = [
        f"{v['ruleName']} at {c['constructPath']}"
        for v in env.violations
        if v["severity"] == "error"
        for c in v["violatingConstructs"]
    ]
    assert not errors, "\n".join(errors)
    assert env.error is None, env.error


def test_cdk_nag_ran(env: Synthesised) -> None:
    # The synth wrote cdk-nag's report (acknowledged findings are listed in it with their reasons).
    assert env.nag_ran


# --- the table: each function its actions and partitions (issue 14) ---------------------------------------

_ITEM_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:Scan",
}


def _table_statements(env: Synthesised, role: Any) -> list[dict[str, Any]]:
    table = env.logical_id(env.stack.service.event_store.table)
    role_id = env.logical_id(role)
    statements = []
    for resource in env.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in resource["Properties"].get("Roles", []):
            continue
        for statement in _as_list(resource["Properties"]["PolicyDocument"]["Statement"]):
            if set(_as_list(statement["Action"])) & _ITEM_ACTIONS and table in json.dumps(
                statement["Resource"]
            ):
                statements.append(statement)
    return statements


def _leading_keys(statement: dict[str, Any]) -> list[str]:
    return _as_list(
        statement.get("Condition", {}).get("ForAllValues:StringLike", {}).get("dynamodb:LeadingKeys", [])
    )


def test_every_table_grant_names_its_partitions_and_only_queue_entries_and_pending_items_are_ever_deleted(
    env: Synthesised,
) -> None:
    service = env.stack.service
    roles = [f.role for f in service.functions] + [service.spark.job_role]
    ingest_roles = [w.function.role for w in service.ingest.watchers if w.kind == "sqs"]
    for role in roles:
        statements = _table_statements(env, role)
        assert statements or role is service.spark.job_role, role.node.path  # jobs without inlets: none
        for statement in statements:
            actions = set(_as_list(statement["Action"]))
            assert "dynamodb:Scan" not in actions, (role.node.path, actions)
            on_indexes = all("/index/" in json.dumps(r) for r in _as_list(statement["Resource"]))
            if on_indexes:
                assert actions == {"dynamodb:Query"}, (role.node.path, statement)
                assert "*" not in json.dumps(statement["Resource"]), statement  # indexes by name
                continue
            keys = _leading_keys(statement)
            assert keys, f"{role.node.path}: {sorted(actions)} without dynamodb:LeadingKeys"
            if "dynamodb:DeleteItem" in actions:
                # queue entries, and the pending items that list runs until they are submitted
                assert actions == {"dynamodb:DeleteItem"} and keys == ["PENDING#*", "QUEUE#*"], (
                    role.node.path,
                    statement,
                )
            if "dynamodb:BatchWriteItem" in actions:
                # (it may delete too): only queue partitions, or the partitions an SQS watcher's ingest
                # function may overwrite anyway (its own assets' events, with PutItem)
                assert actions == {"dynamodb:BatchWriteItem"}, (role.node.path, statement)
                puts = {
                    json.dumps(k)
                    for s in statements
                    if "dynamodb:PutItem" in _as_list(s["Action"])
                    for k in _leading_keys(s)
                }
                own = [json.dumps(k) for k in keys]  # a key with a token is a document
                assert keys == ["QUEUE#*"] or (
                    role in ingest_roles
                    and all(k in puts and k.startswith(('"ASSET#', '"EVENTS#')) for k in own)
                ), (role.node.path, statement)
        TALLY["table grants"] += len(statements)


def test_ingest_functions_write_only_their_assets_events_dedupe_quarantine_and_watermarks_and_delete_nothing(
    env: Synthesised,
) -> None:
    for ingest in env.stack.service.ingest.watchers:
        uris = env.catalog.watcher_assets[ingest.watcher]
        own = {"kafka": "kafka:", "kinesis": f"kinesis:{ingest.watcher}:", "s3": f"s3:{ingest.watcher}:"}
        own["eventbridge"] = f"eventbridge:{ingest.watcher}:"
        statements = _table_statements(env, ingest.function.role)
        actions = {a for s in statements for a in _as_list(s["Action"])}
        assert "dynamodb:DeleteItem" not in actions and "dynamodb:Query" not in actions, ingest.watcher
        granted: set[str] = set()
        for statement in statements:
            for key in _leading_keys(statement):
                text = json.dumps(key)
                granted.add(text)
                prefix = own.get(ingest.kind, "-")
                assert (
                    # its assets' partitions and write shards (one source may feed several assets)
                    key in [k for uri in uris for k in (f"ASSET#{uri}", f"EVENTS#*#{uri}")]
                    or key == "QUARANTINE"
                    or text.startswith(
                        (
                            f'"DEDUPE#{prefix}',
                            f'"DEDUPE#quarantine#{prefix}',
                            f'"WATERMARK#{prefix.removesuffix(":")}',
                            '{"Fn::Join"',
                        )
                    )
                ), (ingest.watcher, key)
                if isinstance(key, dict):  # an SQS queue's identities (and its watermark): its own ARN
                    assert ("DEDUPE#" in text and ":*" in text) or (
                        "WATERMARK#sqs:" in text and "*" not in text
                    ), key
        # Every asset the watcher feeds can be written.
        assert all(json.dumps(f"ASSET#{uri}") in granted for uri in uris), (ingest.watcher, uris)


def test_jobs_only_read_their_inlets_events(env: Synthesised) -> None:
    service = env.stack.service
    statements = _table_statements(env, service.spark.job_role)
    assert {a for s in statements for a in _as_list(s["Action"])} <= {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
    }
    inlets = {i.uri for p in env.catalog.pipelines.values() for i in p.inlets}
    for statement in statements:
        assert {k.removeprefix("ASSET#") for k in _leading_keys(statement)} <= inlets | {"*"}
