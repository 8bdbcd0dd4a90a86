"""One Lambda function with its own role and log group: the building block every capability uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from assetflow.cdk.nag import acknowledge

#: Powertools for AWS Lambda (Python) v3 publishes its layer from this account in every commercial region.
POWERTOOLS_LAYER_ACCOUNT = "017000801446"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.X86_64


def powertools_layer_arn(scope: Construct, version: int) -> str:
    """The public Powertools layer's ARN in the stack's region and partition, at a pinned layer version."""
    stack = Stack.of(scope)
    return (
        f"arn:{stack.partition}:lambda:{stack.region}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
        f"AWSLambdaPowertoolsPythonV3-python312-x86_64:{version}"
    )


@dataclass(frozen=True, kw_only=True)
class FunctionDefaults:
    """What every function of the service shares: code, layers, environment and log settings."""

    code: lambda_.Code
    layers: Sequence[lambda_.ILayerVersion]
    environment: Mapping[str, str] = field(default_factory=dict)
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    #: Lambda's own lines (START, END, REPORT are INFO); the functions' logs are JSON already (Powertools).
    system_log_level: str = "WARN"


class ServiceFunction(Construct):
    """A Python 3.12 function with a role of its own that holds only its log group's write permission.

    Everything else the function may do is granted to ``role`` by the construct that wires it up.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        handler_module: str,
        description: str,
        service: str,
        timeout: Duration,
        memory_mb: int = 256,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=defaults.log_retention, removal_policy=defaults.removal_policy
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Execution role of {handler_module}",
        )
        # Our own log permissions instead of AWSLambdaBasicExecutionRole: this log group only.
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=f"{handler_module}.lambda_handler",
            code=defaults.code,
            layers=list(defaults.layers),
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=lambda_.SystemLogLevel[defaults.system_log_level],
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            timeout=timeout,
            memory_size=memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            description=description,
            environment={**defaults.environment, "POWERTOOLS_SERVICE_NAME": service, **(environment or {})},
        )
        acknowledge(
            self,
            "AwsSolutions-L1",
            "Python 3.12 is pinned on purpose: the Powertools layer (python312) and the vendored wheels are "
            "built for it; move all three together.",
        )
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "Active X-Ray tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords, which AWS grants "
            "only on Resource '*'.",
        )
