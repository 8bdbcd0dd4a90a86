"""cdk-nag: the AwsSolutions checks on every synth, and the helpers that acknowledge a finding with its reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct


def add_nag_checks(app: IConstruct) -> None:
    """Run the AwsSolutions rule pack on every synth of ``app``; an unacknowledged error fails the synth."""
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one finding on ``construct`` and below (``AwsSolutions-IAM5[Resource::...]`` names one)."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))


def wildcard_resource(rule_target: IConstruct, suffix: str) -> str:
    """The IAM5 finding id of ``<LogicalId.Arn><suffix>``, the way cdk-nag prints a resource of ``rule_target``."""
    element = rule_target.node.default_child if not isinstance(rule_target, CfnElement) else rule_target
    if not isinstance(element, CfnElement):
        raise TypeError(f"{rule_target.node.path} has no CloudFormation resource")
    logical_id = Stack.of(element).resolve(element.logical_id)
    return f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>{suffix}]"


def acknowledge_dlq_sender(construct: IConstruct) -> None:
    """Acknowledge the KMS action wildcards that an event-source mapping's on-failure SQS destination adds."""
    for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
        acknowledge(
            construct,
            f"AwsSolutions-IAM5[Action::{action}]",
            "Added by the on-failure destination (SqsDlq grants send on the KMS-encrypted DLQ); the statement "
            "names the service's data key only.",
        )
