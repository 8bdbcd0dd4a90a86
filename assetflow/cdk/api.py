"""The operators' HTTP API (DESIGN §5): IAM-authorised routes on API Gateway, served by one function."""

from __future__ import annotations

import jsii
from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.functions import FunctionDefaults, ServiceFunction
from assetflow.cdk.ingest import grant_extras_writes

API_HANDLER = "assetflow.functions.handle_api"

#: Every route of DESIGN §5; each one requires SigV4-signed requests (IAM authorisation).
ROUTES: tuple[tuple[str, apigwv2.HttpMethod], ...] = (
    ("/assets/events", apigwv2.HttpMethod.POST),
    ("/assets/events", apigwv2.HttpMethod.GET),
    ("/assets", apigwv2.HttpMethod.GET),
    ("/pipelines/{id}/queue", apigwv2.HttpMethod.GET),
    ("/pipelines/{id}/queue", apigwv2.HttpMethod.DELETE),
    ("/pipelines/{id}/runs", apigwv2.HttpMethod.GET),
    ("/runs/{run_id}", apigwv2.HttpMethod.GET),
    ("/quarantine", apigwv2.HttpMethod.GET),
)


class OperatorApi(Construct):
    """An HTTP API (payload v2) with IAM authorisation on every route, access logs and throttling.

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
        for path, method in ROUTES:
            self.http_api.add_routes(path=path, methods=[method], integration=integration)
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
