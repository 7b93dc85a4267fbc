"""The local Spark session and reading histories into it. Quantiles: ``approx`` is Spark's
``percentile_approx`` with accuracy 100000 (rank error <= n / 100000); ``exact`` (the default) is
Spark's ``percentile`` (linear interpolation, the same definition as numpy / the checkers), several
times slower on millions of rows."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from bench.analysis.aggregate.discovery import StoredRun
from bench.history.store import SCHEMA

APPROX_ACCURACY = 100_000
QUANTILES = (0.5, 0.99, 0.999)


SHIPPED = ("bench", "systems", "workloads")  # the checkout's packages an executor may import


@contextmanager
def spark_session(master: str | None = None, *, driver_memory: str = "2g", shuffle_partitions: int = 4,
                  app_name: str = "reassign-bench-aggregate", conf: dict[str, str] | None = None):
    """A Spark session configured for this machine (no UI; loopback only when the master is local
    or on this machine); always stopped. On a cluster (``spark://``, ``yarn``, ``k8s://``) the
    executors get this checkout's packages (:func:`ship_code`), so they run the driver's
    code, not whatever version their machine has installed. ``conf``: more Spark settings (e.g.
    :data:`SMALL_INPUTS`), applied last."""
    master = master or "local[*]"
    here = master.startswith("local") or on_this_machine(master)
    if here:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master.startswith("local"):
        # Python tasks run in the driver's interpreter (its packages), not the first python3 on PATH
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", driver_memory)
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.adaptive.enabled", "true"))
    if here:
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        try:
            if not master.startswith("local"):
                spark.sparkContext.addPyFile(ship_code(Path(tmp)))
            yield spark
        finally:
            spark.stop()


def on_this_machine(master: str) -> bool:
    """A ``spark://`` master on a loopback address: its executors reach a driver bound to loopback."""
    host = urlsplit(master).hostname or ""
    return master.startswith("spark://") and (host == "localhost" or host.startswith("127."))


def ship_code(tmp: Path) -> str:
    """This checkout's packages (``bench`` and what it imports: ``systems``, ``workloads``) as a zip
    for the executors: the cluster simulations of the projection run there as Python tasks."""
    root = Path(__file__).resolve().parents[3]
    out = tmp / "code.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in SHIPPED:
            for f in sorted((root / pkg).rglob("*.py")):
                if "__pycache__" not in f.parts:
                    z.write(f, f.relative_to(root))
    return str(out)


# For a few small runs (the tests' synthetic and short runs): where the JVM's start and the tasks'
# overhead, not the data, take the time. The results are the same as with any other setting:
# - one partition for a local list (createDataFrame) and after a shuffle: the projection grid's
#   cross joins of small lists no longer multiply into dozens of tiny tasks (its 100,000 points in
#   ~2 s instead of ~10 s on 2 cores); the cluster simulations still run in 4 tasks on 2 cores;
# - the JVM compiles with its quick compiler only (C1): a short-lived JVM spends less CPU
#   compiling code it runs a few times (about a quarter less CPU for a test session's first
#   aggregation); long aggregations of millions of rows want the default.
SMALL_INPUTS = {"spark.default.parallelism": "1", "spark.sql.shuffle.partitions": "1",
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def spark_schema():
    """The history schema (bench.history.store.SCHEMA) as Spark's."""
    from pyspark.sql import types as T

    m = {pa.string(): T.StringType(), pa.float64(): T.DoubleType(), pa.int64(): T.LongType(),
         pa.int32(): T.IntegerType()}
    return T.StructType([T.StructField(f.name, m[f.type], True) for f in SCHEMA])


def read_histories(spark, runs: Sequence[StoredRun]):
    """All histories as one DataFrame with an int ``run_idx`` column (no data leaves Spark)."""
    from pyspark.sql import functions as F

    schema = spark_schema()
    frames = [spark.read.schema(schema).parquet(*[str(f) for f in r.history_files])
              .withColumn("run_idx", F.lit(r.idx).cast("int")) for r in runs]
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    return df


def quantiles(col, mode: str, accuracy: int):
    """The QUANTILES of a column, exact or approximate (module doc)."""
    from pyspark.sql import functions as F

    qs = F.array(*[F.lit(q) for q in QUANTILES])
    if mode == "exact":
        return F.percentile(col, qs)
    return F.percentile_approx(col, qs, accuracy)



def jvm_cpu_s() -> float | None:
    """CPU seconds used so far by this process's children (the local Spark JVM): a figure that
    holds up better than wall time on a shared machine."""
    try:
        import psutil

        return sum(sum(c.cpu_times()[:2]) for c in psutil.Process().children(recursive=True))
    except Exception:  # noqa: BLE001 - diagnostics only
        return None


def cpu_mark(timings: dict[str, float], stage: str) -> None:
    """Record the JVM CPU seconds since the last mark as ``<stage>_jvm_cpu_s``."""
    now = jvm_cpu_s()
    if now is None:
        return
    last = timings.pop("_cpu_last", timings.get("_cpu_start", now))
    timings[f"{stage}_jvm_cpu_s"] = now - last
    timings["_cpu_last"] = now


__all__ = ["APPROX_ACCURACY", "QUANTILES", "SMALL_INPUTS", "cpu_mark", "jvm_cpu_s", "quantiles", "read_histories", "spark_session"]
