"""The repository's example project as the tests use it: its root, its job entry points, its py-files zip."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from assetflow.jobcode import build_py_files_zip
from assetflow.loader import load_catalog

REPO_ROOT = Path(__file__).resolve().parents[1]


@cache
def example_entry_points() -> tuple[str, ...]:
    """The entry points of the example pipelines (``pipelines/``)."""
    catalog = load_catalog(str(REPO_ROOT / "pipelines"))
    return tuple(sorted({p.job.entry_point for p in catalog.pipelines.values()}))


def example_py_files_zip(destination: Path) -> Path:
    """The ``--py-files`` zip of the example project, as the stack and the local launcher build it."""
    return build_py_files_zip(destination, REPO_ROOT, example_entry_points())
