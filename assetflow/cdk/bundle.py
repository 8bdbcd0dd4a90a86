"""Assembles the Lambda and job-code asset folders without Docker, content-addressed so synth stays fast."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Lambda's Python runtime; the vendored wheels are resolved for it.
LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"
LAMBDA_REQUIREMENTS = Path(__file__).with_name("lambda-requirements.txt")
CATALOG_FILE = "catalog.json"
#: Name of the ``--py-files`` archive under the code prefix (``spark_jobs/package.py`` builds the same one).
PY_FILES_ARCHIVE = "assetflow_jobs.zip"

_SKIP_PARTS = frozenset({"__pycache__", "tests", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
# The local runtime (emulators, process management) never runs inside Lambda.
_LAMBDA_SKIP = frozenset({("assetflow", "local")})
_KEEP_FOLDERS = 3
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class BundleError(RuntimeError):
    """An asset folder could not be assembled (missing sources, or vendoring failed)."""


@dataclass(frozen=True)
class LambdaBundle:
    """The Lambda asset folder, and whether its third-party dependencies are in it."""

    path: Path
    vendored: bool
    has_functions: bool


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
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def build_lambda_bundle(
    project_root: Path, catalog_document: Mapping[str, Any], *, build_dir: Path, vendor: bool = False
) -> LambdaBundle:
    """Assemble the one Lambda asset folder: ``assetflow/``, ``functions/`` (if present), ``catalog.json``.

    Third-party dependencies come from the vendored folder when ``vendor`` asks for them or an earlier
    vendoring left them cached; otherwise the folder holds our code only (enough to synthesise).

    Raises:
        BundleError: ``assetflow/`` is missing, or vendoring failed.
    """
    package = project_root / "assetflow"
    if not package.is_dir():
        raise BundleError(f"{package}: the assetflow package is missing")
    files: dict[str, bytes] = {}
    for folder in (package, project_root / "functions"):
        if folder.is_dir():
            for path in _python_files(folder, project_root, _LAMBDA_SKIP):
                files[path.relative_to(project_root).as_posix()] = path.read_bytes()
    files[CATALOG_FILE] = (json.dumps(catalog_document, sort_keys=True, indent=1) + "\n").encode()
    deps = vendored_dependencies(build_dir, install=vendor)
    key = _digest([*sorted(files.items()), ("deps", (deps.name if deps else "").encode())])
    path = _materialise(build_dir / f"lambda-{key}", files, deps)
    return LambdaBundle(
        path=path, vendored=deps is not None, has_functions=(project_root / "functions").is_dir()
    )


def build_job_code(
    project_root: Path, *, build_dir: Path, folders: tuple[str, ...] = ("spark_jobs", "assetflow_job")
) -> Path | None:
    """Assemble what goes under the runs bucket's ``code/`` prefix: the job folders and the ``--py-files`` zip.

    Folders that do not exist (yet) are skipped; with none of them there is nothing to deploy (``None``).
    """
    files: dict[str, bytes] = {}
    for name in folders:
        folder = project_root / name
        if folder.is_dir():
            for path in _python_files(folder, project_root):
                files[path.relative_to(project_root).as_posix()] = path.read_bytes()
    if not files:
        return None
    py_files = _py_files_sources(project_root)
    if py_files:
        files[PY_FILES_ARCHIVE] = _deterministic_zip({name: path.read_bytes() for name, path in py_files})
    key = _digest(sorted(files.items()))
    return _materialise(build_dir / f"code-{key}", files)


def _py_files_sources(project_root: Path) -> list[tuple[str, Path]]:
    """What the ``--py-files`` zip holds, as ``spark_jobs/package.py`` (the jobs' own packaging) lists it."""
    module_path = project_root / "spark_jobs" / "package.py"
    if not module_path.is_file():
        return []
    spec = importlib.util.spec_from_file_location("_assetflow_spark_jobs_package", module_path)
    if spec is None or spec.loader is None:
        return []
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sources = getattr(module, "py_files_sources", None)
    if sources is None:
        return []
    return [(name, path) for name, path in sources(project_root) if path.is_file()]


def _deterministic_zip(files: Mapping[str, bytes]) -> bytes:
    with tempfile.TemporaryFile() as raw:
        with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in sorted(files):
                info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, files[name])
        raw.seek(0)
        return raw.read()


def default_build_dir(project_root: Path) -> Path:
    """``build/`` under the project (ignored by git), or ``ASSETFLOW_BUILD_DIR`` when set."""
    return Path(os.environ.get("ASSETFLOW_BUILD_DIR") or project_root / "build")
