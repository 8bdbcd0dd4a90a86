"""A job run on this machine: the spark-submit command line and environment of the local launcher."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from assetflow_job.contract import CONTEXT_ARGUMENT
from assetflow_job.local import LOCAL_SPARK_CONF


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
    """Build the spark-submit command that runs one job locally.

    ``spark_conf`` (the pipeline's own settings) goes after the local defaults, so it wins; ``py_files``
    ships the zip of ``assetflow.jobcode.build_py_files_zip`` instead of relying on ``PYTHONPATH``, as on EMR.
    ``context_last`` puts ``--assetflow-context URI`` after ``arguments``, where EMR's
    ``entryPointArguments`` have it (the job-side helper accepts it anywhere).
    """
    command = [spark_submit or local_spark_submit(), "--master", master]
    for key, value in {**LOCAL_SPARK_CONF, **(spark_conf or {})}.items():
        command += ["--conf", f"{key}={value}"]
    if py_files is not None:
        command += ["--py-files", str(py_files)]
    context = [CONTEXT_ARGUMENT, context_uri]
    command += [str(entry_point), *([*arguments, *context] if context_last else [*context, *arguments])]
    return command


def local_spark_submit() -> str:
    """Return the spark-submit script of the pyspark this interpreter imports (so the pinned Spark runs)."""
    import pyspark  # imported lazily: the rest of this module needs only the standard library

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def local_submit_env(base: Mapping[str, str] | None, root: Path) -> dict[str, str]:
    """Return the environment for a local spark-submit: this interpreter, the project root importable."""
    env = dict(os.environ if base is None else base)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env
