"""Load definitions from a folder of Python files (like Airflow's dags folder) or from a module."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from assetflow.core.catalog import Catalog, Definition
from assetflow.core.conditions import Asset
from assetflow.core.errors import AssetflowError
from assetflow.core.pipeline import Pipeline
from assetflow.core.uri import AssetUriError


class LoadError(AssetflowError):
    """A definitions file could not be imported; the message names the file and the cause."""


@contextmanager
def _importable(folder: Path) -> Iterator[None]:
    # Files in the folder import each other by bare module name (as in Airflow's dags folder); the
    # modules loaded for one catalog are dropped afterwards so that another folder can reuse the names,
    # and a module they replaced (a file named like an imported module) is put back.
    before = dict(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        for name, module in list(sys.modules.items()):
            if before.get(name) is module:
                continue
            module_file = getattr(module, "__file__", None)
            if module_file and Path(module_file).resolve().is_relative_to(folder):
                if name in before:
                    sys.modules[name] = before[name]
                else:
                    del sys.modules[name]


def _collect(module: ModuleType, origin: str, seen: set[int], found: list[Definition]) -> None:
    for value in vars(module).values():
        if isinstance(value, Pipeline | Asset) and id(value) not in seen:
            seen.add(id(value))
            found.append(Definition(value, origin))


def _load_file(path: Path) -> ModuleType:
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        raise LoadError(f"{path}: {type(exc).__name__}: {exc}\n{_user_frames(exc, path)}") from exc
    return module


def _user_frames(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(str(path.parent))]
    if any(isinstance(e, AssetUriError) for e in (exc, exc.__cause__, exc.__context__)):
        # The failing source line would show the URI as written, password included: name the place only.
        return "\n".join(f'  File "{f.filename}", line {f.lineno}, in {f.name}' for f in frames[-3:])
    return "".join(traceback.format_list(frames[-3:])).rstrip()


def load_definitions(target: str | Path) -> list[Definition]:
    """Import every ``*.py`` file of a folder (or one file, or a dotted module) and collect its definitions.

    Module-level ``Pipeline`` and ``Asset`` objects are collected; assets reached through pipelines are
    found by the catalog. Files whose names start with ``_`` are helpers and are not loaded on their own.

    Raises:
        LoadError: the target does not exist or a file fails to import.

    """
    found: list[Definition] = []
    seen: set[int] = set()
    path = Path(target)
    if path.is_dir():
        folder = path.resolve()
        files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
        if not files:
            raise LoadError(f"{path}: no definition files (*.py) found")
        with _importable(folder):
            for file in files:
                _collect(_load_file(file), f"{path}/{file.name}", seen, found)
        return found
    if path.suffix == ".py":
        if not path.is_file():
            raise LoadError(f"{path}: no such file")
        folder = path.resolve().parent
        with _importable(folder):
            _collect(_load_file(path.resolve()), str(path), seen, found)
        return found
    text = str(target)
    if text.startswith(".") or "/" in text or os.sep in text:
        # a path, not a dotted module name (import_module would take it for a relative import)
        raise LoadError(f"{target}: no such folder or file")
    try:
        module = importlib.import_module(text)
    except ImportError as exc:
        raise LoadError(f"{target}: not a folder, a .py file or an importable module ({exc})") from exc
    _collect(module, str(target), seen, found)
    return found


def load_catalog(target: str | Path) -> Catalog:
    """Load and validate the definitions at ``target``.

    Raises:
        LoadError: a file fails to import.
        CatalogError: the definitions are invalid as a whole.

    """
    return Catalog.build(load_definitions(target))


#: Files that mark a project's root folder (the CDK app's, or a Python project's).
PROJECT_MARKERS = ("cdk.json", "pyproject.toml")


def find_project_root(definitions: str | Path, *, cwd: Path | None = None) -> Path:
    """The folder that job entry points are relative to.

    The nearest folder at or above the definitions that holds ``cdk.json`` or ``pyproject.toml``, else the
    working directory (also for definitions given as a dotted module name); never where assetflow is installed.
    """
    here = (cwd or Path.cwd()).resolve()
    path = Path(definitions)
    if not path.is_absolute():
        path = here / path
    if not path.exists():
        return here
    start = path.resolve() if path.is_dir() else path.resolve().parent
    for folder in (start, *start.parents):
        if any((folder / marker).is_file() for marker in PROJECT_MARKERS):
            return folder
    return here


def missing_entry_points(catalog: Catalog, project_root: Path) -> list[str]:
    """One line for each pipeline whose local job entry point is not a file under ``project_root``."""
    missing = []
    for pid, pipeline in sorted(catalog.pipelines.items()):
        entry_point = pipeline.job.entry_point
        if not entry_point.startswith("s3://") and not (project_root / entry_point).is_file():
            missing.append(
                f"pipeline {pid}: its job entry point {entry_point} is not a file under {project_root}"
            )
    return missing
