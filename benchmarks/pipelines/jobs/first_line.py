"""A tiny PySpark job for the latency benchmark: it records when its first line ran, then counts one row."""

import time

# The job's first line of user code: its time (wall clock, this machine) is what the benchmark reads back.
FIRST_LINE_AT = time.time()

import sys  # noqa: E402 - after the clock on purpose

from assetflow_job import run  # noqa: E402
from spark_jobs.common import spark_session  # noqa: E402

#: The marker the latency benchmark looks for in the job's log.
MARKER = "assetflow-bench first-line-at"


def main() -> None:
    """Print the first line's time, read the run context, count one row with Spark."""
    print(f"{MARKER} {FIRST_LINE_AT:.6f}", flush=True)
    with run(sys.argv[1:]) as ctx, spark_session("assetflow-bench-first-line") as spark:
        print(f"assetflow-bench run {ctx.run_id} counted {spark.range(1).count()}", flush=True)


if __name__ == "__main__":
    main()
