"""A deployed environment's resource names, read from the outputs of its CloudFormation stack ``assetflow-<env>``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from assetflow.core.errors import AssetflowError

STACK_PREFIX = "assetflow-"
#: The stack's output keys (CfnOutput ids declared on the stack itself, so CDK does not suffix them).
OUTPUT_KEYS = ("TableName", "ApiUrl", "EventBusName", "RunsBucket", "EmrApplicationId")
# CloudFormation stack names: a letter, then letters, digits and hyphens, 128 characters in all.
_ENV_NAME = re.compile(rf"^[A-Za-z][A-Za-z0-9-]{{0,{127 - len(STACK_PREFIX)}}}$")


class StackOutputsError(AssetflowError):
    """The environment's stack cannot be read, or lacks an output; the message says which and why."""


@dataclass(frozen=True)
class StackOutputs:
    """The names a deployed environment's stack publishes; ``outputs`` holds every output by key."""

    stack_name: str
    table_name: str
    api_url: str | None = None
    event_bus_name: str | None = None
    runs_bucket: str | None = None
    emr_application_id: str | None = None
    outputs: Mapping[str, str] = field(default_factory=dict)


def stack_name(env: str) -> str:
    """The stack of environment ``env``: ``assetflow-<env>``.

    Raises:
        StackOutputsError: ``env`` cannot be part of a stack name.
    """
    if not _ENV_NAME.match(env):
        raise StackOutputsError(
            f"environment name {env!r} is not valid: use a letter, then letters, digits or '-' (e.g. 'dev')"
        )
    return STACK_PREFIX + env


def read_stack_outputs(cloudformation: Any, env: str) -> StackOutputs:
    """Read the outputs of ``assetflow-<env>`` with a CloudFormation client.

    Raises:
        StackOutputsError: no such stack, or it has no ``TableName`` output (not deployed completely).
    """
    name = stack_name(env)
    try:
        stacks = cloudformation.describe_stacks(StackName=name).get("Stacks", [])
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in error.get("Message", ""):
            raise StackOutputsError(
                f"no stack {name!r} in this account and region: deploy it (`cdk deploy -c env={env}`) "
                "or check AWS_REGION and the credentials' account"
            ) from exc
        raise StackOutputsError(
            f"cannot read stack {name!r}: {error.get('Code')}: {error.get('Message')}"
        ) from exc
    if not stacks:
        raise StackOutputsError(f"no stack {name!r} in this account and region")
    stack = stacks[0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", []) if "OutputValue" in o}
    if "TableName" not in outputs:
        status = stack.get("StackStatus", "unknown")
        raise StackOutputsError(
            f"stack {name!r} ({status}) has no TableName output (outputs: {sorted(outputs) or 'none'})"
        )
    return StackOutputs(
        stack_name=name,
        table_name=outputs["TableName"],
        api_url=outputs.get("ApiUrl"),
        event_bus_name=outputs.get("EventBusName"),
        runs_bucket=outputs.get("RunsBucket"),
        emr_application_id=outputs.get("EmrApplicationId"),
        outputs=outputs,
    )


__all__ = [
    "OUTPUT_KEYS",
    "STACK_PREFIX",
    "StackOutputs",
    "StackOutputsError",
    "read_stack_outputs",
    "stack_name",
]
