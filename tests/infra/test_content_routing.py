"""Routing on content reads large extras back: only then may the evaluator and the API read ``extras/``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from assetflow.cdk.app_context import feature_flags
from assetflow.cdk.config import ENVIRONMENTS
from assetflow.cdk.nag import add_nag_checks
from assetflow.cdk.stack import AssetflowStack
from assetflow.loader import load_catalog
from tests.infra.conftest import ROOT, Synthesised

WHERE_PIPELINE = """
from assetflow import Asset, Pipeline, SparkJob

big_deliveries = Pipeline(
    "big_deliveries",
    schedule=Asset.ref(name="raw_deliveries").where({"supplier": [{"prefix": "acme"}]}),
    job=SparkJob("spark_jobs/deliveries_etl.py"),
)
"""


def _reads_extras(env: Synthesised, role: Any) -> list[dict[str, Any]]:
    role_id = env.logical_id(role)
    return [
        s
        for p in env.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "s3:GetObject" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        and "/extras/*" in json.dumps(s["Resource"])
    ]


def test_only_a_catalog_that_routes_on_content_may_read_extras(
    synthesised: dict[str, Synthesised], tmp_path: Path
) -> None:
    env = synthesised["dev"]
    service = env.stack.service
    # The example catalog has no where-node and no key=: nothing reads extras back
    assert _reads_extras(env, service.evaluator.handler.role) == []
    assert _reads_extras(env, service.api.handler.role) == []

    definitions = tmp_path / "pipelines"
    shutil.copytree(ROOT / "pipelines", definitions)
    (definitions / "content.py").write_text(WHERE_PIPELINE)
    catalog = load_catalog(definitions)
    app = App(outdir=str(tmp_path / "out"), context=feature_flags(ROOT))
    stack = AssetflowStack(
        app,
        "content",
        catalog=catalog,
        config=ENVIRONMENTS["dev"],
        project_root=ROOT,
        build_dir=tmp_path / "b",
    )
    add_nag_checks(app)
    app.synth()  # cdk-nag fails the synth on an unacknowledged wildcard
    template = Template.from_stack(stack)
    routed = Synthesised(
        ENVIRONMENTS["dev"], catalog, stack, template, template.to_json()["Resources"], [], None
    )
    (evaluator,) = _reads_extras(routed, stack.service.evaluator.handler.role)
    assert "s3:PutObject" not in json.dumps(evaluator)  # reads only (the API also stores large extras)
    assert len(_reads_extras(routed, stack.service.api.handler.role)) == 1
    assert _reads_extras(routed, stack.service.run_state.handler.role) == []
