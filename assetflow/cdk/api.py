"""The operators' HTTP API (DESIGN §5): IAM-authorised routes on API Gateway, served by one function."""

from __future__ import annotations

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.ingest import grant_extras_writes
from assetflow.cdk.nag import acknowledge
from assetflow.routes import PERMISSIONS, ROUTES, Permission, of_permission

API_HANDLER = "assetflow.functions.handle_api"
#: What each permission's managed policy lets an operator do (its description in IAM).
PERMISSION_TEXT: dict[Permission, str] = {
    "read": "read the views: assets, events, queues, runs, quarantine, the catalog and the OpenAPI document",
    "emit": "create asset events",
    "operate": "act on queues and runs",
}


class OperatorApi(Construct):
    """An HTTP API (payload v2) with IAM authorisation on every route, access logs and throttling.

    Its routes are the table of ``assetflow/routes.py``. ``policies`` holds one IAM managed policy per
    permission (``read``, ``emit``, ``operate``), each allowing ``execute-api:Invoke`` on its routes only:
    attach the ones an operator needs to their role or group.

    With ``extras_bucket`` (the runs bucket, RUNS_BUCKET to the function) ``POST /assets/events`` stores
    large extras by reference.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvironmentConfig,
        defaults: FunctionDefaults,
        service: str,
        extras_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.handler = ServiceFunction(
            self,
            "Handler",
            defaults=defaults,
            handler_module=API_HANDLER,
            description="assetflow operator API: assets, events, queues, runs and quarantine",
            service=service,
            timeout=Duration.seconds(29),
            memory_mb=512,
        )
        if extras_bucket is not None:
            grant_extras_writes(extras_bucket, self.handler)
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="assetflow operator API (IAM-authorised)",
            default_authorizer=authorizers.HttpIamAuthorizer(),
            create_default_stage=False,
        )
        integration = integrations.HttpLambdaIntegration(
            "Handler",
            self.handler.function,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        for route in ROUTES:
            self.http_api.add_routes(
                path=route.path, methods=[apigwv2.HttpMethod(route.method)], integration=integration
            )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=config.log_retention, removal_policy=config.removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=50, burst_limit=100),
            access_log_settings=JsonAccessLogs(self.access_logs),
        )
        self.policies = {permission: self._policy(permission) for permission in PERMISSIONS}

    def _policy(self, permission: Permission) -> iam.ManagedPolicy:
        """The managed policy allowing ``execute-api:Invoke`` on the routes of one permission, on this stage."""
        policy = iam.ManagedPolicy(
            self,
            f"{permission.capitalize()}Policy",
            description=f"assetflow operator API: {PERMISSION_TEXT[permission]}",
            statements=[
                iam.PolicyStatement(
                    actions=["execute-api:Invoke"],
                    resources=[
                        self.http_api.arn_for_execute_api(route.method, route.arn_path, self.stage.stage_name)
                        for route in of_permission(permission)
                    ],
                )
            ],
        )
        api_id = Stack.of(self).resolve(self.http_api.node.default_child.logical_id)  # type: ignore[union-attr]
        for route in of_permission(permission):
            if route.variables:
                acknowledge(
                    policy,
                    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
                    f"<{api_id}>/{self.stage.stage_name}/{route.method}{route.arn_path}]",
                    "A route's path variable (a pipeline id, a run id) is a '*' in its execute-api ARN: the "
                    "policy allows that route for every pipeline or run, and no other route.",
                )
        return policy

    @property
    def url(self) -> str:
        """The API's base URL (ends with ``/``)."""
        return self.stage.url


@jsii.implements(apigwv2.IAccessLogSettings)
class JsonAccessLogs:
    """Access log settings for a stage: JSON lines with the caller's IAM identity, into a log group."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        """The log group."""
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        """Standard fields, with caller and user (the SigV4 principal)."""
        return apigw.AccessLogFormat.json_with_standard_fields(
            caller=True,
            http_method=True,
            ip=True,
            protocol=True,
            request_time=True,
            resource_path=True,
            response_length=True,
            status=True,
            user=True,
        )
