"""CDK entry point: ``-c env=<name>`` picks an environment config; synthesises offline, with cdk-nag."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import App, Environment

from assetflow.cdk.app_context import feature_flags
from assetflow.cdk.config import config_for
from assetflow.cdk.nag import add_nag_checks
from assetflow.cdk.stack import AssetflowStack
from assetflow.loader import load_catalog

PROJECT_ROOT = Path(__file__).resolve().parent
_TRUE = ("1", "true", "yes")


def _direct_context(argv: Sequence[str]) -> dict[str, str]:
    parser = argparse.ArgumentParser(description="Synthesise the assetflow stack of one environment.")
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env=<name>, vendor=false (offline synth, not deployable), ...",
    )
    args = parser.parse_args(argv)
    context = {}
    for item in args.context:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"context must be KEY=VALUE, got {item!r}")
        context[key] = value
    return context


def main(argv: Sequence[str] = ()) -> None:
    """Build and synthesise the stack of the environment named by ``-c env=<name>`` (default ``dev``).

    Run by the CDK CLI (``npx cdk synth -c env=dev``: the CLI passes the context) or directly
    (``python app.py -c env=dev``: the same ``-c key=value`` options, parsed here).
    """
    app = App(
        outdir=os.environ.get("CDK_OUTDIR") or str(PROJECT_ROOT / "cdk.out"),
        context={**feature_flags(PROJECT_ROOT), **_direct_context(argv)},
    )
    config = config_for(str(app.node.try_get_context("env") or "dev"))
    pipelines = app.node.try_get_context("pipelines") or str(PROJECT_ROOT / "pipelines")
    # The functions' dependencies are bundled unless `-c vendor=false` (or ASSETFLOW_VENDOR_DEPS=0) says not to.
    vendor = (
        str(app.node.try_get_context("vendor") or os.environ.get("ASSETFLOW_VENDOR_DEPS", "true")).lower()
        in _TRUE
    )
    AssetflowStack(
        app,
        f"assetflow-{config.name}",
        catalog=load_catalog(pipelines),
        config=config,
        project_root=PROJECT_ROOT,
        vendor_dependencies=vendor,
        env=Environment(account=config.account, region=config.region),
        description=f"assetflow ({config.name}): data-aware scheduling of PySpark pipelines",
    )
    add_nag_checks(app)
    app.synth()


if __name__ == "__main__":
    main(sys.argv[1:])
