"""A node's peers: one shared mutual-TLS channel per peer, pinned to the roster's
certificates and dialled afresh when they change; a newer roster signed by the consortium
CA and this party's own rotated certificate, taken without a restart; and each job's
links to its peers (the endpoint that sends over those channels and takes the frames its
peers' ``Exchange`` streams bring in).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

import grpc

from ppdm.parties.consortium import Consortium, NodeLimits, PartySettings, certificate_fingerprint
from ppdm.parties.grpc_net import JobLinks, ReassemblyBudget, StreamWatch, frame_bytes, open_channel
from ppdm.parties.network import Endpoint
from ppdm.parties.roster import check_successor, members_changed, roster_toml
from ppdm.service.jobstate import _DONE_STATES, Job
from ppdm.service.ledger import Ledger
from ppdm.service.metrics import NodeMetrics

log = logging.getLogger(__name__)


class NodePeers:
    """The peers' part of :class:`~ppdm.service.node.PartyNode` (a mixin of it: the
    attributes below are set by ``PartyNode.__init__``)."""

    name: str
    settings: PartySettings
    consortium: Consortium
    limits: NodeLimits
    ledger: Ledger
    metrics: NodeMetrics
    removed: bool
    own_certificate_stale: bool
    pending_wait_s: float
    streams: StreamWatch
    reassembly: ReassemblyBudget
    _cond: threading.Condition
    _jobs: OrderedDict[str, Job]
    _endpoints: dict[str, Endpoint]
    _links: dict[str, JobLinks]
    _streams: dict[str, int]
    _channels: dict[str, grpc.Channel]
    _channel_lock: threading.Lock
    _roster_lock: threading.Lock
    _stopping: threading.Event

    def update_roster(self, new: Consortium, *, source: str) -> None:
        """Take a newer roster signed by the CA (:func:`ppdm.parties.roster.check_successor`
        decides): pin its certificates at once, inbound and outbound, and keep it on disk.
        Raises :class:`ConfigError` naming why a roster is not taken."""
        with self._roster_lock:
            current = self.consortium
            check_successor(current, new)
            changed = members_changed(current, new)
            path = current.path
            if source != "reload" and path is not None:
                tmp = path.with_name(path.name + ".incoming")
                tmp.write_text(roster_toml(new))
                os.replace(tmp, path)
                new = replace(new, path=path)
            self.consortium = new
            self.settings = replace(self.settings, consortium=new)
            self.removed = self.name not in new.names
            self._drop_channels()  # the next call dials with the new pins
            if not self.removed:
                self._take_own_credentials(self.settings)
        self.ledger.append(
            "roster",
            {
                "event": source,
                "from_version": current.version,
                "version": new.version,
                "changed": list(changed),
                "removed_self": self.removed,
            },
        )
        log.info(
            "roster version %d taken (%s; was %d; changed: %s)",
            new.version,
            source,
            current.version,
            ", ".join(changed) or "nothing",
        )
        if self.removed:
            log.error("this party %r is not in roster version %d", self.name, new.version)

    def _take_own_credentials(self, fresh: PartySettings) -> bool:
        """Use ``fresh``'s key and certificate if they are this party's roster entry now
        (after rotate-cert): new TLS handshakes present them at once."""
        entry = self.consortium.party(self.name) if not self.removed else None
        if entry is None:
            return False
        if certificate_fingerprint(fresh.certificate_pem) != entry.fingerprint:
            log.error(
                "the roster lists a new certificate for %r that this node does not hold yet: "
                "install the new key and certificate, then send SIGHUP",
                self.name,
            )
            self.own_certificate_stale = True
            return False
        if fresh.certificate_pem != self.settings.certificate_pem:
            self.settings = replace(
                self.settings,
                certificate_pem=fresh.certificate_pem,
                private_key_pem=fresh.private_key_pem,
            )
            self._drop_channels()  # the next call presents the new certificate
            log.info("this party's rotated certificate is in use")
        self.own_certificate_stale = False
        return True

    # Channels ----------------------------------------------------------------------------

    def channel(self, peer: str) -> grpc.Channel:
        """The node's shared mTLS channel to ``peer``."""
        with self._channel_lock:
            ch = self._channels.get(peer)
            if ch is None:
                ch = self._channels[peer] = open_channel(self.settings, peer)
            return ch

    def _drop_channels(self) -> None:
        """Close every cached peer channel (the roster or this party's own certificate
        changed)."""
        with self._channel_lock:
            channels = list(self._channels.values())
            self._channels.clear()
        for ch in channels:
            ch.close()

    def reset_channel(self, peer: str) -> None:
        """Drop the cached channel to ``peer`` (its node went away): the next use dials
        afresh, at once, instead of waiting out a broken channel's reconnect backoff.
        Streams still open on the old channel end with it."""
        with self._channel_lock:
            ch = self._channels.pop(peer, None)
        if ch is not None:
            ch.close()
            log.info("channel to %s reset", peer)

    # Endpoints ---------------------------------------------------------------------------

    def open_endpoint(
        self, job_id: str, parties: Sequence[str], *, timeout: float
    ) -> tuple[Endpoint, JobLinks]:
        """A gRPC-backed endpoint of job ``job_id`` at this node (what ``StartJob`` uses;
        tests use it to run arbitrary functions over the real transport)."""
        links = JobLinks(
            job_id,
            self.channel,
            max_chunk=frame_bytes(self.consortium),
            timeout=timeout,
        )
        metrics = self.metrics

        def transmit(recipient: str, data: bytes) -> None:
            links.transmit(recipient, data)
            metrics.sent(recipient, len(data))

        endpoint = Endpoint(
            self.name,
            parties,
            transmit,
            job_id=job_id,
            consortium=self.consortium.name,
            timeout=timeout,
            max_unread_bytes_per_peer=self.limits.max_unread_bytes_per_peer,
            max_unread_bytes_per_job=self.limits.max_unread_bytes_per_job,
        )
        links.endpoint = endpoint
        with self._cond:
            if job_id in self._endpoints:
                raise ValueError(f"job {job_id!r} already exists at {self.name!r}")
            self._endpoints[job_id] = endpoint
            self._links[job_id] = links
            self._cond.notify_all()
        return endpoint, links

    def close_endpoint(self, job_id: str, *, timeout: float = 10.0) -> dict[str, str]:
        """Close a job's outgoing streams; the endpoint stays for late frames."""
        with self._cond:
            ep = self._endpoints.get(job_id)
            links = self._links.pop(job_id, None)
        errors = links.close(timeout) if links is not None else {}
        if ep is not None:
            ep.close()
        return errors

    def _lookup(self, job_id: str, wait_s: float) -> Endpoint | None:
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                ep = self._endpoints.get(job_id)
                if ep is not None or self._stopping.is_set():
                    return ep
                job = self._jobs.get(job_id)
                if job is not None and job.state in _DONE_STATES:
                    return None  # refused, cancelled or over: refuse its frames at once
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def forget_endpoint(self, job_id: str) -> None:
        """Drop a closed endpoint opened with :meth:`open_endpoint`."""
        with self._cond:
            self._endpoints.pop(job_id, None)
            self._links.pop(job_id, None)
