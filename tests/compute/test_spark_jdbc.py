"""The Spark engine reading a PostgreSQL table through JDBC (issue 28).

The PostgreSQL server is the PostgreSQL tier's (``tests/sources/test_postgres.py``'s
``postgres`` fixture: its own server on 127.0.0.1, a read-only role with a password). The
JDBC driver jar comes from the project's set-up: ``.ci/run`` installs Debian's
``libpostgresql-jdbc-java`` (``/usr/share/java/postgresql.jar``); a jar in the local
Maven repository or named by ``PPDM_POSTGRES_JDBC_JAR`` also does. Without a jar (or
without Java and pyspark) the tier is not run: a skip, a failure under ``CI=true``.

A table entry and a query entry read by Spark give the embedded engine's counts (psycopg,
same database); the candidates' item filter is pushed into the JDBC scan; the password
is in no plan Spark shows.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from ppdm.compute import EmbeddedEngine
from ppdm.mining.itemsets import support_counts
from ppdm.sources import parse_data_entry

# A PostgreSQL server process, on 127.0.0.1; the Spark session is the tier's shared one
# (tests/compute/conftest.py), with the engine module's: one JVM, on one xdist worker.
pytestmark = [pytest.mark.grpc, pytest.mark.xdist_group("spark")]

_PG_TESTS = Path(__file__).parents[1] / "sources" / "test_postgres.py"
_spec = importlib.util.spec_from_file_location("_ppdm_postgres_tier", _PG_TESTS)
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)
postgres = _pg.postgres  # the PostgreSQL tier's server fixture
READER_PASSWORD = _pg.READER_PASSWORD
TIER = "Spark JDBC"
PW_ENV = "PPDM_TEST_SPARK_JDBC_PW"


@pytest.fixture(scope="module")
def jdbc(postgres, spark_engine, tier_unavailable):
    """``(engine, url)``: the shared Spark engine, with the JDBC driver on its class path,
    and a ``shop.baskets`` table of 400 transactions (ints) readable by the reader role."""
    import psycopg

    if "spark.jars" not in dict(spark_engine.settings.conf):
        tier_unavailable(
            TIER,
            "no PostgreSQL JDBC driver jar (apt-get install libpostgresql-jdbc-java, as "
            ".ci/run does, or set PPDM_POSTGRES_JDBC_JAR)",
        )
    port, admin = postgres
    rng = np.random.default_rng(17)
    rows = []
    for t in range(400):
        k = int(rng.integers(0, 6))
        if k == 0:
            rows.append((t, None))  # a NULL item: a transaction without items
        for x in rng.choice(12, size=k, replace=False):
            rows.append((t, int(x)))
    order = rng.permutation(len(rows))
    with psycopg.connect(dbname="shop", autocommit=True, **admin) as con:
        con.execute("CREATE TABLE spark_baskets (tid bigint NOT NULL, item integer)")
        with con.cursor() as cur, cur.copy("COPY spark_baskets (tid, item) FROM STDIN") as cp:
            for j in order:
                cp.write_row(rows[j])
        con.execute("GRANT CONNECT ON DATABASE shop TO ppdm_reader")
        con.execute("GRANT USAGE ON SCHEMA public TO ppdm_reader")
        con.execute("GRANT SELECT (tid, item) ON spark_baskets TO ppdm_reader")
    old = os.environ.get(PW_ENV)
    os.environ[PW_ENV] = READER_PASSWORD
    try:
        yield spark_engine, f"postgresql://ppdm_reader@127.0.0.1:{port}/shop"
    finally:
        if old is None:
            os.environ.pop(PW_ENV, None)
        else:
            os.environ[PW_ENV] = old


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "where",
    [{"table": "public.spark_baskets"}, {"query": "SELECT tid, item FROM spark_baskets"}],
    ids=["table", "query"],
)
def test_a_postgresql_table_read_through_jdbc_counts_like_the_embedded_engine(
    jdbc, tmp_path, where
):
    engine, url = jdbc
    spec = parse_data_entry(
        "tx", {"kind": "sql", "url": url, "password_env": PW_ENV, **where}, base_dir=tmp_path
    )
    db = EmbeddedEngine().transactions(spec)  # psycopg on the same database
    assert db.n_transactions == 400
    counter = engine.local_counter(spec)
    assert counter.n_transactions == db.n_transactions
    assert counter.items.tolist() == db.items.tolist()
    assert counter.item_counts().tolist() == db.item_counts().tolist()
    labels = db.items.tolist()
    pairs = [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :]]
    triples = [tuple(labels[i : i + 3]) for i in range(len(labels) - 2)]
    assert counter.count(pairs).tolist() == support_counts(db, pairs).tolist()
    assert counter.count(triples).tolist() == support_counts(db, triples).tolist()
    whole = engine.transactions(spec)
    assert whole.indptr.tolist() == db.indptr.tolist()
    assert whole.indices.tolist() == db.indices.tolist()
    plan = counter.candidate_rows([3, 5])._jdf.queryExecution()
    scan = plan.executedPlan().toString()
    assert "PushedFilters" in scan and "In(item, [3,5])" in scan, scan
    assert READER_PASSWORD not in scan
    assert READER_PASSWORD not in plan.toString()
