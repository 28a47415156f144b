"""The Spark tier's one in-process Spark session, shared by the engine and JDBC modules.

A local session costs most of its CPU in starting the JVM and compiling Spark's code
(docs/scale.md, "Short local sessions"), so ``test_spark_engine.py`` and
``test_spark_jdbc.py`` share one (both modules are in the xdist group ``"spark"``, so
they run on one worker). The PostgreSQL JDBC driver jar is on its class path when the
project's set-up provides one; the JDBC module checks that it is.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import pytest

#: JVM options of a short local session (docs/scale.md, "Short local sessions").
SHORT_SESSION_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def postgres_jdbc_jar() -> Path | None:
    """The PostgreSQL JDBC driver jar the project's set-up provides, if any: the one
    ``PPDM_POSTGRES_JDBC_JAR`` names, Debian's ``libpostgresql-jdbc-java`` (which
    ``.ci/run`` installs), or one in the local Maven repository."""
    named = os.environ.get("PPDM_POSTGRES_JDBC_JAR")
    candidates = [named] if named else []
    candidates += ["/usr/share/java/postgresql.jar"]
    candidates += sorted(
        glob.glob(
            os.path.expanduser("~/.m2/repository/org/postgresql/postgresql/*/postgresql-*.jar")
        )
    )[::-1]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    return None


@pytest.fixture(scope="session")
def spark_engine(tier_unavailable, tmp_path_factory):
    """A :class:`~ppdm.compute.spark.SparkEngine` on ``local[2]`` (a short session; the
    JDBC driver jar on its class path when there is one; catalog tables in a temporary
    warehouse). Before it starts, an engine on a master that does not exist must fail
    as ``compute-failed`` (it could not while a session of this process is up:
    ``getOrCreate`` would hand that one back)."""
    try:
        from ppdm.compute.spark import SparkEngine
    except ImportError:
        tier_unavailable("spark", 'pyspark is not installed (pip install -e ".[spark]")')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        tier_unavailable("spark", "no Java runtime (apt-get install default-jre-headless)")
    from ppdm.compute import ComputeError, parse_compute_table
    from ppdm.errors import PublicError

    # (its JVM, started twice by the engine's retry, with a short session's options:
    # spark-submit refuses the master either way, on two fifths less CPU)
    bad = SparkEngine(
        parse_compute_table(
            {
                "engine": "spark",
                "master": "no-such-master://x",
                "conf": {"spark.driver.extraJavaOptions": SHORT_SESSION_JAVA_OPTIONS},
            }
        )
    )
    with pytest.raises(ComputeError) as info:
        bad.session()
    assert PublicError.of(info.value, "alice").code == "compute-failed"
    conf = {
        "spark.sql.shuffle.partitions": 2,
        # a short session: the C1 JIT only and the serial GC start the JVM on a third
        # less CPU (docs/scale.md); results do not change
        "spark.driver.extraJavaOptions": SHORT_SESSION_JAVA_OPTIONS,
        # catalog tables of the tests go to a temporary warehouse
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
    }
    jar = postgres_jdbc_jar()
    if jar is not None:
        conf["spark.jars"] = str(jar)
    engine = SparkEngine(
        parse_compute_table({"engine": "spark", "master": "local[2]", "conf": conf})
    )
    yield engine
    engine.close()
