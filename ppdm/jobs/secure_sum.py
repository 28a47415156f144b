"""The ``secure-sum`` job: every party contributes its private ``secure_sum`` input."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError
from ppdm.jobs.registry import JobSpec, PartyContext, register_job

if TYPE_CHECKING:
    from ppdm.parties.network import Network


def run_secure_sum(net: Network, params: Mapping[str, Any], ctx: PartyContext) -> dict[str, Any]:
    """Read this party's ``[inputs] secure_sum`` (an int or a list of ints) and sum it."""
    # numpy and the protocol when the job runs: ``ppdm job run`` only reads the defaults
    import numpy as np

    from ppdm.protocols.secure_sum import secure_sum

    raw = ctx.private_input("secure_sum")
    modulus = params.get("modulus")
    modulus = int(modulus) if modulus is not None else None
    if isinstance(raw, bool) or not isinstance(raw, int | list):
        raise ConfigError(f"party {ctx.name!r}: inputs.secure_sum must be an int or a list")
    if isinstance(raw, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
            raise ConfigError(f"party {ctx.name!r}: inputs.secure_sum must hold integers")
        total = secure_sum(net, np.asarray(raw, dtype=np.int64), modulus=modulus)
        return {"sum": [int(v) for v in total], "parties": list(net.parties)}
    return {"sum": int(secure_sum(net, int(raw), modulus=modulus)), "parties": list(net.parties)}


register_job(
    JobSpec(
        name="secure-sum",
        summary="sum of the parties' private integers (ring protocol with a random mask)",
        run=run_secure_sum,
        defaults={"modulus": None},
    )
)
