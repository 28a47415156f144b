"""Party-network transport: streaming throughput and round-trip latency over gRPC with
mutual TLS, next to raw grpcio with mutual TLS on the same machine (issue 2, item 11).

ppdm side: a :class:`~ppdm.testbed.consortia.GrpcTestbed` of two ``ppdm party serve``
processes on 127.0.0.1; throughput is the ``stream`` job (alice sends ``count`` messages
of ``size`` random bytes to bob through the Network interface: codec, envelopes, frames,
reassembly, validation; rate measured at the sender until bob's acknowledgement) and
latency the ``ring-echo`` job (a 64-byte token alice -> bob -> alice; median round trip).

Baseline: raw grpcio with mutual TLS (the same CA and certificates) between this process
and one server process: a client-streaming call of the same ``count`` messages of
``size`` bytes (no protobuf, identity serializers), and a unary echo of 64 bytes.

    python benchmarks/transport.py --quick
    python benchmarks/transport.py --json transport.json
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Report, Row, parser  # noqa: E402

from ppdm.parties.consortium import load_settings  # noqa: E402
from ppdm.testbed.consortia import GrpcTestbed, free_ports  # noqa: E402

_STREAM = "/bench.Raw/Stream"
_ECHO = "/bench.Raw/Echo"
_LIMIT = 64 * 1024 * 1024


def _identity(b: bytes) -> bytes:
    return b


def raw_server(settings_path: str, port: int) -> None:
    """Serve the raw baseline (run in a subprocess) until stdin closes."""
    from concurrent import futures

    settings = load_settings(settings_path)

    def stream(request_iterator, context):
        total = 0
        for chunk in request_iterator:
            total += len(chunk)
        return str(total).encode()

    def echo(request, context):
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Raw",
        {
            "Stream": grpc.stream_unary_rpc_method_handler(
                stream, request_deserializer=_identity, response_serializer=_identity
            ),
            "Echo": grpc.unary_unary_rpc_method_handler(
                echo, request_deserializer=_identity, response_serializer=_identity
            ),
        },
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[
            ("grpc.max_receive_message_length", _LIMIT),
            ("grpc.max_send_message_length", _LIMIT),
        ],
    )
    server.add_generic_rpc_handlers((handler,))
    creds = grpc.ssl_server_credentials(
        [(settings.private_key_pem, settings.certificate_pem)],
        root_certificates=settings.consortium.ca_certificate_pem,
        require_client_auth=True,
    )
    server.add_secure_port(f"127.0.0.1:{port}", creds)
    server.start()
    print("ready", flush=True)
    sys.stdin.read()
    server.stop(0)


def raw_baseline(bed: GrpcTestbed, *, size: int, count: int, rounds: int) -> tuple[float, float]:
    """(throughput in bytes/s, median round trip in s) of raw grpcio with mTLS."""
    port = free_ports(1)[0]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, __file__, "--raw-server", str(bed.settings_path("bob")), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            raise RuntimeError("raw baseline server did not start")
        client = bed.settings["alice"]
        creds = grpc.ssl_channel_credentials(
            root_certificates=client.consortium.ca_certificate_pem,
            private_key=client.private_key_pem,
            certificate_chain=client.certificate_pem,
        )
        channel = grpc.secure_channel(
            f"127.0.0.1:{port}",
            creds,
            options=[
                ("grpc.ssl_target_name_override", "bob"),
                ("grpc.max_send_message_length", _LIMIT),
                ("grpc.max_receive_message_length", _LIMIT),
            ],
        )
        stream = channel.stream_unary(
            _STREAM, request_serializer=_identity, response_deserializer=_identity
        )
        echo = channel.unary_unary(
            _ECHO, request_serializer=_identity, response_deserializer=_identity
        )
        block = os.urandom(size)
        echo(b"warm-up", timeout=30)
        stream(iter([block] * 2), timeout=60)
        t0 = time.perf_counter()
        got = int(stream(iter([block] * count), timeout=600))
        seconds = time.perf_counter() - t0
        if got != size * count:
            raise RuntimeError(f"raw server counted {got} bytes")
        token = os.urandom(64)
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            if echo(token, timeout=30) != token:
                raise RuntimeError("raw echo changed the token")
            times.append(time.perf_counter() - t)
        channel.close()
        return size * count / seconds, statistics.median(times)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


def party_network(bed: GrpcTestbed, *, size: int, count: int, rounds: int) -> tuple[float, float]:
    """(throughput in bytes/s, median round trip in s) through the party network."""
    bed.run_job("stream", {"size": size, "count": 2})  # warm up channels
    doc = bed.run_job("stream", {"size": size, "count": count}, timeout=600)
    if doc["state"] != "succeeded":
        raise RuntimeError(doc["error"])
    rate = doc["parties"]["alice"]["result"]["bytes_per_s"]
    doc = bed.run_job("ring-echo", {"size": 64, "rounds": rounds + 5})
    if doc["state"] != "succeeded":
        raise RuntimeError(doc["error"])
    times = doc["parties"]["alice"]["result"]["round_trip_s"][5:]  # drop warm-up rounds
    return rate, statistics.median(times)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1 << 20, help="bytes per message (1 MiB)")
    p.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = p.parse_args()
    count = 32 if args.quick else 512
    rounds = 50 if args.quick else 500
    repeat = 1 if args.quick else args.repeat
    mib = args.size / (1 << 20)
    report = Report(
        f"party network transport, gRPC + mutual TLS on 127.0.0.1: stream = {count} messages "
        f"of {mib:g} MiB (chunked = {8 * mib:g} MiB messages cut into frames), "
        "round trip = 64-byte token alice->bob->alice (median)"
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        GrpcTestbed(["alice", "bob"], tmp, timeout=120, log_level="WARNING") as bed,
    ):
        ppdm_runs = [party_network(bed, size=args.size, count=count, rounds=rounds)]
        raw_runs = [raw_baseline(bed, size=args.size, count=count, rounds=rounds)]
        for _ in range(repeat - 1):  # interleave so load changes hit both sides
            ppdm_runs.append(party_network(bed, size=args.size, count=count, rounds=rounds))
            raw_runs.append(raw_baseline(bed, size=args.size, count=count, rounds=rounds))
        ppdm_rate = max(r for r, _ in ppdm_runs)
        raw_rate = max(r for r, _ in raw_runs)
        ppdm_rtt = min(t for _, t in ppdm_runs)
        raw_rtt = min(t for _, t in raw_runs)
        chunked = bed.run_job(
            "stream", {"size": 8 * args.size, "count": max(count // 8, 8)}, timeout=600
        )
        chunked_rate = chunked["parties"]["alice"]["result"]["bytes_per_s"]
    report.add(
        Row(
            "stream_mb_per_s",
            ppdm_rate / 1e6,
            "MB/s",
            baseline=raw_rate / 1e6,
            baseline_name="raw grpcio + mTLS stream",
            goal=">= 0.5x raw",
        )
    )
    report.add(
        Row(
            "stream_chunked_mb_per_s",
            chunked_rate / 1e6,
            "MB/s",
            baseline=raw_rate / 1e6,
            baseline_name="raw grpcio + mTLS stream",
        )
    )
    report.add(
        Row(
            "round_trip_ms",
            ppdm_rtt * 1e3,
            "ms",
            baseline=raw_rtt * 1e3,
            baseline_name="raw grpcio + mTLS unary echo",
            higher_is_better=False,
        )
    )
    report.extra.update({"message_bytes": args.size, "messages": count, "rounds": rounds})
    report.finish(args.json)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--raw-server":
        raw_server(sys.argv[2], int(sys.argv[3]))
    else:
        main()
