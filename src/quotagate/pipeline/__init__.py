"""The PySpark quota data pipeline: generate, ingest, rollup, replay, recommend, report.

Nothing here imports pyspark at module import time except the Spark job modules
themselves, so ``quotagate --help`` and the pure parsers stay fast.
"""
