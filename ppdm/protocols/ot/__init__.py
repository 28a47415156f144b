"""Oblivious transfer: base OT, 1-out-of-N / k-out-of-N OT, IKNP, KK13 and SoftSpoken OT
extension.

Aggarwal 2015, §20.5: 1-out-of-2 OT -- the sender offers ``(x0, x1)``, the receiver
learns ``x_sigma`` only, the sender learns nothing about ``sigma`` -- is the building
block of distributed privacy. Modules, bottom-up:

- :mod:`.crhash`: fixed-key AES correlation-robust hash and AES-CTR PRG (numpy-batched).
- :mod:`.bits`: bit packing and the vectorized 128 x m bit-matrix transpose.
- :mod:`.base`: Chou–Orlandi base OT over secp256k1 (batched, one round trip).
- :mod:`.kk13`: Kolesnikov–Kumaresan random 1-out-of-16 OT extension (256 base OTs,
  30 bytes per OT: 240 live code columns; :class:`OTSession` sets it up on first use).
- :mod:`.softspoken`: the same keys with SoftSpoken's small-field VOLE columns (240
  base OTs in GGM punctured PRFs, 7.5 bytes per OT; ``OTSession.ot16``): what the
  comparison's leaves, triples and multiplexers use.
- :mod:`.extension`: IKNP extension -- random, chosen-message and correlated OT in
  chunks -- and :class:`OTSession` (both directions between two parties).
- :mod:`.one_of_n`: Naor–Pinkas 1-out-of-N from ``log N`` 1-out-of-2 OTs; k-out-of-N.

Built on it: :mod:`ppdm.protocols.comparison` (millionaires, argmin) and
:mod:`ppdm.protocols.dot_product_ot` (binary dot product, AND).
"""

from ppdm.protocols.ot.base import (
    base_ot_receive,
    base_ot_receive_random,
    base_ot_send,
    base_ot_send_random,
)
from ppdm.protocols.ot.extension import IKNPReceiver, IKNPSender, OTSession
from ppdm.protocols.ot.kk13 import KK13Receiver, KK13Sender
from ppdm.protocols.ot.one_of_n import (
    k_of_n_receive,
    k_of_n_send,
    one_of_n_receive,
    one_of_n_send,
)
from ppdm.protocols.ot.softspoken import SS16Receiver, SS16Sender

__all__ = [
    "IKNPReceiver",
    "IKNPSender",
    "KK13Receiver",
    "KK13Sender",
    "OTSession",
    "SS16Receiver",
    "SS16Sender",
    "base_ot_receive",
    "base_ot_receive_random",
    "base_ot_send",
    "base_ot_send_random",
    "k_of_n_receive",
    "k_of_n_send",
    "one_of_n_receive",
    "one_of_n_send",
]
