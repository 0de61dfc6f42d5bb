"""A small local Spark session: the machine has 2 cores and other work running.

No UI, loopback only, few shuffle partitions (the data is tens of
thousands of rows, not millions), a small driver heap, UTC timestamps.
Everything here is built-in SQL: no Python UDFs, so no Python workers.
"""

from __future__ import annotations

import os


def spark_session(master: str = "local[*]", driver_memory: str = "768m"):
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise RuntimeError("analytics needs PySpark: pip install 'kconform[analytics]' (and Java 17)") from exc
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master(master).appName("kconform-analytics")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.default.parallelism", "2")
             .config("spark.driver.memory", driver_memory)
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.files.maxPartitionBytes", str(32 * 1024 * 1024))
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark
