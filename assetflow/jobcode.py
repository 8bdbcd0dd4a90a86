"""How a project's jobs are shipped: the ``--py-files`` archive that EMR Serverless gives every job.

The archive holds the job-side helper (``assetflow_job``, from wherever it is installed) and the project's
own modules that the jobs import: every top-level package or module under the project root that an entry
point imports, followed through what those import in turn. EMR runs the entry points themselves from their
own objects. The archive is byte-for-byte the same for the same sources, so that a deployment changes only
when the code does.
"""

from __future__ import annotations

import ast
import os
import stat
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import assetflow_job
from assetflow_job.contract import PY_FILES_ARCHIVE

#: Never taken from the project: the helper comes from its installation, and jobs do not import assetflow.
_SHIPPED_APART = frozenset({"assetflow_job", "assetflow", "assetflow_dev"})
# A fixed timestamp and mode make the zip byte-for-byte the same for the same sources.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_ZIP_MODE = (stat.S_IFREG | 0o644) << 16


def _package_files(folder: Path, prefix: str) -> dict[str, Path]:
    return {
        f"{prefix}/{path.relative_to(folder).as_posix()}": path
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _imported_modules(path: Path) -> set[str]:
    """The modules a file imports absolutely, dotted; ``from a.b import c`` gives ``a.b`` and ``a.b.c``."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return set()  # the job fails on EMR as it would locally; the archive is not the place to say so
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _module_files(project_root: Path, dotted: str) -> dict[str, Path]:
    """The project's files behind a dotted module name: each package's ``__init__.py`` on the way, and the module."""
    files: dict[str, Path] = {}
    parts = dotted.split(".")
    for depth in range(1, len(parts) + 1):
        relative = "/".join(parts[:depth])
        package, module = project_root / relative / "__init__.py", project_root / f"{relative}.py"
        if package.is_file():
            files[f"{relative}/__init__.py"] = package
        elif module.is_file():
            files[f"{relative}.py"] = module
            break
        else:
            break  # not the project's (the standard library, pyspark, ...), or a name inside a module
    return files


def project_modules(project_root: Path, entry_points: Iterable[str]) -> dict[str, Path]:
    """The project's modules the entry points import, transitively: name in the zip → file."""
    found: dict[str, Path] = {}
    todo = [project_root / e for e in entry_points if not e.startswith("s3://")]
    while todo:
        for dotted in sorted(_imported_modules(todo.pop())):
            if dotted.split(".")[0] in _SHIPPED_APART:
                continue
            for name, path in _module_files(project_root, dotted).items():
                if name not in found:
                    found[name] = path
                    todo.append(path)
    return found


def py_files_sources(project_root: Path, entry_points: Iterable[str]) -> list[tuple[str, Path]]:
    """List (name in the zip, file) for everything the ``--py-files`` zip holds, sorted by name."""
    entries = _package_files(Path(assetflow_job.__file__).resolve().parent, "assetflow_job")
    entries.update(project_modules(Path(project_root), entry_points))
    return sorted(entries.items())


def deterministic_zip(files: Mapping[str, bytes], destination: str | os.PathLike[str]) -> Path:
    """Write ``files`` (name → content) to a zip whose bytes depend on nothing else."""
    target = Path(destination)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.external_attr = _ZIP_MODE
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    return target


def build_py_files_zip(
    destination: str | os.PathLike[str], project_root: Path, entry_points: Iterable[str]
) -> Path:
    """Write the ``--py-files`` zip of a project whose jobs start at ``entry_points``.

    Raises:
        FileNotFoundError: when a source file is missing.
    """
    sources = py_files_sources(project_root, entry_points)
    return deterministic_zip({name: path.read_bytes() for name, path in sources}, destination)


__all__ = [
    "PY_FILES_ARCHIVE",
    "build_py_files_zip",
    "deterministic_zip",
    "project_modules",
    "py_files_sources",
]
