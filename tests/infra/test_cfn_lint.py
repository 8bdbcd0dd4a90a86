"""cfn-lint on every environment's synthesised template: no error, no warning but the justified ones.

cdk-nag runs on every synth (``tests/infra/test_security.py``); this is the other check AWS's own tooling
applies to a template before CloudFormation sees it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra

cfn_api = pytest.importorskip(
    "cfnlint.api", reason="cfn-lint is not installed (pip install -r requirements-infra.txt)"
)

#: The findings we keep on purpose, each with its reason.
JUSTIFIED: dict[str, str] = {
    # CDK makes every function DependsOn its role's default policy and the role itself, so the function is
    # not created before it may use its grants; the role is also referenced by GetAtt, which cfn-lint reports
    # as redundant. The extra DependsOn is harmless and CDK's own.
    "W3005": "CDK's DependsOn of a function on its role, also referenced by GetAtt",
}
#: Regions the stacks are deployed to in the configs and the docs' examples.
REGIONS = ["eu-west-1", "us-east-1"]


def test_cfn_lint_finds_nothing_unjustified(env: Synthesised, tmp_path: Path) -> None:
    template = tmp_path / f"{env.config.name}.template.json"
    template.write_text(json.dumps(env.template.to_json()))
    matches = cfn_api.lint_file(
        template, config=cfn_api.ManualArgs(regions=REGIONS, ignore_checks=sorted(JUSTIFIED))
    )
    assert not matches, "\n".join(f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches)


def test_the_justified_findings_still_occur(env: Synthesised, tmp_path: Path) -> None:
    # An ignored rule that no longer fires is a stale justification: drop it from JUSTIFIED.
    template = tmp_path / f"{env.config.name}.template.json"
    template.write_text(json.dumps(env.template.to_json()))
    found = {m.rule.id for m in cfn_api.lint_file(template, config=cfn_api.ManualArgs(regions=REGIONS))}
    assert set(JUSTIFIED) <= found, sorted(found)
