"""The officer's console: how fast its pages answer on a node that is serving jobs.

Issue 27 lets the console be served by uvicorn in a thread of the node or by the node's
existing plain HTTP listener (``[node] http_listen``, a ``ThreadingHTTPServer``); ppdm
serves it with uvicorn. Measured here in one run on a 3-party consortium on 127.0.0.1
(``ppdm party serve`` processes): the median time of one console page (``/pending`` with a
job waiting, and ``/node``, which probes every peer) on a fresh connection, against the
same node's ``/healthz`` and ``/metrics`` on its existing listener (the smallest pages a
server in that process can answer: the floor for any page there), and against the
officer's alternative, one ``ppdm job pending`` command. Checks: every answer is 200 and
the pending page shows the waiting job.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Report, Row, parser
from ppdm.console.security import read_token
from ppdm.parties.consortium import write_toml
from ppdm.service.client import pending_jobs, run_job
from ppdm.testbed.consortia import GrpcTestbed, free_ports

POLICY = "version = 1\n[defaults]\nconsent = true\nconsent_timeout_s = 600\n"


def median_ms(url: str, n: int, *, cookies: dict[str, str] | None = None, must: str = "") -> float:
    """Median wall time of ``n`` GETs of ``url``, each on a new connection."""
    times = []
    fresh = httpx.Limits(max_keepalive_connections=0)  # a new TCP connection per request
    with httpx.Client(cookies=cookies, timeout=60.0, limits=fresh) as c:
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.get(url)
            times.append(time.perf_counter() - t0)
            if r.status_code != 200 or (must and must not in r.text):
                raise SystemExit(f"{url}: HTTP {r.status_code}, expected content missing")
    return statistics.median(times) * 1000


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    n = 20 if args.quick else 200
    report = Report(f"officer's console pages ({n} requests each, median, new connection each)")
    with tempfile.TemporaryDirectory() as tmp:
        bed = GrpcTestbed(
            ["alice", "bob", "carol"], Path(tmp) / "bed", timeout=30, policy={"alice": POLICY}
        )
        console_port, ops_port = free_ports(2)
        path = bed.settings_path("alice")
        doc = tomllib.loads(path.read_text())
        doc["console"] = {"listen": f"127.0.0.1:{console_port}"}
        doc.setdefault("node", {})["http_listen"] = f"127.0.0.1:{ops_port}"
        path.write_text(write_toml(doc, header="alice (console benchmark)"))
        with bed:
            job_id = uuid.uuid4().hex
            waiter = threading.Thread(
                target=run_job,
                args=(bed.settings["bob"], "secure-sum"),
                kwargs={"timeout": 30, "deadline": 120, "job_id": job_id},
                daemon=True,
            )
            t0 = time.perf_counter()
            waiter.start()
            console = f"http://127.0.0.1:{console_port}"
            with httpx.Client(base_url=console, timeout=60.0) as c:
                r = c.post("/login", data={"token": read_token(bed.workdir / "state" / "alice")})
                if r.status_code != 303:
                    raise SystemExit(f"login failed: HTTP {r.status_code}")
                cookies = {"ppdm_console": c.cookies["ppdm_console"]}
                while job_id not in c.get("/pending").text:
                    if time.perf_counter() - t0 > 120:
                        raise SystemExit("the held job never appeared on the pending page")
                    time.sleep(0.05)
            seen_s = time.perf_counter() - t0
            pending = median_ms(console + "/pending", n, cookies=cookies, must=job_id)
            node = median_ms(console + "/node", max(n // 4, 5), cookies=cookies, must="reachable")
            ops = f"http://127.0.0.1:{ops_port}"
            healthz = median_ms(ops + "/healthz", n)
            metrics = median_ms(ops + "/metrics", n, must="ppdm_jobs")
            cli = []
            for _ in range(3 if args.quick else 5):
                t = time.perf_counter()
                out = subprocess.run(
                    [sys.executable, "-m", "ppdm", "job", "pending", "--settings", str(path)],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    cwd=bed.workdir,
                )
                cli.append(time.perf_counter() - t)
                if out.returncode != 0 or job_id not in out.stdout:
                    raise SystemExit(f"ppdm job pending: {out.returncode} {out.stderr[-300:]}")
            cli_ms = statistics.median(cli) * 1000
            if not any(j["job_id"] == job_id for j in pending_jobs(bed.settings["alice"])):
                raise SystemExit("the job is no longer pending")
    for name, value, base, base_name in (
        ("console_pending_page_ms", pending, healthz, "ops listener /healthz"),
        ("console_pending_page_vs_metrics_ms", pending, metrics, "ops listener /metrics"),
        ("console_pending_page_vs_cli_ms", pending, cli_ms, "`ppdm job pending` command"),
        ("console_node_page_ms", node, metrics, "ops listener /metrics"),
    ):
        report.add(Row(name, value, "ms", base, base_name, higher_is_better=False, goal="report"))
    report.add(
        Row(
            "held_job_on_pending_page_s", seen_s, "s", goal="within seconds", higher_is_better=False
        )
    )
    report.finish(args.json)


if __name__ == "__main__":
    main()
