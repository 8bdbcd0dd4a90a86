"""Assembles the Lambda and job-code asset folders without Docker, content-addressed so synth stays fast."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import assetflow
import assetflow_job
from assetflow.jobcode import PY_FILES_ARCHIVE, build_py_files_zip

#: Lambda's Python runtime; the vendored wheels are resolved for it.
LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"
LAMBDA_REQUIREMENTS = Path(__file__).with_name("lambda-requirements.txt")
CATALOG_FILE = "catalog.json"
#: What the functions take of the job-side helper: the names the two sides share (and the package's lazy init).
_LAMBDA_JOB_MODULES = ("__init__.py", "contract.py")

_SKIP_PARTS = frozenset({"__pycache__", "tests", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# The CDK construct never runs inside Lambda (the local runtime, assetflow_dev, is another package).
_LAMBDA_SKIP = frozenset({("assetflow", "cdk")})
_KEEP_FOLDERS = 3


class BundleError(RuntimeError):
    """An asset folder could not be assembled (missing sources, or vendoring failed)."""


@dataclass(frozen=True)
class LambdaBundle:
    """The Lambda asset folder, and whether its third-party dependencies are in it."""

    path: Path
    vendored: bool


def _python_files(folder: Path, root: Path, skip: frozenset[tuple[str, ...]] = frozenset()) -> list[Path]:
    files = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(root)
        if _SKIP_PARTS.intersection(rel.parts) or any(rel.parts[: len(s)] == s for s in skip):
            continue
        files.append(path)
    return files


def _digest(entries: Iterable[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in entries:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()[:16]


def _materialise(target: Path, files: Mapping[str, bytes], extra_tree: Path | None = None) -> Path:
    """Write ``files`` (and a copy of ``extra_tree``) to ``target`` once; an existing folder is reused as is."""
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        if extra_tree is not None:
            shutil.copytree(extra_tree, staging, dirs_exist_ok=True)
        for name, data in files.items():
            out = staging / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        try:
            staging.rename(target)
        except OSError:
            # Another synth built the same content first: its folder is identical, keep it.
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _prune(target.parent, target.name.rsplit("-", 1)[0], keep=target)
    return target


def _prune(parent: Path, stem: str, *, keep: Path) -> None:
    """Remove all but the newest few ``<stem>-<hash>`` folders (never another stem's, like ``lambda-deps-``)."""
    pattern = re.compile(rf"{re.escape(stem)}-[0-9a-f]{{16}}")
    folders = sorted(
        (p for p in parent.iterdir() if p.is_dir() and p != keep and pattern.fullmatch(p.name)),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in folders[_KEEP_FOLDERS - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def vendored_dependencies(build_dir: Path, *, install: bool) -> Path | None:
    """The folder of pip-installed Lambda dependencies, cached by the requirements' content.

    With ``install`` the folder is created when missing (this needs PyPI); without it an existing folder is
    returned and a missing one gives ``None``.

    Raises:
        BundleError: pip failed.
    """
    requirements = LAMBDA_REQUIREMENTS.read_bytes()
    key = _digest(
        [("requirements", requirements), ("platform", f"{LAMBDA_PLATFORM}-{LAMBDA_PYTHON_VERSION}".encode())]
    )
    target = build_dir / f"lambda-deps-{key}"
    if target.is_dir() or not install:
        return target if target.is_dir() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", str(staging),
        "--platform", LAMBDA_PLATFORM, "--implementation", "cp", "--python-version", LAMBDA_PYTHON_VERSION,
        "--only-binary=:all:", "-r", str(LAMBDA_REQUIREMENTS),
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
        if result.returncode != 0:
            raise BundleError(f"vendoring the Lambda dependencies failed:\n{result.stderr.strip()}")
        for cache in staging.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        # Nothing the functions import: console scripts and the packages' own test suites.
        for unused in [staging / "bin", *staging.glob("*/tests")]:
            shutil.rmtree(unused, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _library_files() -> dict[str, bytes]:
    """The installed library as the functions need it: ``assetflow`` without the CDK, and the shared contract."""
    files: dict[str, bytes] = {}
    package = Path(assetflow.__file__).resolve().parent
    for path in _python_files(package, package.parent, _LAMBDA_SKIP):
        files[path.relative_to(package.parent).as_posix()] = path.read_bytes()
    helper = Path(assetflow_job.__file__).resolve().parent
    for name in _LAMBDA_JOB_MODULES:
        files[f"assetflow_job/{name}"] = (helper / name).read_bytes()
    return files


def build_lambda_bundle(
    catalog_document: Mapping[str, Any], *, build_dir: Path, vendor: bool = False
) -> LambdaBundle:
    """Assemble the one Lambda asset folder: the library with its functions, and ``catalog.json``.

    Third-party dependencies come from the vendored folder when ``vendor`` asks for them (the default of the
    construct) or an earlier vendoring left them cached; otherwise the folder holds our code only (enough to
    synthesise, not to deploy).

    Raises:
        BundleError: vendoring failed.
    """
    files = _library_files()
    files[CATALOG_FILE] = (json.dumps(catalog_document, sort_keys=True, indent=1) + "\n").encode()
    deps = vendored_dependencies(build_dir, install=vendor)
    key = _digest([*sorted(files.items()), ("deps", (deps.name if deps else "").encode())])
    path = _materialise(build_dir / f"lambda-{key}", files, deps)
    return LambdaBundle(path=path, vendored=deps is not None)


def build_job_code(project_root: Path, entry_points: Iterable[str], *, build_dir: Path) -> Path | None:
    """Assemble what goes under the runs bucket's ``code/`` prefix: the entry points and the ``--py-files`` zip.

    Entry points given as ``s3://`` URIs are already in S3; with no local entry point there is nothing to
    deploy (``None``).

    Raises:
        BundleError: an entry point is not a file under ``project_root``.
    """
    local = sorted({e for e in entry_points if not e.startswith("s3://")})
    if not local:
        return None
    files: dict[str, bytes] = {}
    for entry_point in local:
        path = project_root / entry_point
        if not path.is_file():
            raise BundleError(
                f"{path}: the job entry point is missing (paths are relative to {project_root})"
            )
        files[entry_point] = path.read_bytes()
    with tempfile.TemporaryDirectory() as scratch:
        archive = build_py_files_zip(Path(scratch) / PY_FILES_ARCHIVE, project_root, local)
        files[PY_FILES_ARCHIVE] = archive.read_bytes()
    key = _digest(sorted(files.items()))
    return _materialise(build_dir / f"code-{key}", files)


def default_build_dir(project_root: Path) -> Path:
    """``build/`` under the project (ignored by git), or ``ASSETFLOW_BUILD_DIR`` when set."""
    return Path(os.environ.get("ASSETFLOW_BUILD_DIR") or project_root / "build")
