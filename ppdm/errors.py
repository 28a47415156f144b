"""Exceptions shared by every layer of ppdm."""

from __future__ import annotations


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

    def __init__(self, party: str, step: str, reason: str) -> None:
        self.party = party
        self.step = step
        self.reason = reason
        super().__init__(f"party {party!r} failed at step {step!r}: {reason}")


class ConfigError(PPDMError):
    """Bad user input: a settings file, a command-line option, a data file."""
