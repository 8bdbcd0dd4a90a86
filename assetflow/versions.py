"""The EMR Serverless release that the stack targets and the Spark version the local runtime pins to match."""

from __future__ import annotations

#: EMR Serverless release label used by the CDK app (and the Spark version below runs locally).
EMR_RELEASE_LABEL = "emr-7.9.0"
#: The Spark version of that release; requirements-spark.txt pins pyspark to it.
SPARK_VERSION = "3.5.5"
#: The Python version EMR 7.x runs job code on.
EMR_PYTHON_VERSION = "3.9"
