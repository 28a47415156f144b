"""Paillier encryption on gmpy2, interoperable with python-paillier (``phe``).

- :mod:`~ppdm.protocols.paillier.keys`: keys with ``g = n + 1``, DJN short-randomness
  encryption with fixed-base comb tables, CRT decryption, homomorphic operations, validation
  of peer ciphertexts, protobuf serialization, ``phe`` conversion.
- :mod:`~ppdm.protocols.paillier.comb`: the fixed-base comb tables behind DJN encryption
  and the threads that evaluate large batches of them.
- :mod:`~ppdm.protocols.paillier.encoding`: signed integers, fixed point and slot
  packing with overflow checks.
- :mod:`~ppdm.protocols.paillier.batch`: numpy batch APIs and packed vectors.
- :mod:`~ppdm.protocols.paillier.pool`: the optional process pool (``workers=``); it
  knows nothing of keys (``keys`` hands it worker tasks), so the two depend one way.

>>> pub, priv = generate_keypair(512, allow_insecure=True)
>>> c = pub.mul_plain(pub.add_plain(pub.encrypt(7), 3), -4)
>>> priv.decrypt(c)
-40
"""

from ppdm.protocols.paillier.batch import (
    PackedVector,
    decrypt_array,
    decrypt_fixed,
    decrypt_packed,
    encrypt_array,
    encrypt_fixed,
    encrypt_packed,
    encrypted_dot,
    multi_exp,
)
from ppdm.protocols.paillier.encoding import (
    FixedPoint,
    Packing,
    decode_signed,
    encode_signed,
)
from ppdm.protocols.paillier.keys import (
    DEFAULT_EXPONENT_BITS,
    DEFAULT_KEY_BITS,
    MIN_KEY_BITS,
    SHORT_EXPONENT_BITS,
    FixedBaseTable,
    PaillierPrivateKey,
    PaillierPublicKey,
    check_key_factors,
    generate_keypair,
)

__all__ = [
    "DEFAULT_EXPONENT_BITS",
    "DEFAULT_KEY_BITS",
    "MIN_KEY_BITS",
    "SHORT_EXPONENT_BITS",
    "FixedBaseTable",
    "FixedPoint",
    "PackedVector",
    "Packing",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "check_key_factors",
    "decode_signed",
    "decrypt_array",
    "decrypt_fixed",
    "decrypt_packed",
    "encode_signed",
    "encrypt_array",
    "encrypt_fixed",
    "encrypt_packed",
    "encrypted_dot",
    "generate_keypair",
    "multi_exp",
]
