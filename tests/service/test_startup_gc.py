"""Issue 25, item 5: ``ppdm party serve`` starts without the cyclic garbage collector.

What a node's start allocates (modules, classes, settings) lives as long as the node, so
the start runs with collection off; once the node serves, what it made is frozen and
collection is back on. A start that fails gives collection back too (an in-process
``main`` must not leave its caller without it).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from ppdm.cli.main import main
from ppdm.parties.consortium import init_consortium
from ppdm.testbed.consortia import free_ports, kill_tied, spawn_tied

#: The serve command; at the "serving" record a thread waits for the start to finish and
#: prints the collector's state as one JSON line (the node serves until killed).
_SERVE = """
import gc, json, logging, sys, threading, time

def report(during):
    deadline = time.monotonic() + 30
    while not gc.isenabled() and time.monotonic() < deadline:
        time.sleep(0.01)
    state = {"during": during, "after": gc.isenabled(), "frozen": gc.get_freeze_count()}
    print(json.dumps(state), flush=True)

class AtServing(logging.Handler):
    def emit(self, record):
        if "serving on" in record.getMessage():
            threading.Thread(target=report, args=(gc.isenabled(),), daemon=True).start()

logging.getLogger("ppdm").addHandler(AtServing())
from ppdm.cli.main import main
sys.exit(main(["party", "serve", sys.argv[1]]))
"""


def test_a_node_starts_without_collection_and_serves_with_it(tmp_path) -> None:
    init_consortium(tmp_path, ["alice", "bob"], ports=free_ports(2))
    proc = spawn_tied(
        [sys.executable, "-c", _SERVE, str(tmp_path / "alice.toml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()  # bounded by pytest's timeout
    finally:
        kill_tied(proc)
    assert line, proc.stderr.read()  # the node did not serve: its error
    state = json.loads(line)
    assert state["during"] is False  # off while the node starts
    assert state["after"] is True  # back on once it serves
    assert state["frozen"] > 10_000  # the start's objects, never scanned again


def test_a_failed_start_gives_collection_back(tmp_path, capsys) -> None:
    assert gc.isenabled()
    assert main(["party", "serve", str(tmp_path / "missing.toml")]) == 2
    assert "file not found" in capsys.readouterr().err
    assert gc.isenabled()
