"""The four questions asked of all runs, each a DataFrame -> DataFrame.

* ``matrix``: per case x target x client, the latest verdict (and which run), its verdicts over
  all runs oldest first (``history``), and what the compatibility page needs to say how the
  latest row diverges (its checks, diff, reason, documented difference).
* ``divergences``: rows whose outcome differed from the reference target's
  in the same run (``diff`` non-null), per case x target x client, with
  the differing paths and first/last seen; ``current`` when the latest run
  still diverges.
* ``flaky``: a verdict that changed across runs with the SAME target and
  client versions — a changed version is a change, not flakiness.
* ``durations``: p50/p90/p99 of ``duration_s`` per target (and per
  target x client).
* ``release_changes``: Kafka against itself -- per case x client, the latest verdict on each
  Apache Kafka release, and every place where it differs from the previous release's (a
  regression detector for Kafka: pass -> fail is a release that broke the case, fail -> pass
  one that fixed it; reports/history.py draws the same rows as a page).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from conformance.results import Verdict

KEY = ["case", "target", "client"]


def _diverges():
    """``diff`` holds at least one difference (null and [] mean none)."""
    return F.coalesce(F.size("diff") > 0, F.lit(False))


def matrix(rows: DataFrame) -> DataFrame:
    w = Window.partitionBy(*KEY).orderBy(F.col("ts").desc(), F.col("run_id").desc())
    # Every verdict of the cell, oldest first: sort (ts, run_id, verdict) structs, keep verdicts.
    history = (rows.groupBy(*KEY)
               .agg(F.count("*").alias("runs"),
                    F.array_join(F.transform(F.array_sort(F.collect_list(F.struct("ts", "run_id", "verdict"))),
                                             lambda s: s["verdict"]), " ").alias("history")))
    return (rows.withColumn("_n", F.row_number().over(w)).where("_n = 1")
            .select(*KEY, "verdict", "target_version", "client_version", "run_id",
                    F.col("ts").alias("last_run_at"), _diverges().alias("diverges"),
                    "reason", "case_title", "reference_target", "known_difference", "checks", "diff")
            .join(history, KEY)
            .orderBy(*KEY))


def divergences(rows: DataFrame) -> DataFrame:
    latest = matrix(rows).select(*KEY, F.col("run_id").alias("_latest_run"))
    d = (rows.where(_diverges())
         .select(*KEY, "reference_target", "run_id", "ts", F.explode("diff").alias("d")))
    agg = (d.groupBy(*KEY, "reference_target")
           .agg(F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen"),
                F.countDistinct("run_id").alias("runs"),
                F.array_join(F.array_sort(F.collect_set("d.path")), " ").alias("paths"),
                F.max_by("run_id", "ts").alias("last_run_id")))
    return (agg.join(latest, KEY, "left")
            .withColumn("current", F.col("last_run_id") == F.col("_latest_run")).drop("_latest_run")
            .orderBy(*KEY))


def flaky(rows: DataFrame) -> DataFrame:
    versions = KEY + ["target_version", "client_version"]
    w = Window.partitionBy(*versions).orderBy("ts", "run_id")
    changes = rows.withColumn("_changed", (F.lag("verdict").over(w) != F.col("verdict")).cast("int"))
    per_verdict = (rows.groupBy(*versions, "verdict").count()
                   .groupBy(*versions)
                   .agg(F.array_join(F.array_sort(F.collect_list(F.concat_ws(":", "verdict", F.col("count")
                                                                                .cast("string")))), " ")
                        .alias("verdicts")))
    return (changes.groupBy(*versions)
            .agg(F.countDistinct("run_id").alias("runs"), F.countDistinct("verdict").alias("_distinct"),
                 F.sum(F.coalesce("_changed", F.lit(0))).alias("changes"),
                 F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen"),
                 F.max_by("verdict", "ts").alias("latest_verdict"))
            .where("_distinct > 1").drop("_distinct")
            .join(per_verdict, versions)
            .orderBy(F.col("changes").desc(), *KEY))


def _percentiles(rows: DataFrame, by: list[str]) -> DataFrame:
    p = F.percentile("duration_s", F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99)))
    return (rows.where(F.col("duration_s").isNotNull()).groupBy(*by)
            .agg(F.count("*").alias("rows"), p.alias("_p"), F.avg("duration_s").alias("mean_s"),
                 F.max("duration_s").alias("max_s"))
            .select(*by, "rows", F.col("_p")[0].alias("p50_s"), F.col("_p")[1].alias("p90_s"),
                    F.col("_p")[2].alias("p99_s"), "mean_s", "max_s")
            .orderBy(*by))


def durations(rows: DataFrame) -> DataFrame:
    return _percentiles(rows, ["target"])


def durations_by_client(rows: DataFrame) -> DataFrame:
    return _percentiles(rows, ["target", "client"])


def per_run(rows: DataFrame) -> DataFrame:
    """Per run and target: when, how many rows, passes and divergences (the trend charts)."""
    return (rows.groupBy("run_id", "target")
            .agg(F.min("ts").alias("run_at"), F.count("*").alias("rows"),
                 F.sum((F.col("verdict") == Verdict.PASS.value).cast("int")).alias("passed"),
                 F.sum(_diverges().cast("int")).alias("diverging"))
            .orderBy("run_at", "target"))


def _release():
    """The Kafka release an apache-kafka row ran: the target's `@VERSION`, else the version the
    run recorded (the default target); null for every other target, and for a row whose version
    is not known -- a target that never started records "unknown", which names no release and
    has no numbers to order by (casting them failed the whole analysis)."""
    at = F.regexp_extract("target", r"^apache-kafka@(.+)$", 1)
    version = F.col("target_version")
    return (F.when(at != "", at)
            .when((F.col("target") == "apache-kafka") & version.rlike(r"^[0-9]"), version))


def _release_order():
    """Sort key of a release label: its numbers as an int array ("3.5.2-zk" -> [3, 5, 2]; Spark
    orders arrays element by element), a `-zk` variant right after its release."""
    nums = F.transform(F.split(F.regexp_extract("release", r"^[0-9]+(\.[0-9]+)*", 0), r"\."),
                       lambda x: x.cast("int"))
    return F.struct(nums.alias("nums"), F.col("release").endswith("-zk").alias("zk"))


def release_changes(rows: DataFrame) -> DataFrame:
    """Per case x client, the releases where the verdict differs from the previous release's
    (``change``: ``regressed`` for pass -> fail/crash, ``fixed`` for fail/crash -> pass, else
    ``changed``: an n/a or error on one side says a feature or a start, not a bug)."""
    kafka = rows.withColumn("release", _release()).where(F.col("release").isNotNull())
    latest = Window.partitionBy("case", "client", "release").orderBy(F.col("ts").desc(), F.col("run_id").desc())
    cells = (kafka.withColumn("_n", F.row_number().over(latest)).where("_n = 1")
             .select("case", "client", "release", "verdict", "run_id", _release_order().alias("_order")))
    by_release = Window.partitionBy("case", "client").orderBy("_order")
    bad = F.col("verdict").isin(Verdict.FAIL.value, Verdict.CRASH.value)
    was_bad = F.col("from_verdict").isin(Verdict.FAIL.value, Verdict.CRASH.value)
    return (cells.withColumn("from_release", F.lag("release").over(by_release))
            .withColumn("from_verdict", F.lag("verdict").over(by_release))
            .where(F.col("from_verdict").isNotNull() & (F.col("from_verdict") != F.col("verdict")))
            .withColumn("change", F.when((F.col("from_verdict") == Verdict.PASS.value) & bad, "regressed")
                        .when(was_bad & (F.col("verdict") == Verdict.PASS.value), "fixed")
                        .otherwise("changed"))
            .select("case", "client", "from_release", "from_verdict", F.col("release").alias("to_release"),
                    F.col("verdict").alias("to_verdict"), "change", "run_id", "_order")
            .orderBy("case", "client", "_order").drop("_order"))
