"""The ``[compute]`` table of a party's settings and the public form of an engine failure
(issue 28); no Spark needed."""

from __future__ import annotations

import os

import pytest

from ppdm.compute import (
    COMPUTE_FAULT,
    ComputeError,
    EmbeddedEngine,
    close_engines,
    engine_for,
    parse_compute_table,
)
from ppdm.errors import ERROR_CODES, ConfigError, PublicError


def test_no_table_is_the_embedded_engine():
    assert parse_compute_table(None).engine == "embedded"
    assert parse_compute_table({}).engine == "embedded"
    assert isinstance(engine_for({}), EmbeddedEngine)
    assert isinstance(engine_for({"compute": {"engine": "embedded"}}), EmbeddedEngine)


def test_spark_settings_are_checked_and_normalized():
    s = parse_compute_table(
        {
            "engine": "spark",
            "master": " spark://10.0.0.5:7077 ",
            "executor_memory": "4G",
            "driver_memory": "512m",
            "conf": {"spark.b": 2, "spark.a": True},
            "partitions": 16,
        }
    )
    assert s.master == "spark://10.0.0.5:7077"
    assert (s.executor_memory, s.driver_memory) == ("4g", "512m")
    assert s.conf == (("spark.a", "true"), ("spark.b", "2"))
    assert s.partitions == 16


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"engine": "flink"}, "engine must be one of"),
        ({"engine": "spark", "executor_memory": "lots"}, "executor_memory"),
        ({"engine": "spark", "driver_memory": "0g"}, "driver_memory"),
        ({"engine": "spark", "master": ""}, "master"),
        ({"engine": "spark", "conf": ["spark.x"]}, "conf"),
        ({"engine": "spark", "partitions": 0}, "partitions"),
        ({"engine": "spark", "workers": 3}, "unknown key"),
        ({"master": "local[2]"}, 'spark" only'),
        ("spark", "must be a table"),
    ],
)
def test_bad_compute_tables_are_refused(table, message):
    with pytest.raises(ConfigError, match=message):
        parse_compute_table(table)


def test_one_spark_configuration_per_process():
    a = {"compute": {"engine": "spark", "master": "local[1]"}}
    b = {"compute": {"engine": "spark", "master": "local[2]"}}
    try:
        first = engine_for(a)
        assert engine_for(a) is first  # the node's jobs share one engine
        with pytest.raises(ConfigError, match="one Spark driver"):
            engine_for(b)
    finally:
        close_engines()  # no session was started: the engines are lazy
    assert engine_for(b).settings.master == "local[2]"
    close_engines()


def test_an_engine_failure_is_a_public_fault_class_without_its_message():
    exc = ComputeError("executor lost while counting items {'secret-item'}")
    public = PublicError.of(exc, "alice")
    assert public.code == COMPUTE_FAULT == "compute-failed"
    assert COMPUTE_FAULT in ERROR_CODES
    assert public.party == "alice"
    assert "secret-item" not in public.text()


def test_a_spark_catalog_table_entry_is_checked_and_needs_no_local_file(tmp_path):
    """``kind = "spark-table"``: a table name (``name``, ``db.name``,
    ``catalog.db.name``), nothing else; the node's pre-job check passes without a
    file (the table lives in the Spark catalog), its audit version is the table name,
    and the embedded engine refuses to read it with one line."""
    from ppdm.sources import check_source, open_spec, parse_data_entry, source_version

    spec = parse_data_entry(
        "lake", {"kind": "spark-table", "table": "sales.baskets"}, base_dir=tmp_path
    )
    assert (spec.kind, spec.table, spec.path) == ("spark-table", "sales.baskets", None)
    assert spec.describe() == "data 'lake' (spark-table sales.baskets)"
    for bad in ("sales.baskets; drop", "a.b.c.d", "", "sales..baskets", 7):
        with pytest.raises(ConfigError, match="table"):
            parse_data_entry("lake", {"kind": "spark-table", "table": bad}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match="unknown key"):
        parse_data_entry(
            "lake", {"kind": "spark-table", "table": "t", "path": "x"}, base_dir=tmp_path
        )
    data = {"lake": {"kind": "spark-table", "table": "sales.baskets"}}
    check_source(data, "lake", base_dir=tmp_path, party="alice")
    one = source_version(data, "lake", base_dir=tmp_path, party="alice")
    other = source_version(
        {"lake": {"kind": "spark-table", "table": "sales.other"}},
        "lake",
        base_dir=tmp_path,
        party="alice",
    )
    assert one != other
    with pytest.raises(ConfigError) as info:
        open_spec(spec)
    assert str(info.value).count("\n") == 0 and 'engine = "spark" only' in str(info.value)
    with pytest.raises(ConfigError, match='engine = "spark" only'):
        EmbeddedEngine().local_counter(spec)


def test_a_spark_table_header_is_read_by_the_party_engine(tmp_path, monkeypatch):
    """The node's pre-job column check (k-means' ``columns``) reads a ``spark-table``
    entry's columns through the party's engine, which alone can read it; a file entry
    still reads its own header."""
    from ppdm.jobs import mining_data
    from ppdm.jobs.registry import PartyContext
    from ppdm.service.profiles import _read_header

    asked = []

    class FakeEngine:
        def column_names(self, spec, *, sep=","):
            asked.append(spec.table)
            return [" age", "income "]

    monkeypatch.setattr(mining_data, "party_engine", lambda ctx: FakeEngine())
    settings = {"data": {"records": {"kind": "spark-table", "table": "lake.people"}}}
    ctx = PartyContext(name="bob", settings=settings, base_dir=tmp_path)
    assert _read_header(ctx, "records", ",") == ["age", "income"]
    assert asked == ["lake.people"]
    (tmp_path / "r.csv").write_text("x,y\n1,2\n")
    ctx = PartyContext(name="bob", settings={"data": {"records": "r.csv"}}, base_dir=tmp_path)
    assert _read_header(ctx, "records", ",") == ["x", "y"]
    assert asked == ["lake.people"]


def test_the_spark_gateway_start_runs_no_python_between_fork_and_exec():
    """pyspark's ``preexec_fn`` (ignore SIGINT in the JVM) runs Python in the forked child
    of a threaded gRPC node; the engine's launcher drops it and gets the same effect from
    ``/bin/sh``: the child ignores SIGINT and stays in the caller's process group."""
    import signal
    import subprocess
    import sys

    from ppdm.compute.spark import _popen_without_preexec

    seen: list[tuple[list[str], dict]] = []

    def recording_popen(command, **kwargs):
        seen.append((list(command), dict(kwargs)))
        return subprocess.Popen(command, **kwargs)

    probe = (
        "import os, signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, os.getpgrp())"
    )
    proc = _popen_without_preexec(recording_popen)(
        [sys.executable, "-c", probe],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=120)
    assert "preexec_fn" not in seen[0][1]
    assert seen[0][0][:2] == ["/bin/sh", "-c"]
    ignored, group = out.split()
    assert ignored == "True"
    assert int(group) == os.getpgrp()
    # without a preexec_fn the command is passed through unchanged
    seen.clear()
    _popen_without_preexec(recording_popen)([sys.executable, "-c", "pass"]).wait(120)
    assert seen[0][0] == [sys.executable, "-c", "pass"]
