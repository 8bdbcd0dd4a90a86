"""The code assets: the Lambda folder and the job-code folder, assembled offline and content-addressed."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from assetflow.cdk.bundle import CATALOG_FILE, BundleError, build_job_code, build_lambda_bundle
from assetflow.core.catalog import Catalog
from assetflow.jobcode import PY_FILES_ARCHIVE
from tests.examples import example_entry_points
from tests.infra.conftest import ROOT

pytestmark = pytest.mark.infra


def test_lambda_bundle_holds_the_library_and_the_compiled_catalog(catalog: Catalog, tmp_path: Path) -> None:
    bundle = build_lambda_bundle(catalog.to_document(), build_dir=tmp_path)
    assert json.loads((bundle.path / CATALOG_FILE).read_text()) == catalog.to_document()
    assert (bundle.path / "assetflow" / "core" / "catalog.py").is_file()
    assert (bundle.path / "assetflow" / "functions" / "handle_api.py").is_file()
    assert (bundle.path / "assetflow_job" / "contract.py").is_file()
    assert not (bundle.path / "assetflow" / "cdk").exists(), "the CDK construct stays out of Lambda"
    assert not (bundle.path / "assetflow_dev").exists(), "the local runtime stays out of Lambda"
    assert not list(bundle.path.rglob("__pycache__"))


def test_lambda_bundle_is_reused_while_its_content_is_unchanged(catalog: Catalog, tmp_path: Path) -> None:
    first = build_lambda_bundle(catalog.to_document(), build_dir=tmp_path)
    again = build_lambda_bundle(catalog.to_document(), build_dir=tmp_path)
    other = build_lambda_bundle({**catalog.to_document(), "changed": True}, build_dir=tmp_path)
    assert again.path == first.path
    assert other.path != first.path


def test_a_cached_vendoring_is_used_without_asking_again(
    catalog: Catalog, tmp_path: Path, monkeypatch
) -> None:
    # Given a dependency folder left by an earlier `-c vendor=true`
    from assetflow.cdk import bundle as module

    cached = tmp_path / "lambda-deps-cached"
    (cached / "croniter").mkdir(parents=True)
    (cached / "croniter" / "__init__.py").write_text("")
    monkeypatch.setattr(module, "vendored_dependencies", lambda build_dir, install: cached)
    # When the bundle is built without vendoring, Then the cached dependencies are in it
    bundle = build_lambda_bundle(catalog.to_document(), build_dir=tmp_path)
    assert bundle.vendored
    assert (bundle.path / "croniter" / "__init__.py").is_file()


def test_job_code_needs_local_entry_points_and_refuses_missing_ones(tmp_path: Path) -> None:
    project = tmp_path / "project"
    assert build_job_code(project, ["s3://code/etl.py"], build_dir=tmp_path / "build") is None
    with pytest.raises(BundleError, match="entry point is missing"):
        build_job_code(project, ["jobs/etl.py"], build_dir=tmp_path / "build")
    (project / "jobs").mkdir(parents=True)
    (project / "jobs" / "etl.py").write_text("print('etl')\n")
    only_jobs = build_job_code(project, ["jobs/etl.py"], build_dir=tmp_path / "build")
    assert only_jobs is not None and (only_jobs / "jobs" / "etl.py").is_file()
    with zipfile.ZipFile(only_jobs / PY_FILES_ARCHIVE) as archive:
        assert "assetflow_job/contract.py" in archive.namelist()


def test_job_code_of_this_project_has_the_entry_points_and_the_zip(tmp_path: Path) -> None:
    code = build_job_code(ROOT, example_entry_points(), build_dir=tmp_path)
    assert code is not None
    assert all((code / entry_point).is_file() for entry_point in example_entry_points())
    with zipfile.ZipFile(code / PY_FILES_ARCHIVE) as archive:
        assert {"assetflow_job/__init__.py", "spark_jobs/common.py"} <= set(archive.namelist())


def test_pruning_keeps_the_dependency_cache(catalog: Catalog, tmp_path: Path) -> None:
    cache = tmp_path / "lambda-deps-0123456789abcdef"
    cache.mkdir()
    for version in range(5):
        build_lambda_bundle({**catalog.to_document(), "version": version}, build_dir=tmp_path)
    assert cache.is_dir()
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("lambda-") and p != cache]) == 3
