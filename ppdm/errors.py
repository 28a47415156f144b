"""Exceptions shared by every layer of ppdm."""

from __future__ import annotations

import re


class PPDMError(Exception):
    """Base class of every error ppdm raises on purpose."""


class ProtocolError(PPDMError):
    """A peer sent something that fails to decode or validate, or broke the protocol.

    Always names the peer and the protocol step, so that an operator can tell which
    organization's node misbehaved and where.
    """

    def __init__(self, party: str, step: str, reason: str) -> None:
        self.party = party
        self.step = step
        self.reason = reason
        super().__init__(f"protocol error from party {party!r} at step {step!r}: {reason}")


class PartyFailure(PPDMError):
    """A party died, aborted or stopped answering during a job."""

    def __init__(
        self,
        party: str,
        step: str,
        reason: str,
        *,
        code: str = "party_failure",
        blamed: str = "",
        blamed_step: str = "",
    ) -> None:
        self.party = party
        self.step = step
        self.reason = reason
        self.code = code  # the public code an aborting peer sent (ERROR_CODES)
        self.blamed = blamed or party  # whom that peer held responsible
        self.blamed_step = blamed_step or step
        super().__init__(f"party {party!r} failed at step {step!r}: {reason}")


class ConfigError(PPDMError):
    """Bad user input: a settings file, a command-line option, a data file."""


class SourceError(ConfigError):
    """A party's data source failed to deliver: ``fault`` is one of
    :data:`SOURCE_FAULTS` (the source is locked, unreachable, malformed, or a read ran
    past the job's timeout). The fault class is the public code of the failure; the
    driver's message (which can quote the data) stays in the node's log."""

    def __init__(self, fault: str, message: str) -> None:
        self.fault = fault if fault in SOURCE_FAULTS else "source-malformed"
        super().__init__(message)


class AggregationTooSmall(PPDMError):
    """A released aggregate would cover fewer records than the owners allow (e.g. a
    k-means centre over fewer than ``min_cluster_size`` records)."""


class PolicyRefusal(PPDMError):
    """A node's data-owner policy refuses a job; ``rule`` names the deciding rule."""

    def __init__(self, rule: str, reason: str) -> None:
        self.rule = rule
        self.reason = reason
        super().__init__(f"refused by rule {rule!r}: {reason}")


# Public error codes ----------------------------------------------------------------------
#
# What crosses a party boundary when a job fails (an Abort to the peers, the job status the
# initiator reads) is one of these codes, the party it concerns and the protocol step; never
# the exception text, which may quote private values (an input, a label, a set size). The
# details go to the failing node's own log only.

ERROR_CODES: dict[str, str] = {
    "refused": "refused by the data owner's policy",
    "input_error": "the party's data does not fit the job's parameters",
    "protocol_error": "a peer sent a message that failed validation",
    "party_failure": "a party failed, aborted or stopped answering",
    "aggregation_too_small": "an aggregate would cover fewer records than allowed",
    "cancelled": "the job was cancelled",
    "expired": "the job was not approved in time",
    "shutting_down": "the party's node is shutting down",
    "internal_error": "the job failed at this party",
    "source-locked": "the party's data source is locked by another session",
    "source-unreachable": "the party's data source cannot be reached or refused the connection",
    "source-malformed": "the party's data source holds data it cannot read",
    "source-timeout": "a read of the party's data source ran past the job's timeout",
    "compute-failed": "the party's compute engine (e.g. Spark) failed during its local work",
}

#: The fault classes of :class:`SourceError` (public codes of :data:`ERROR_CODES`).
SOURCE_FAULTS = ("source-locked", "source-unreachable", "source-malformed", "source-timeout")


class PublicError:
    """The shareable form of a job failure: a fixed ``code``, the ``party`` it concerns
    and the protocol ``step`` (see :data:`ERROR_CODES`).

    >>> PublicError.of(ProtocolError("carol", "sum/ring", "value 201 out of range"), "bob").text()
    "protocol_error: party 'carol' at step 'sum/ring' (a peer sent a message that failed validation)"
    """

    __slots__ = ("code", "party", "step")

    def __init__(self, code: str, party: str, step: str = "") -> None:
        self.code = code if code in ERROR_CODES else "internal_error"
        self.party = party
        self.step = step

    @classmethod
    def of(cls, exc: BaseException, me: str) -> PublicError:
        """Classify ``exc`` raised while party ``me`` ran a job."""
        if isinstance(exc, ProtocolError):
            return cls("protocol_error", exc.party, exc.step)
        if isinstance(exc, PartyFailure):
            # A received abort keeps the code the aborting peer sent (see parse_abort).
            if exc.party == me:
                return cls("party_failure", me, exc.step)
            return cls(exc.code, exc.blamed, exc.blamed_step)
        if isinstance(exc, PolicyRefusal):
            return cls("refused", me)
        if isinstance(exc, AggregationTooSmall):
            return cls("aggregation_too_small", me)
        if isinstance(exc, SourceError):
            return cls(exc.fault, me)
        if isinstance(exc, ConfigError | ValueError | TypeError | KeyError | OverflowError):
            return cls("input_error", me)
        return cls("internal_error", me)

    def text(self) -> str:
        where = f" at step {self.step!r}" if self.step else ""
        return f"{self.code}: party {self.party!r}{where} ({ERROR_CODES[self.code]})"

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "party": self.party, "step": self.step}


#: Opens the local cause a node adds to its own refusal or failure for its own owner only
#: (a caller with the node's own certificate on its own host); never sent to a peer.
LOCAL_CAUSE_MARK = "[local cause, shown only to this node's owner: "
_LOCAL_CAUSE = re.compile(re.escape(LOCAL_CAUSE_MARK) + r".*?\](?=$|[;\"\n])", re.S)


def with_local_cause(text: str, cause: str) -> str:
    """``text`` followed by the owner-only ``cause`` in its marked form."""
    return f"{text} {LOCAL_CAUSE_MARK}{cause}]"


def split_local_cause(text: str) -> tuple[str, str]:
    """``(public text, local cause)`` of one error (the cause ``""`` if it has none).

    >>> split_local_cause(with_local_cause("input_error", "no file 'x'"))
    ('input_error', "no file 'x'")
    """
    public, mark, cause = text.partition(LOCAL_CAUSE_MARK)
    return (public.rstrip(), cause.removesuffix("]")) if mark else (text, "")


def without_local_causes(text: str) -> str:
    """``text`` with every marked local cause removed (what anyone but the owner sees).

    >>> without_local_causes(with_local_cause("input_error", "no file 'x'") + "; bob: ok")
    'input_error ; bob: ok'
    """
    return _LOCAL_CAUSE.sub("", text)
