"""The EMR Serverless release that the stack targets and the Spark version the local runtime pins to match."""

from __future__ import annotations

# Sources (AWS documentation, checked 2026-11-21): the EMR Serverless User Guide's "release versions"
# page (EMR-Serverless-UserGuide/release-versions) lists emr-7.12.0 as its newest 7.x release (emr-7.13.0
# exists for EMR on EC2 but was not listed for Serverless); the EMR Release Guide's "Spark release
# history" (ReleaseGuide/Spark-release-history) gives emr-7.12.0 Spark 3.5.6-amzn-1. PyPI has pyspark
# 3.5.6, so requirements-spark.txt pins exactly that.

#: EMR Serverless release label used by the CDK app (and the Spark version below runs locally).
EMR_RELEASE_LABEL = "emr-7.12.0"
#: The Spark version of that release; requirements-spark.txt pins pyspark to it.
SPARK_VERSION = "3.5.6"
#: The Python version EMR 7.x runs job code on.
EMR_PYTHON_VERSION = "3.9"
