"""Channels and credentials of the gRPC transport (:mod:`ppdm.parties.grpc_net`):
mutual TLS pinned to the roster's certificates in both directions, and the identity of a
caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from ppdm.parties.consortium import Consortium, PartySettings
from ppdm.parties.framing import FRAME_OVERHEAD

__all__ = [
    "CONNECT_TIMEOUT_MS",
    "RECONNECT_BACKOFF_MS",
    "authenticate",
    "channel_options",
    "dynamic_server_credentials",
    "open_channel",
    "peer_certificate",
    "server_credentials",
]

log = logging.getLogger(__name__)


# Channels and credentials ---------------------------------------------------------------


def channel_options(consortium: Consortium) -> list[tuple[str, Any]]:
    """gRPC options shared by nodes and clients: message size limits, keep-alive, and a
    short reconnect backoff (gRPC's default grows to 120 s, so a channel to a node that
    was down for a while would keep failing long after the node is back)."""
    limit = consortium.max_message_bytes + FRAME_OVERHEAD
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
        # gRPC takes this as the shortest time one connection attempt may take (TCP, TLS
        # and the first SETTINGS frame): it must leave room for long round trips.
        ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
    ]


#: First and largest delay (ms) between reconnection attempts to a peer's node.
RECONNECT_BACKOFF_MS = (200, 2000)
#: The least time one connection attempt gets (links of several hundred ms round trip).
CONNECT_TIMEOUT_MS = 10_000


def server_credentials(settings: PartySettings) -> grpc.ServerCredentials:
    """TLS server credentials that require a client certificate from the consortium CA."""
    return grpc.ssl_server_credentials(
        [(settings.private_key_pem, settings.certificate_pem)],
        root_certificates=settings.consortium.ca_certificate_pem,
        require_client_auth=True,
    )


def dynamic_server_credentials(
    current: Callable[[], PartySettings],
) -> grpc.ServerCredentials:
    """Like :func:`server_credentials`, but every new TLS handshake presents the key and
    certificate of ``current()`` (a node takes a rotated certificate without a restart)."""

    def config(settings: PartySettings) -> Any:
        return grpc.ssl_server_certificate_configuration(
            [(settings.private_key_pem, settings.certificate_pem)],
            root_certificates=settings.consortium.ca_certificate_pem,
        )

    first = current()
    state = {"cert": first.certificate_pem}

    def fetch() -> Any:
        settings = current()
        if settings.certificate_pem == state["cert"]:
            return None  # unchanged: gRPC keeps the configuration it has
        state["cert"] = settings.certificate_pem
        return config(settings)

    return grpc.dynamic_ssl_server_credentials(
        config(first), fetch, require_client_authentication=True
    )


def open_channel(settings: PartySettings, peer: str) -> grpc.Channel:
    """An mTLS channel from ``settings``' party to ``peer``'s node.

    The client presents its own certificate and accepts only *the* certificate the roster
    lists for ``peer`` (pinned: that certificate is the channel's only trust anchor, so
    another certificate for the same name -- an old one after a rotation, a mis-issued
    one, even from the consortium CA -- fails the TLS handshake), and it must name
    ``peer`` (TLS target name override = party name). Incoming calls are pinned the same
    way by :func:`authenticate`.
    """
    entry = settings.consortium.party(peer)
    creds = grpc.ssl_channel_credentials(
        root_certificates=entry.certificate_pem,
        private_key=settings.private_key_pem,
        certificate_chain=settings.certificate_pem,
    )
    options = [*channel_options(settings.consortium), ("grpc.ssl_target_name_override", peer)]
    return grpc.secure_channel(entry.address, creds, options=options)


def peer_certificate(context: grpc.ServicerContext) -> bytes | None:
    """The PEM certificate the caller presented in the TLS handshake, if any."""
    auth = context.auth_context() or {}
    certs = auth.get("x509_pem_cert") or []
    return bytes(certs[0]) if certs else None


def authenticate(context: grpc.ServicerContext, consortium: Consortium) -> str:
    """The roster name of the caller; aborts the RPC if the caller is not a roster party."""
    pem = peer_certificate(context)
    if pem is None:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
        raise AssertionError("unreachable")  # pragma: no cover - abort raises
    name = consortium.identify(pem)
    if name is None:
        log.warning("refused a caller from %s: certificate not on the roster", context.peer())
        context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"certificate is not the roster certificate of any party of consortium "
            f"{consortium.name!r}",
        )
    problem = consortium.party(name).validity_problem()  # type: ignore[arg-type]
    if problem is not None:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, problem)
    return name  # type: ignore[return-value]
