"""The network interface protocol code talks to, and the endpoint both transports share.

A :class:`Network` is one party's view of one job: it sends typed values (see
:mod:`ppdm.parties.codec`) to named parties under a protocol *step tag* and receives them
by sender and tag, each receive bounded by a timeout. Protocols take a ``Network`` as an
argument and never reach for a global, so the same protocol function runs on the
in-process network (:mod:`ppdm.parties.local`) and on gRPC (:mod:`ppdm.parties.grpc_net`).

:class:`Endpoint` implements everything but moving bytes: envelopes, sequence numbers,
decoding and validation (bad input -> :class:`~ppdm.errors.ProtocolError` naming the
party and step), per-(sender, step) FIFO inboxes, job aborts
(-> :class:`~ppdm.errors.PartyFailure` naming the party) and cost metering. A transport
supplies a ``transmit(recipient, envelope_bytes)`` callable and feeds what arrives to
:meth:`Endpoint.deliver`.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from google.protobuf.message import DecodeError as _PbDecodeError

from ppdm.errors import ERROR_CODES, PartyFailure, ProtocolError
from ppdm.parties.metrics import CostMeter
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb

__all__ = ["DEFAULT_TIMEOUT", "Endpoint", "Network", "ScopedNetwork"]

DEFAULT_TIMEOUT = 60.0

Transmit = Callable[[str, bytes], None]


class Network(ABC):
    """One party's view of a job's network (see the module docstring)."""

    @property
    @abstractmethod
    def me(self) -> str:
        """This party's name."""

    @property
    @abstractmethod
    def parties(self) -> tuple[str, ...]:
        """All parties of the job, in the consortium's order (the same at every party)."""

    @property
    @abstractmethod
    def job_id(self) -> str: ...

    @property
    @abstractmethod
    def metrics(self) -> CostMeter: ...

    @abstractmethod
    def send(self, to: str, step: str, value: Any) -> None:
        """Send ``value`` to party ``to`` under step tag ``step``."""

    @abstractmethod
    def receive(
        self,
        frm: str,
        step: str,
        *,
        expect: type | tuple[type, ...] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The next value ``frm`` sent under ``step``.

        Raises :class:`ProtocolError` if it does not decode or is not an ``expect``
        instance, and :class:`PartyFailure` if ``frm`` (or any party) aborted the job or
        nothing arrived within ``timeout`` seconds (default: the job timeout).
        """

    @abstractmethod
    def abort(
        self, reason: str, *, code: str = "party_failure", party: str = "", step: str = ""
    ) -> None:
        """Give up on the job and tell every other party (a public ``reason`` and one of
        the codes of :data:`ppdm.errors.ERROR_CODES`)."""

    # Derived operations -------------------------------------------------------------

    @property
    def others(self) -> tuple[str, ...]:
        """Every party but this one, in consortium order."""
        return tuple(p for p in self.parties if p != self.me)

    @property
    def index(self) -> int:
        """This party's position in :attr:`parties`."""
        return self.parties.index(self.me)

    def successor(self, ring: Sequence[str] | None = None) -> str:
        """The next party after this one on ``ring`` (default: all parties)."""
        r = tuple(ring) if ring is not None else self.parties
        return r[(r.index(self.me) + 1) % len(r)]

    def predecessor(self, ring: Sequence[str] | None = None) -> str:
        """The party before this one on ``ring`` (default: all parties)."""
        r = tuple(ring) if ring is not None else self.parties
        return r[(r.index(self.me) - 1) % len(r)]

    def broadcast(self, step: str, value: Any, *, to: Iterable[str] | None = None) -> None:
        """Send ``value`` to every party in ``to`` (default: all others)."""
        for p in self.others if to is None else to:
            if p != self.me:
                self.send(p, step, value)

    def gather(
        self,
        step: str,
        *,
        frm: Iterable[str] | None = None,
        expect: type | tuple[type, ...] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Receive one value under ``step`` from each party in ``frm`` (default: all
        others); returns them by party name."""
        sources = self.others if frm is None else tuple(p for p in frm if p != self.me)
        return {p: self.receive(p, step, expect=expect, timeout=timeout) for p in sources}

    def scoped(self, prefix: str) -> Network:
        """A view whose step tags are ``prefix/<step>`` (for composing sub-protocols)."""
        return ScopedNetwork(self, prefix)


class ScopedNetwork(Network):
    """A :class:`Network` that prefixes every step tag (see :meth:`Network.scoped`)."""

    def __init__(self, base: Network, prefix: str) -> None:
        self._base = base
        self._prefix = prefix.rstrip("/")

    def _tag(self, step: str) -> str:
        return f"{self._prefix}/{step}"

    @property
    def me(self) -> str:
        return self._base.me

    @property
    def parties(self) -> tuple[str, ...]:
        return self._base.parties

    @property
    def job_id(self) -> str:
        return self._base.job_id

    @property
    def metrics(self) -> CostMeter:
        return self._base.metrics

    def send(self, to: str, step: str, value: Any) -> None:
        self._base.send(to, self._tag(step), value)

    def receive(
        self,
        frm: str,
        step: str,
        *,
        expect: type | tuple[type, ...] | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._base.receive(frm, self._tag(step), expect=expect, timeout=timeout)

    def abort(
        self, reason: str, *, code: str = "party_failure", party: str = "", step: str = ""
    ) -> None:
        self._base.abort(reason, code=code, party=party, step=step)


class Endpoint(Network):
    """A party's endpoint for one job, independent of the transport (module docstring)."""

    def __init__(
        self,
        me: str,
        parties: Sequence[str],
        transmit: Transmit,
        *,
        job_id: str,
        consortium: str = "local",
        timeout: float = DEFAULT_TIMEOUT,
        max_unread_bytes_per_peer: int | None = None,
        max_unread_bytes_per_job: int | None = None,
    ) -> None:
        if me not in parties:
            raise ValueError(f"party {me!r} is not among {list(parties)}")
        if len(set(parties)) != len(parties):
            raise ValueError("party names must be distinct")
        self._me = me
        self._parties = tuple(parties)
        self._transmit = transmit
        self._job_id = job_id
        self._consortium = consortium
        self.timeout = float(timeout)
        self._metrics = CostMeter()
        self._cond = threading.Condition()
        self._queues: dict[tuple[str, str], deque[tuple[int, env_pb.Envelope]]] = {}
        self._seq_out: dict[str, int] = {}
        self._seq_in: dict[str, int] = {}
        self._poisoned: dict[str, str] = {}  # sender -> reason its traffic is unusable
        self._aborted: tuple[str, str] | None = None  # (party, reason)
        self._abort_code = "party_failure"  # the code a peer's Abort carried
        self._abort_blame = ("", "")  # the party and step that Abort held responsible
        self._send_lock = threading.Lock()
        self._closed = False
        # Bytes delivered and not read yet, per sender and in all: a member cannot make
        # the job hold more than these limits (None: unbounded, the in-process network).
        self._unread: dict[str, int] = {}
        self._unread_total = 0
        self._max_unread_peer = max_unread_bytes_per_peer
        self._max_unread_job = max_unread_bytes_per_job
        self._fatal: tuple[str, str] | None = None  # (sender, reason): ends every receive

    # Network properties ---------------------------------------------------------------

    @property
    def me(self) -> str:
        return self._me

    @property
    def parties(self) -> tuple[str, ...]:
        return self._parties

    @property
    def job_id(self) -> str:
        return self._job_id

    @property
    def consortium(self) -> str:
        return self._consortium

    @property
    def metrics(self) -> CostMeter:
        return self._metrics

    # Sending --------------------------------------------------------------------------

    def _check_peer(self, party: str) -> None:
        if party == self._me:
            raise ValueError(f"party {party!r} cannot send to itself")
        if party not in self._parties:
            raise ValueError(f"unknown party {party!r}; parties are {list(self._parties)}")

    def send(self, to: str, step: str, value: Any) -> None:
        started = time.perf_counter()
        self._check_peer(to)
        self._raise_if_aborted(to, step)
        from ppdm.parties.codec import encode  # numpy: with a job's first message, not at import

        payload = encode(value)
        with self._send_lock:
            seq = self._seq_out.get(to, 0) + 1
            self._seq_out[to] = seq
            envelope = env_pb.Envelope(
                consortium=self._consortium,
                job_id=self._job_id,
                step=step,
                sender=self._me,
                recipient=to,
                seq=seq,
            )
            # CopyFrom, not payload= in the constructor: the keyword path copies a large
            # payload field by field (about 20x slower for a 1 MiB blob with upb).
            envelope.payload.CopyFrom(payload)
            data = envelope.SerializeToString()
            self._transmit(to, data)
        self._metrics.sent(step, len(data), started)

    def abort(
        self, reason: str, *, code: str = "party_failure", party: str = "", step: str = ""
    ) -> None:
        """Tell every other party this one gives up (best effort), then close.

        ``reason`` and ``code`` travel to every peer as they are: callers at a trust
        boundary (the node, :func:`ppdm.parties.local.simulate`) pass the fixed public
        text of :class:`ppdm.errors.PublicError`, never an exception's message.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            if self._aborted is None:
                self._aborted = (self._me, reason)
            self._cond.notify_all()
        for p in self.others:
            try:
                with self._send_lock:
                    seq = self._seq_out.get(p, 0) + 1
                    self._seq_out[p] = seq
                    env = env_pb.Envelope(
                        consortium=self._consortium,
                        job_id=self._job_id,
                        step="",
                        sender=self._me,
                        recipient=p,
                        seq=seq,
                        abort=env_pb.Abort(
                            reason=reason[:2000],
                            code=code[:64],
                            party=party[:128],
                            step=step[:256],
                        ),
                    )
                    self._transmit(p, env.SerializeToString())
            except Exception:
                continue

    def fail_party(self, party: str, reason: str) -> None:
        """Record that ``party`` died or disconnected (called by the transport)."""
        with self._cond:
            if self._aborted is None:
                self._aborted = (party, reason)
            self._cond.notify_all()

    # Receiving ------------------------------------------------------------------------

    def deliver(self, data: bytes, *, sender: str | None = None) -> None:
        """Accept one serialized envelope from the transport.

        ``sender`` is the authenticated identity of the connection it came on (mutual
        TLS); an envelope claiming another sender poisons that connection's traffic.
        """
        try:
            envelope = env_pb.Envelope.FromString(data)
        except _PbDecodeError as exc:
            if sender is not None:
                self.poison(sender, f"undecodable envelope ({exc})")
            return
        claimed = envelope.sender
        origin = sender if sender is not None else claimed
        if origin not in self._parties or origin == self._me:
            return  # not a member of this job: the transport refuses such peers earlier
        problem = None
        if sender is not None and claimed != sender:
            problem = f"envelope claims sender {claimed!r} on {sender!r}'s connection"
        elif envelope.job_id != self._job_id:
            problem = f"envelope for job {envelope.job_id!r} on job {self._job_id!r}"
        elif envelope.consortium != self._consortium:
            problem = f"envelope for consortium {envelope.consortium!r}"
        elif envelope.recipient != self._me:
            problem = f"envelope addressed to {envelope.recipient!r}"
        if problem is not None:
            self.poison(origin, problem)
            return
        with self._cond:
            expected = self._seq_in.get(origin, 0) + 1
            if envelope.seq != expected:
                self._poisoned.setdefault(
                    origin, f"sequence number {envelope.seq}, expected {expected}"
                )
                self._cond.notify_all()
                return
            self._seq_in[origin] = expected
            if envelope.WhichOneof("body") == "abort":
                if self._aborted is None:
                    self._aborted = (origin, envelope.abort.reason[:2000] or "aborted")
                    code = envelope.abort.code
                    self._abort_code = code if code in ERROR_CODES else "party_failure"
                    blamed = envelope.abort.party
                    self._abort_blame = (
                        blamed if blamed in self._parties else origin,
                        envelope.abort.step[:256],
                    )
            else:
                if self._closed:
                    return  # the job is over here: nothing it could read is kept
                size = len(data)
                held = self._unread.get(origin, 0) + size
                over = (self._max_unread_peer is not None and held > self._max_unread_peer) or (
                    self._max_unread_job is not None
                    and self._unread_total + size > self._max_unread_job
                )
                if over:
                    reason = "sent more data than this party buffers for a job it has not read"
                    self._poisoned.setdefault(origin, reason)
                    if self._fatal is None:
                        self._fatal = (origin, reason)
                    self._cond.notify_all()
                    return
                self._unread[origin] = held
                self._unread_total += size
                key = (origin, envelope.step)
                self._queues.setdefault(key, deque()).append((size, envelope))
            self._cond.notify_all()

    def poison(self, party: str, reason: str) -> None:
        """Mark all further traffic from ``party`` unusable (a transport-level fault such
        as a malformed frame); its next receive raises :class:`ProtocolError`."""
        with self._cond:
            self._poisoned.setdefault(party, reason)
            self._cond.notify_all()

    def _raise_if_aborted(self, party: str, step: str) -> None:
        if self._aborted is not None:
            who, reason = self._aborted
            if who == self._me and self._closed:
                raise PartyFailure(who, step, f"this party aborted the job: {reason}")
            raise PartyFailure(
                who,
                step,
                reason,
                code=self._abort_code,
                blamed=self._abort_blame[0],
                blamed_step=self._abort_blame[1] or step,
            )

    def receive(
        self,
        frm: str,
        step: str,
        *,
        expect: type | tuple[type, ...] | None = None,
        timeout: float | None = None,
    ) -> Any:
        started = time.perf_counter()
        self._check_peer(frm)
        wait = self.timeout if timeout is None else float(timeout)
        deadline = started + wait
        key = (frm, step)
        with self._cond:
            while True:
                queue = self._queues.get(key)
                if self._fatal is not None:
                    raise ProtocolError(self._fatal[0], step, self._fatal[1])
                if queue:
                    nbytes, envelope = queue.popleft()
                    self._unread[frm] -= nbytes
                    self._unread_total -= nbytes
                    break
                if frm in self._poisoned:
                    raise ProtocolError(frm, step, self._poisoned[frm])
                self._raise_if_aborted(frm, step)
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise PartyFailure(frm, step, f"no message within the {wait:g} s timeout")
                self._cond.wait(remaining)
        from ppdm.parties.codec import DecodeError, decode

        try:
            value = decode(envelope.payload)
        except DecodeError as exc:
            raise ProtocolError(frm, step, f"payload does not decode: {exc}") from exc
        if expect is not None and not isinstance(value, expect):
            names = (
                expect.__name__
                if isinstance(expect, type)
                else " or ".join(t.__name__ for t in expect)
            )
            raise ProtocolError(frm, step, f"expected a {names}, got a {type(value).__name__}")
        self._metrics.received(step, nbytes, started)
        return value

    def close(self) -> None:
        with self._cond:
            self._closed = True
            # Messages the job never read are dropped with it.
            self._queues.clear()
            self._unread.clear()
            self._unread_total = 0
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """The job ended at this party (closed or aborted)."""
        return self._closed

    def failure(self) -> PartyFailure | None:
        """Why the job is over (this party's or a peer's abort, a lost peer): what its
        next receive would raise; ``None`` while it runs. For local work that does not
        receive for a long time (a compute engine's jobs, :mod:`ppdm.compute`)."""
        with self._cond:
            try:
                self._raise_if_aborted(self._me, "")
            except PartyFailure as exc:
                return exc
        return None

    @property
    def unread_bytes(self) -> int:
        """Bytes delivered to this job that it has not read yet (all senders)."""
        with self._cond:
            return self._unread_total
