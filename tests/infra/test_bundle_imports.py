"""Every synthesised Lambda bundle imports its handler with only what the Lambda Python runtime provides.

For each function of the template: its code asset folder (as ``cdk deploy`` uploads it), its handler and its
environment. The handler module is imported by a Python of the function's runtime version (3.12) started
isolated (``-I -S``: no site-packages, no user site, no PYTHONPATH), with ``sys.path`` set to what Lambda's
``python3.12`` runtime gives a function: the asset (``/var/task``), the layers (``/opt/python``) and the
runtime's own boto3. The Powertools layer is provided the way AWS builds it: the pinned
``aws-lambda-powertools[tracer]`` (Tracer needs the X-Ray SDK, which the layer ships) installed for
``manylinux2014_x86_64`` / CPython 3.12 into a folder that stands in for ``/opt/python``; boto3 likewise
stands in for the runtime's. Both come from PyPI once and are kept under ``build/`` (ignored by git).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assetflow.cdk.bundle import LAMBDA_PLATFORM, LAMBDA_PYTHON_VERSION
from tests.infra.conftest import ROOT, Synthesised

pytestmark = [pytest.mark.infra, pytest.mark.slow]

#: The Powertools release of the layer version the stack pins, and the boto3 of the runtime (as pinned).
LAYER_PACKAGES = ("aws-lambda-powertools[tracer]==3.37.0",)
RUNTIME_PACKAGES = ("boto3==1.44.5",)
#: What the runtime and the layer hold, never the asset: none of it may be vendored a second time.
NOT_IN_BUNDLE = (
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "assetflow_dev",
    "assetflow/cdk",
    "pyspark",
    "moto",
)


def lambda_python() -> str:
    """A CPython of the functions' runtime version (PATH, then pyenv's versions)."""
    # pyenv's shims on PATH only work for the selected versions: look at the installed versions first.
    candidates = sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/{LAMBDA_PYTHON_VERSION}.*/bin/python3"))
    )
    on_path = shutil.which(f"python{LAMBDA_PYTHON_VERSION}")
    if on_path is not None and "shims" not in Path(on_path).parts:
        candidates.append(on_path)
    found = candidates[-1] if candidates else None
    if found is None:
        message = (
            f"no Python {LAMBDA_PYTHON_VERSION} to import the bundles with (the Lambda runtime's version)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def installed(name: str, packages: tuple[str, ...]) -> Path:
    """``packages`` pip-installed for Lambda's platform into ``build/<name>`` once."""
    target = (
        ROOT
        / "build"
        / f"{name}-{LAMBDA_PYTHON_VERSION}-{hashlib.sha256(repr(packages).encode()).hexdigest()[:12]}"
    )
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", str(target), "--platform", LAMBDA_PLATFORM, "--implementation", "cp",
        "--python-version", LAMBDA_PYTHON_VERSION, "--only-binary=:all:", *packages,
    ]  # fmt: skip
    subprocess.run(command, check=True, timeout=600)
    (target / ".complete").write_text("")
    return target


def functions(env: Synthesised) -> dict[str, dict]:
    return {
        k: r["Properties"]
        for k, r in env.of_type("AWS::Lambda::Function").items()
        if "Handler" in r["Properties"]
    }


def asset_folder(env: Synthesised, properties: dict) -> Path:
    key = properties["Code"]["S3Key"]
    outdir = Path(env.stack.node.root.outdir)  # type: ignore[attr-defined]
    return outdir / f"asset.{key.removesuffix('.zip')}"


def plain_environment(properties: dict) -> dict[str, str]:
    """The function's environment, with CloudFormation references replaced by a placeholder."""
    variables = properties.get("Environment", {}).get("Variables", {})
    return {k: v if isinstance(v, str) else f"resolved-at-deploy-{k.lower()}" for k, v in variables.items()}


def test_every_bundle_imports_its_handler_with_only_the_lambda_runtime(
    synthesised: dict[str, Synthesised],
) -> None:
    env = synthesised["dev"]
    python = lambda_python()
    layer = installed("lambda-layer-powertools", LAYER_PACKAGES)
    runtime = installed("lambda-runtime-boto3", RUNTIME_PACKAGES)
    found = functions(env)
    assert found, "the template has no Python functions"
    checked = 0
    for logical_id, properties in sorted(found.items()):
        folder = asset_folder(env, properties) if "S3Key" in properties.get("Code", {}) else None
        if folder is None or not (folder / "assetflow").is_dir():
            continue  # CDK's own helpers (BucketDeployment's, log retention), not ours
        assert properties["Runtime"] == f"python{LAMBDA_PYTHON_VERSION}", logical_id
        for absent in NOT_IN_BUNDLE:
            assert not (folder / absent).exists(), f"{logical_id}: {absent} is in the bundle"
        module, _, attribute = properties["Handler"].rpartition(".")
        script = (
            "import importlib, json, sys\n"
            f"sys.path[:] = [{str(folder)!r}, {str(layer)!r}, {str(runtime)!r}] + [p for p in sys.path if 'python3' in p and 'site-packages' not in p]\n"
            f"module = importlib.import_module({module!r})\n"
            f"assert callable(getattr(module, {attribute!r}))\n"
            "leaked = sorted({m.split('.')[0] for m in sys.modules} & {'assetflow_dev', 'pyspark', 'moto', 'aws_cdk'})\n"
            "assert not leaked, leaked\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        )
        environment = {
            "PATH": "/usr/bin:/bin",
            "LAMBDA_TASK_ROOT": str(folder),
            "AWS_REGION": "eu-west-1",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_LAMBDA_FUNCTION_NAME": logical_id,
            **plain_environment(properties),
        }
        result = subprocess.run(
            [python, "-I", "-S", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env=environment,
            cwd=folder,
        )
        assert result.returncode == 0, f"{logical_id} ({properties['Handler']}):\n{result.stderr[-3000:]}"
        assert "assetflow" in json.loads(result.stdout.splitlines()[-1])
        checked += 1
    assert checked >= 4, f"only {checked} assetflow functions found"


def test_the_bundle_is_small_and_holds_its_dependencies(synthesised: dict[str, Synthesised]) -> None:
    env = synthesised["dev"]
    folders = {
        asset_folder(env, p) for p in functions(env).values() if (asset_folder(env, p) / "assetflow").is_dir()
    }
    assert len(folders) == 1, "every function shares one code asset"
    folder = folders.pop()
    for package in ("croniter", "jsonschema", "referencing", "rpds", "dateutil"):
        assert (folder / package).is_dir(), f"{package} is not vendored"
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert size < 8 * 1024 * 1024, f"the bundle is {size / 1e6:.1f} MB"
