"""What the two comparing parties of vertical k-means receive of a third party's partial
distances, measured from the attacker's side.

With three or more parties, every party other than the first two splits its partial
distances (fixed point, ``(n, k)`` uint64) into a uniformly random mask for the first
party and the value minus the mask for the second. Each of the two plays the attacker
with the best attack on one share: read it as the third party's distances. Chance of an
exact hit per entry is ``2^-64``; with the mask weakened to zero
(``benchmarks/mutations.py``: ``kmeans-vertical-share-unmasked``) the second party
reads every distance exactly, and the first party's share has empty top bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppdm.mining.kmeans import vertical_kmeans
from ppdm.parties.local import LocalNetwork, simulate

PARTIES = ["alice", "bob", "carol"]
K = 3


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    centers = gen.normal(0, 6, (K, 6))
    x = np.concatenate([c + gen.normal(0, 1, (40, 6)) for c in centers])
    return x, x[[0, 40, 80]].copy()  # one start in every blob: no empty cluster


def test_comparing_parties_cannot_read_a_third_partys_distances() -> None:
    x, init = _data(11)
    cols = {"alice": slice(0, 2), "bob": slice(2, 4), "carol": slice(4, 6)}
    net = LocalNetwork(PARTIES, job_id="vkmeans-views", timeout=120)
    seen: dict[str, list[np.ndarray]] = {"alice": [], "bob": []}
    for me in seen:
        ep = net.endpoint(me)
        receive = ep.receive

        def spy(frm: str, step: str, _receive: Any = receive, _seen: Any = seen[me], **kw: Any):
            value = _receive(frm, step, **kw)
            if frm == "carol" and step.endswith("/iter1/shares"):
                _seen.append(np.array(value))
            return value

        ep.receive = spy  # type: ignore[method-assign]

    def party(net: Any, part: np.ndarray) -> Any:
        return vertical_kmeans(net, part, k=K, init=init[:, cols[net.me]], max_iter=5)

    sim = simulate(party, {p: x[:, c] for p, c in cols.items()}, network=net, timeout=120)
    assert seen["alice"] and seen["bob"], "no share reached the attackers: nothing measured"
    # Carol's own fixed-point partial distances of iteration 1 (the value both shares
    # add up to): recover them from what she sent, the sum of the two shares.
    truth = seen["alice"][0] + seen["bob"][0]
    d2 = ((x[:, None, 4:6] - init[None, :, 4:6]) ** 2).sum(axis=2)
    assert np.array_equal(np.argsort(truth, axis=1), np.argsort(d2, axis=1))  # really hers
    for attacker in ("alice", "bob"):
        (view,) = seen[attacker]
        hits = float(np.mean(view == truth))
        assert hits == 0.0, f"{attacker} reads {hits:.0%} of carol's partial distances"
        # The distances fit in far fewer than 64 bits; a uniform share does not.
        top = float(np.mean(view >> np.uint64(60) != 0))
        assert top > 0.8, f"{attacker}'s share has empty top bits ({top:.2f} set)"
    labels = sim.results["alice"].labels
    assert all(np.array_equal(labels, sim.results[p].labels) for p in PARTIES)
