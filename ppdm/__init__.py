"""ppdm: privacy-preserving distributed data mining.

See ``ppdm/README.md`` for the map of packages in dependency order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError, PartyFailure, PPDMError, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ppdm.parties.local import Simulation

__version__ = "0.1.0"
__all__ = ["ConfigError", "PPDMError", "PartyFailure", "ProtocolError", "__version__", "simulate"]


def simulate(
    fn: Callable[..., Any],
    inputs: Mapping[str, Any],
    *,
    timeout: float = 60.0,
    job_id: str | None = None,
) -> Simulation[Any]:
    """Run a protocol for every party in one process: ``fn(network, inputs[party])``.

    A one-call front door to :func:`ppdm.parties.local.simulate` (imported on first use,
    so ``import ppdm`` stays cheap). Parties are the keys of ``inputs``, in order; each
    runs in its own thread on an in-process network with the same contract as the gRPC
    one. If a party raises, its exception is re-raised here.

    Returns
    -------
    ppdm.parties.local.Simulation
        ``results`` (each party's return value), ``metrics`` (per-step messages, bytes
        and time at each party), ``totals`` and ``wall_time_s``.

    Examples
    --------
    >>> import ppdm
    >>> from ppdm.protocols.secure_sum import secure_sum
    >>> ppdm.simulate(secure_sum, {"alice": 3, "bob": 5, "carol": 9}).results["bob"]
    17
    """
    from ppdm.parties.local import simulate as _simulate

    return _simulate(fn, inputs, timeout=timeout, job_id=job_id)


def _alias_moved(old: str, new: str) -> None:
    """Make the module being imported as ``old`` an alias of ``new`` (and of each of
    ``new``'s submodules), warning that the old path is deprecated: the shims left at
    moved import paths call this, so old imports keep working for one release."""
    import importlib
    import pkgutil
    import sys
    import warnings

    warnings.warn(
        f"{old} moved to {new}: import it from there (the old path goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    module = importlib.import_module(new)
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        sys.modules[f"{old}.{info.name}"] = importlib.import_module(f"{new}.{info.name}")
    sys.modules[old] = module
