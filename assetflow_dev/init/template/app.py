"""This project's CDK app: one assetflow stack per environment, built from pipelines/ with the construct.

`cdk synth` / `cdk deploy` run it (cdk.json); `-c env=NAME` picks the environment below.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Environment, RemovalPolicy, Stack
from aws_cdk import aws_logs as logs

from assetflow.cdk.app_context import feature_flags
from assetflow.cdk.assetflow import AssetflowService
from assetflow.cdk.config import EnvironmentConfig
from assetflow.cdk.nag import add_nag_checks
from assetflow.loader import load_catalog

ROOT = Path(__file__).resolve().parent
PROJECT = "{{name}}"
ENVIRONMENTS = {
    "dev": EnvironmentConfig(
        name="dev",
        removal_policy=RemovalPolicy.DESTROY,
        log_retention=logs.RetentionDays.ONE_WEEK,
        data_read_locations=("s3://{{bucket}}/landing/",),
        data_write_locations=("s3://{{bucket}}/curated/",),
    ),
    "prod": EnvironmentConfig(
        name="prod",
        data_read_locations=("s3://{{bucket}}/landing/",),
        data_write_locations=("s3://{{bucket}}/curated/",),
    ),
}


def main() -> None:
    """Synthesise the stack of `-c env=NAME` (default dev)."""
    app = App(context=feature_flags(ROOT))
    name = str(app.node.try_get_context("env") or "dev")
    if name not in ENVIRONMENTS:
        raise SystemExit(f"unknown environment {name!r}: one of {', '.join(ENVIRONMENTS)}")
    config = ENVIRONMENTS[name]
    stack = Stack(
        app,
        f"{PROJECT}-{name}",
        env=Environment(account=config.account, region=config.region),
        description=f"{PROJECT} ({name}): assetflow pipelines",
    )
    catalog = load_catalog(ROOT / "pipelines")
    AssetflowService(stack, "Assetflow", catalog=catalog, config=config, project_root=ROOT)
    add_nag_checks(app)
    app.synth()


if __name__ == "__main__":
    main()
