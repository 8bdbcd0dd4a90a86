"""``AssetflowService`` as a reusable construct, outside this project's CDK app."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Stack

from assetflow.cdk.assetflow import AssetflowService
from assetflow.cdk.config import ENVIRONMENTS
from assetflow.core.catalog import Catalog
from tests.infra.conftest import ROOT

pytestmark = pytest.mark.infra


def test_the_service_builds_in_an_app_without_the_projects_feature_flags(
    catalog: Catalog, tmp_path: Path
) -> None:
    # Given a team's own app and stack (their cdk.json, not ours), When the service is added, Then it builds
    stack = Stack(App(), "TeamStack")
    service = AssetflowService(
        stack,
        "Assetflow",
        catalog=catalog,
        config=ENVIRONMENTS["prod"],
        project_root=ROOT,
        build_dir=tmp_path,
    )
    assert {w.watcher for w in service.ingest.watchers} == set(catalog.watchers)
