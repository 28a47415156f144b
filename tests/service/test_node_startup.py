"""Issue 25 item 5: a node serving soon after its start, paying only for what it uses.

A serving node has not imported numpy (the codec's, with a job's first message), the
Prometheus client (the metrics' collectors, at their first use), the worker pools or any
job module. The job registry imports a job's module when a job of that kind is run or
described (``get_job``), not every job module at once; listing the jobs (``job_names``)
still imports them all; ``secure-sum``'s parameters are checked (``ppdm job run``)
without numpy. The table that says which module registers which job is checked here
against what each module really registers, in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from ppdm.errors import ConfigError
from ppdm.jobs.registry import BUILTIN_JOBS, get_job, job_names
from ppdm.parties.consortium import init_consortium
from ppdm.service.metrics import NodeMetrics
from ppdm.testbed.consortia import free_ports

#: Run in a fresh interpreter: which job modules ``get_job("secure-sum")`` imports, then
#: every module's registrations (the caller of ``register_job``) and ``job_names()``.
_PROBE = """
import json, sys
import ppdm.jobs.registry as registry

registered = {}
plain = registry.register_job

def recording(spec):
    registered[spec.name] = sys._getframe(1).f_globals["__name__"]
    return plain(spec)

registry.register_job = recording
registry.get_job("secure-sum").params({"modulus": 7})
after_one = sorted(m for m in sys.modules if m.startswith("ppdm.jobs."))
numpy_after_one = "numpy" in sys.modules
names = registry.job_names()
print(json.dumps({"after_one": after_one, "numpy_after_one": numpy_after_one,
                  "registered": registered, "names": names}))
"""


def _probe() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_registry_imports_one_job_module_and_still_lists_every_job():
    seen = _probe()
    # get_job imported the registry and the one module of the job, nothing else
    assert seen["after_one"] == ["ppdm.jobs.registry", "ppdm.jobs.secure_sum"]
    # its parameters are checked (``ppdm job run``) without numpy, which the run imports
    assert seen["numpy_after_one"] is False
    # every job a module registers is in the table under that module, and nothing else is
    expected = {name: f"ppdm.jobs.{module}" for name, module in BUILTIN_JOBS.items()}
    assert seen["registered"] == expected
    assert seen["names"] == sorted(BUILTIN_JOBS)


def test_an_unknown_job_is_refused_naming_every_known_job():
    with pytest.raises(ConfigError) as info:
        get_job("no-such-job")
    assert all(name in str(info.value) for name in BUILTIN_JOBS)
    assert set(BUILTIN_JOBS) <= set(job_names())


#: A node started and stopped in a fresh interpreter: the modules it had at "serving".
_SERVE = """
import json, sys
from ppdm.parties.consortium import load_settings
from ppdm.service.node import PartyNode

node = PartyNode(load_settings(sys.argv[1]))
port = node.start()
loaded = sorted(sys.modules)
serving = node.not_ready() is None
node.stop(0.1)
print(json.dumps({"port": port, "serving": serving, "modules": loaded}))
"""

#: What a node does not need until a job runs (or its metrics are read).
NOT_AT_START = ("numpy", "prometheus_client", "multiprocessing", "pandas", "http.server")


def test_a_serving_node_has_not_imported_what_only_jobs_need(tmp_path):
    init_consortium(tmp_path, ["alice", "bob"], ports=free_ports(2))
    proc = subprocess.run(
        [sys.executable, "-c", _SERVE, str(tmp_path / "alice.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["port"] > 0 and seen["serving"]
    loaded = set(seen["modules"])
    assert "grpc" in loaded and "ppdm.service.node" in loaded  # the probe saw the node
    assert not [m for m in NOT_AT_START if m in loaded]
    assert not [m for m in loaded if m.startswith("ppdm.jobs.") and m != "ppdm.jobs.registry"]


def test_node_metrics_are_made_at_first_use_and_count_everything():
    metrics = NodeMetrics("alice", version="9.9")
    assert "registry" not in vars(metrics)  # nothing made yet
    with pytest.raises(AttributeError):
        metrics.no_such_collector  # noqa: B018
    # concurrent first uses make the collectors once, and no count is lost
    threads = [threading.Thread(target=metrics.received, args=("bob", 10)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    metrics.job("secure-sum", "proposed")
    text = metrics.render().decode()
    assert 'ppdm_peer_bytes_total{direction="received",peer="bob"} 80.0' in text
    assert 'ppdm_peer_messages_total{direction="received",peer="bob"} 8.0' in text
    assert 'ppdm_jobs_total{job="secure-sum",outcome="proposed"} 1.0' in text
    assert 'ppdm_node_info{party="alice",version="9.9"} 1.0' in text
