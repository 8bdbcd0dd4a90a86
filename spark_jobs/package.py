"""How the jobs are shipped and submitted: the ``--py-files`` zip for EMR and a local spark-submit line."""

from __future__ import annotations

import os
import stat
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: What the jobs import besides the entry point: shipped to EMR Serverless as one ``--py-files`` zip.
PY_FILES_PACKAGES = ("assetflow_job",)
PY_FILES_MODULES = ("spark_jobs/__init__.py", "spark_jobs/common.py", "spark_jobs/package.py")

#: Settings for a local driver: no UI, loopback only, few shuffle partitions, a quicker JVM start.
LOCAL_SPARK_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}

# A fixed timestamp and mode make the zip byte-for-byte the same for the same sources.
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_ZIP_MODE = (stat.S_IFREG | 0o644) << 16


def py_files_sources(root: Path = REPO_ROOT) -> list[tuple[str, Path]]:
    """List (name in the zip, file) for everything the ``--py-files`` zip holds, sorted by name."""
    entries: dict[str, Path] = {}
    for package in PY_FILES_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                entries[path.relative_to(root).as_posix()] = path
    for module in PY_FILES_MODULES:
        entries[module] = root / module
    return sorted(entries.items())


def build_py_files_zip(destination: str | os.PathLike[str], root: Path = REPO_ROOT) -> Path:
    """Write the ``--py-files`` zip (``assetflow_job``, ``spark_jobs.common`` and this module), deterministically.

    Raises:
        FileNotFoundError: when a source file is missing.

    """
    target = Path(destination)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, path in py_files_sources(root):
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.external_attr = _ZIP_MODE
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return target


def local_submit_command(
    entry_point: str | os.PathLike[str],
    context_uri: str,
    *,
    arguments: Sequence[str] = (),
    spark_conf: Mapping[str, str] | None = None,
    master: str = "local[2]",
    py_files: str | os.PathLike[str] | None = None,
    spark_submit: str | None = None,
    context_last: bool = False,
) -> list[str]:
    """Build the spark-submit command that runs one job locally (with the repo root on ``PYTHONPATH``).

    ``spark_conf`` (the pipeline's own settings) goes after the local defaults, so it wins; ``py_files``
    ships the zip of ``build_py_files_zip`` instead of relying on ``PYTHONPATH``, as on EMR.
    ``context_last`` puts ``--assetflow-context URI`` after ``arguments``, where EMR's
    ``entryPointArguments`` have it (the job-side helper accepts it anywhere).
    """
    command = [spark_submit or local_spark_submit(), "--master", master]
    for key, value in {**LOCAL_SPARK_CONF, **(spark_conf or {})}.items():
        command += ["--conf", f"{key}={value}"]
    if py_files is not None:
        command += ["--py-files", str(py_files)]
    context = ["--assetflow-context", context_uri]
    command += [str(entry_point), *([*arguments, *context] if context_last else [*context, *arguments])]
    return command


def local_spark_submit() -> str:
    """Return the spark-submit script of the pyspark this interpreter imports (so the pinned Spark runs)."""
    import pyspark  # imported lazily: the rest of this module needs only the standard library

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def local_submit_env(base: Mapping[str, str] | None = None, root: Path = REPO_ROOT) -> dict[str, str]:
    """Return the environment for a local spark-submit: this interpreter, the repo root importable."""
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    out = build_py_files_zip(sys.argv[1] if len(sys.argv) > 1 else "build/assetflow_jobs.zip")
    logging.getLogger("spark_jobs.package").info("py-files zip written path=%s", out)
