"""Operations endpoints of a node: Prometheus metrics and plain HTTP health probes.

A node always counts what an operations team watches (:class:`NodeMetrics`, in a
registry of its own, so several nodes in one process never mix); with ``http_listen`` in
the ``[node]`` table of its settings it also serves, without TLS and without any client
certificate (bind it to an internal address):

- ``GET /healthz``: 200 while the process serves gRPC (liveness);
- ``GET /readyz``: 200 when the node accepts jobs (serving, not stopping, its own
  certificate valid), else 503 with the reason (readiness);
- ``GET /metrics``: Prometheus text format.

What the metrics hold is public to the consortium already or operational only: job names
and outcomes, bytes and messages per peer, durations, which peers answer. No value, label
or set size of any party's data appears in them (tests check the page for the inputs).

The standard ``grpc.health.v1.Health`` service runs on the node's own gRPC port as well
(mutual TLS, like every call there), with the overall status and ``ppdm.v1.Party``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Buckets of the job-duration histogram (seconds): quick sums to long mining jobs.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)


#: The attributes of :class:`NodeMetrics` that are Prometheus objects, made at first use.
_COLLECTORS = frozenset(
    {
        "registry",
        "jobs",
        "duration",
        "peer_bytes",
        "peer_messages",
        "peer_up",
        "running",
        "streams",
        "info",
    }
)


class NodeMetrics:
    """Counters, gauges and histograms of one node (see the module docstring).

    ``prometheus_client`` is imported, and the collectors made, when one is first used (a
    node's first job or scrape), not when the node starts; ``version`` labels
    ``ppdm_node_info``."""

    def __init__(self, party: str, *, version: str | None = None) -> None:
        self.party = party
        self.version = version
        self._build_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        # only for attributes not set yet: the collectors before their first use
        if name not in _COLLECTORS:
            raise AttributeError(name)
        with self._build_lock:  # concurrent first uses build them once
            if "registry" not in self.__dict__:
                self._build()
        return self.__dict__[name]

    def _build(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        r = CollectorRegistry(auto_describe=True)
        self.jobs = Counter(
            "ppdm_jobs",
            "Jobs at this node by job name and outcome "
            "(proposed, refused, pending, started, succeeded, failed, cancelled)",
            ["job", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "ppdm_job_duration_seconds",
            "Wall time of finished jobs at this node",
            ["job", "state"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.peer_bytes = Counter(
            "ppdm_peer_bytes",
            "Protocol bytes exchanged with each peer (envelopes)",
            ["peer", "direction"],
            registry=r,
        )
        self.peer_messages = Counter(
            "ppdm_peer_messages",
            "Protocol messages (envelopes) exchanged with each peer",
            ["peer", "direction"],
            registry=r,
        )
        self.peer_up = Gauge(
            "ppdm_peer_up",
            "1 if the peer's node answered this node's last health probe, else 0",
            ["peer"],
            registry=r,
        )
        self.running = Gauge("ppdm_running_jobs", "Jobs running at this node", registry=r)
        self.streams = Gauge(
            "ppdm_incoming_streams", "Incoming Exchange streams open at this node", registry=r
        )
        self.info = Gauge(
            "ppdm_node_info",
            "Constant 1, labelled with the node's party and version",
            ["party", "version"],
            registry=r,
        )
        if self.version is not None:
            self.info.labels(party=self.party, version=self.version).set(1)
        self.registry = r  # last: its presence means every collector is there

    def job(self, name: str, outcome: str) -> None:
        self.jobs.labels(job=name, outcome=outcome).inc()

    def finished(self, name: str, state: str, seconds: float) -> None:
        self.jobs.labels(job=name, outcome=state).inc()
        self.duration.labels(job=name, state=state).observe(seconds)

    def sent(self, peer: str, nbytes: int) -> None:
        self.peer_bytes.labels(peer=peer, direction="sent").inc(nbytes)
        self.peer_messages.labels(peer=peer, direction="sent").inc()

    def received(self, peer: str, nbytes: int) -> None:
        self.peer_bytes.labels(peer=peer, direction="received").inc(nbytes)
        self.peer_messages.labels(peer=peer, direction="received").inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class OpsServer:
    """The plain HTTP listener: ``/healthz``, ``/readyz`` and ``/metrics``.

    ``ready()`` returns ``None`` when the node is ready, else the reason it is not;
    ``before_scrape()`` refreshes gauges just before ``/metrics`` is rendered.
    """

    def __init__(
        self,
        address: tuple[str, int],
        metrics: NodeMetrics,
        *,
        alive: Callable[[], bool],
        ready: Callable[[], str | None],
        before_scrape: Callable[[], None] | None = None,
    ) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        ops = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "ppdm-node"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    ok = alive()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"not serving\n")
                elif path == "/readyz":
                    reason = ready()
                    if reason is None:
                        self._reply(200, b"ready\n")
                    else:
                        self._reply(503, f"not ready: {reason}\n".encode())
                elif path == "/metrics":
                    if before_scrape is not None:
                        before_scrape()
                    self._reply(200, ops.metrics.render(), CONTENT_TYPE_LATEST)
                else:
                    self._reply(404, b"not found: /healthz, /readyz, /metrics\n")

            def do_HEAD(self) -> None:
                self.do_GET()

            def _reply(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("ops %s", format % args)

        self.metrics = metrics
        self._httpd = ThreadingHTTPServer(address, Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="ppdm-ops-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
