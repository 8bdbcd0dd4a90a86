"""``assetflow init DIR``: a new project of one's own, from the template beside this module.

The project has ``pipelines/`` (one pipeline with an SQS watcher), ``jobs/`` (its PySpark entry point),
``app.py`` + ``cdk.json`` (its stack, built on ``AssetflowService``), ``tests/``, ``requirements.txt``,
``demo.json`` and a README. ``validate``, ``dev up``, ``demo``, ``pytest`` and ``cdk synth`` work in it as
they are.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import assetflow

TEMPLATE = Path(__file__).resolve().parent / "template"
#: Template files stored under another name (package data keeps no dot files reliably).
_RENAMED = {"gitignore": ".gitignore"}
_SKIPPED = frozenset({"__pycache__", ".pytest_cache", ".assetflow", "cdk.out", "build"})
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,40}[a-z0-9]$")


class InitError(Exception):
    """The project cannot be created there; nothing was written."""


def project_name(target: Path) -> str:
    """The stack and package name for a folder: lower case, letters, digits and dashes.

    Raises:
        InitError: nothing usable is left of the folder's name.
    """
    name = re.sub(r"[^a-z0-9-]+", "-", target.resolve().name.lower()).strip("-")
    if not _NAME.fullmatch(name):
        raise InitError(
            f"cannot make a project name from the folder name {target.resolve().name!r}: use 2 to 42 letters, "
            "digits or dashes, starting with a letter"
        )
    return name


def create_project(target: Path) -> list[Path]:
    """Write a new project into ``target`` (which must be missing or empty); returns the files written.

    The files are written to a temporary folder beside ``target`` first and moved in at the end, so a
    failure leaves nothing behind.

    Raises:
        InitError: ``target`` is a file or a folder with something in it, or its name is unusable.
    """
    if target.exists() and not target.is_dir():
        raise InitError(f"{target} is a file; give a new or empty folder")
    if target.is_dir() and any(target.iterdir()):
        raise InitError(f"{target} is not empty; give a new or empty folder (nothing was changed)")
    name = project_name(target)
    values = {"name": name, "bucket": f"{name}-data", "version": assetflow.__version__}
    parent = target.resolve().parent
    if not parent.is_dir():
        raise InitError(f"{parent} does not exist; create it first")
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp's folder is private; the project is an ordinary folder
    try:
        written = []
        for source in sorted(TEMPLATE.rglob("*")):
            relative = source.relative_to(TEMPLATE)
            if source.is_dir() or _SKIPPED.intersection(relative.parts) or source.suffix == ".pyc":
                continue
            relative = relative.with_name(_RENAMED.get(relative.name, relative.name))
            text = source.read_text(encoding="utf-8")
            for key, value in values.items():
                text = text.replace("{{" + key + "}}", value)
            out = staging / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            written.append(target / relative)
        if target.is_dir():
            # An existing empty folder (perhaps the working directory) stays: the files move into it.
            for child in sorted(staging.iterdir()):
                child.rename(target / child.name)
        else:
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written
