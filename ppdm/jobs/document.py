"""The JSON document a job run produces, the same for ``ppdm simulate`` and ``ppdm job run``.

Schema (see docs/jobs.md)::

    {
      "job_id": str, "protocol": str, "params": {...}, "network": "in-process" | "grpc",
      "ok": bool, "failed_party": str | null, "error": str | null,
      "wall_time_s": float,
      "link": {"one_way_delay_s", "rtt_s", "bandwidth_bps", "sequential_hops", "rounds"}
              (only on an emulated link),
      "parties": {
        "<party>": {"state": "succeeded" | "failed", "result": {...} | null,
                    "error": str | null, "wall_time_s": float,
                    "metrics": [{"step", "messages_sent", "messages_received",
                                 "bytes_sent", "bytes_received", "wall_time_s"}, ...],
                    "totals": {...}}
      }
    }
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from ppdm.jobs.registry import PartyContext, get_job
from ppdm.parties.local import LinkModel, LocalNetwork, simulate

__all__ = ["simulate_job"]


def simulate_job(
    name: str,
    contexts: Mapping[str, PartyContext],
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float = 120.0,
    link: LinkModel | None = None,
) -> dict[str, Any]:
    """Run job ``name`` for every party of ``contexts`` on the in-process network and
    return the job document (module docstring). Raises the failing party's error.

    With ``link`` the network emulates that WAN link (:mod:`ppdm.parties.local`) and the
    document gets a ``"link"`` entry: the link, the job's sequential hops and round trips.
    """
    spec = get_job(name)
    merged = spec.params(params)
    parties = list(contexts)
    job_id = uuid.uuid4().hex
    net = LocalNetwork(parties, job_id=job_id, timeout=timeout, link=link)
    t0 = time.perf_counter()
    try:
        sim = simulate(
            lambda ep, ctx: spec.run(ep, merged, ctx),
            {p: contexts[p] for p in parties},
            timeout=timeout,
            network=net,
        )
    finally:
        net.close()
    wall = time.perf_counter() - t0
    doc: dict[str, Any] = {
        "job_id": job_id,
        "protocol": name,
        "params": merged,
        "network": "in-process",
        "ok": True,
        "failed_party": None,
        "error": None,
        "wall_time_s": round(wall, 6),
        "parties": {},
    }
    if link is not None:
        doc["link"] = {**link.describe(), "sequential_hops": sim.hops, "rounds": sim.rounds}
    for p in parties:
        doc["parties"][p] = {
            "state": "succeeded",
            "result": sim.results[p],
            "error": None,
            "wall_time_s": sim.totals[p]["wall_time_s"],
            "metrics": sim.metrics[p],
            "totals": sim.totals[p],
        }
    return doc
