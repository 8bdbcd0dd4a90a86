"""One synthesised app per environment config (session-scoped), with cdk-nag's report and the template."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii starts its Node process at import; the banner about Node 20 would land in every test's output.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# CI installs the CDK, so there a missing one is a broken setup that must fail, not skip.
if os.environ.get("CI"):
    import aws_cdk  # noqa: F401
else:
    pytest.importorskip("aws_cdk", reason="the CDK is not installed (pip install -r requirements-infra.txt)")

from aws_cdk import App
from aws_cdk.assertions import Template

from assetflow.cdk.app_context import feature_flags
from assetflow.cdk.config import ENVIRONMENTS, EnvironmentConfig
from assetflow.cdk.nag import add_nag_checks
from assetflow.cdk.stack import AssetflowStack
from assetflow.core.catalog import Catalog
from assetflow.loader import load_catalog

ROOT = Path(__file__).resolve().parents[2]
_timings: dict[str, float] = {}


@dataclass
class Synthesised:
    """An environment's synthesised stack: the template, cdk-nag's violations and any synth error."""

    config: EnvironmentConfig
    catalog: Catalog
    stack: AssetflowStack
    template: Template
    resources: dict[str, Any]
    violations: list[dict[str, Any]]
    error: str | None
    nag_ran: bool = False

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """The template's resources of one CloudFormation type, by logical id."""
        return {k: r for k, r in self.resources.items() if r["Type"] == resource_type}

    def logical_id(self, construct: Any) -> str:
        """The logical id of a construct's CloudFormation resource."""
        element = construct if hasattr(construct, "logical_id") else construct.node.default_child
        return self.stack.resolve(element.logical_id)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _timings:
        terminalreporter.write_line(
            "infra synth: " + ", ".join(f"{k} {v:.1f} s" for k, v in _timings.items())
        )


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog(ROOT / "pipelines")


@pytest.fixture(scope="session")
def synthesised(tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> dict[str, Synthesised]:
    """Every environment, synthesised once per session, lazily (see ``synth``)."""
    return _Cache(tmp_path_factory, catalog)


class _Cache(dict):  # type: ignore[type-arg]
    def __init__(self, tmp_path_factory: pytest.TempPathFactory, catalog: Catalog) -> None:
        super().__init__()
        self._tmp = tmp_path_factory
        self._catalog = catalog
        self._build_dir = tmp_path_factory.mktemp("build")

    def __missing__(self, name: str) -> Synthesised:
        started = time.perf_counter()
        config = ENVIRONMENTS[name]
        outdir = self._tmp.mktemp(f"cdk-{name}")
        app = App(outdir=str(outdir), context=feature_flags(ROOT))
        stack = AssetflowStack(
            app,
            f"assetflow-{name}",
            catalog=self._catalog,
            config=config,
            project_root=ROOT,
            # One build folder for every environment: the vendored dependencies are installed once per session.
            build_dir=self._build_dir,
        )
        add_nag_checks(app)
        error = None
        try:
            app.synth()
        except RuntimeError as exc:  # cdk-nag (policy validation) fails the synth on unacknowledged errors
            error = str(exc)
        document = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
        report = outdir / "validation-report.json"
        violations = (
            [v for p in json.loads(report.read_text())["pluginReports"] for v in p["violations"]]
            if report.exists()
            else []
        )
        result = Synthesised(
            config=config,
            catalog=self._catalog,
            stack=stack,
            template=Template.from_json(document),
            resources=document["Resources"],
            violations=violations,
            error=error,
            nag_ran=report.exists(),
        )
        self[name] = result
        _timings[name] = time.perf_counter() - started
        return result


@pytest.fixture(params=sorted(ENVIRONMENTS))
def env(request: pytest.FixtureRequest, synthesised: dict[str, Synthesised]) -> Synthesised:
    """Each environment config in turn (synthesised on first use, then reused)."""
    return synthesised[request.param]
