"""The example pipelines' PySpark jobs; each module with a ``main()`` is a spark-submit entry point."""
