"""Secure building blocks; every protocol is a function whose first argument is a
:class:`~ppdm.parties.network.Network` (this party's view of the job).

Bottom-up: :mod:`~ppdm.protocols.ecgroup` (secp256k1), :mod:`~ppdm.protocols.ot` (base,
1-of-N, k-of-N, IKNP extension), :mod:`~ppdm.protocols.comparison`,
:mod:`~ppdm.protocols.dot_product_ot`, :mod:`~ppdm.protocols.gmw` (n-party
AND-and-count), :mod:`~ppdm.protocols.paillier`,
:mod:`~ppdm.protocols.dot_product_paillier`, :mod:`~ppdm.protocols.commutative`,
:mod:`~ppdm.protocols.set_union`, :mod:`~ppdm.protocols.intersection`,
:mod:`~ppdm.protocols.psi` (private set intersection and record alignment: KKRT16 over IKNP),
:mod:`~ppdm.protocols.secure_sum` (ring), :mod:`~ppdm.protocols.additive_sum`
(collusion-resistant), :mod:`~ppdm.protocols.threshold` (is a sum non-negative).
Each module states its security model, leakage and cost; see ``docs/protocols/``.
Import from the modules (they pull in different native libraries).
"""
