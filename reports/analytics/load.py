"""Every run under a root as one DataFrame of results rows.

One file per run (``results.jsonl``, or ``results.parquet`` when a run was
stored that way) — never one file per test: Spark's cost is per file.
The JSON schema is given, not inferred (inference reads everything twice);
``outcome`` and ``artifacts`` stay raw JSON text, which is what comparing
outcomes between targets and runs needs.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..matrix import client_column

CHECK = T.StructType([T.StructField("name", T.StringType()), T.StructField("passed", T.BooleanType()),
                      T.StructField("message", T.StringType())])
DIFF = T.StructType([T.StructField("path", T.StringType()), T.StructField("reference", T.StringType()),
                     T.StructField("actual", T.StringType())])
SCHEMA = T.StructType([
    T.StructField("run_id", T.StringType()),
    T.StructField("started_at", T.StringType()),
    T.StructField("case", T.StringType()),
    T.StructField("case_title", T.StringType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("target", T.StringType()),
    T.StructField("target_version", T.StringType()),
    T.StructField("client", T.StringType()),
    T.StructField("client_version", T.StringType()),
    T.StructField("verdict", T.StringType()),
    T.StructField("checks", T.ArrayType(CHECK)),
    T.StructField("outcome", T.StringType()),
    T.StructField("diff", T.ArrayType(DIFF)),
    T.StructField("reference_target", T.StringType()),
    T.StructField("duration_s", T.DoubleType()),
    T.StructField("reason", T.StringType()),
    T.StructField("artifacts", T.StringType()),
    T.StructField("known_difference", T.StringType()),
    T.StructField("status", T.StringType()),
    T.StructField("security_protocol", T.StringType()),
    T.StructField("group_protocol", T.StringType()),
])


def run_files(root: str | Path | list) -> tuple[list[str], list[str]]:
    """(results.jsonl files, results.parquet paths) of the runs under ``root`` (or under each of
    several roots: the shards of one run, kept by N CI machines, are read as they are)."""
    roots = [Path(r) for r in (root if isinstance(root, (list, tuple)) else [root])]
    return (sorted({str(p) for r in roots for p in r.rglob("results.jsonl")}),
            sorted({str(p) for r in roots for p in r.rglob("results.parquet")}))


def _conform(df: DataFrame) -> DataFrame:
    """A Parquet run's columns in the JSON schema's shape (complex values as JSON text)."""
    cols = []
    for f in SCHEMA.fields:
        if f.name not in df.columns:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
            continue
        src = df.schema[f.name].dataType
        c = F.col(f"`{f.name}`")
        if isinstance(f.dataType, T.StringType) and isinstance(src, (T.StructType, T.MapType, T.ArrayType)):
            c = F.to_json(c)
        cols.append(c.cast(f.dataType).alias(f.name))
    return df.select(*cols)


def load_runs(spark: SparkSession, root: str | Path | list) -> DataFrame:
    """All rows of all runs under ``root`` with ``ts`` (the row's start as a timestamp)."""
    jsonl, parquet = run_files(root)
    if not jsonl and not parquet:
        raise FileNotFoundError(f"no results.jsonl or results.parquet under {root}")
    frames = []
    if jsonl:
        frames.append(spark.read.schema(SCHEMA).option("mode", "FAILFAST").json(jsonl))
    if parquet:
        frames.append(_conform(spark.read.parquet(*parquet)))
    df = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    # A consumer-protocol or secured run's rows are cells of their own, named as the
    # compatibility page names its columns (reports/matrix.py client_column).
    tagged = F.udf(client_column, T.StringType())
    df = df.withColumn("client", tagged("client", "group_protocol", "security_protocol"))
    return df.withColumn("ts", F.to_timestamp("started_at"))
