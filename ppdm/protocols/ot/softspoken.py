"""SoftSpoken 1-out-of-16 OT extension: random 1-out-of-16 OTs for 7.5 bytes each.

KK13's 1-out-of-16 OT (:mod:`~ppdm.protocols.ot.kk13`) with its 240 IKNP-style columns
replaced by SoftSpoken's small-field VOLE (Roy, "SoftSpokenOT: quieter OT extension from
small-field silent VOLE in the minicrypt model", CRYPTO 2022, the semi-honest protocol):
the columns come in 60 blocks of ``k = 4``, each from a punctured PRF of 16 leaves of
which the extension sender knows all but one, so the receiver sends one bit per block
and OT (60 bits, 7.5 bytes) instead of one per column (240 bits, 30 bytes). The keys,
the hash and the receiver's output are KK13's; only the rows ``q_j = t_j XOR (C(r_j)
AND s)`` are made another way. Aggarwal 2015, §20.5: 1-out-of-N OT, the generalization
of the 1-out-of-2 OT distributed mining is built from.

Code: block ``b < 60`` has the code position ``p_b = (b mod 15) + 1`` and the four
columns ``128 h + 4 i + l`` (``h = b // 30``, ``i = b mod 30``, ``l < 4``; the columns
``120 .. 127`` of each half are dead); a choice ``v < 16`` has ``C(v) = parity(v AND
p_b)`` in all four columns of block ``b``: the punctured simplex code of length 15,
twice in each 128-bit half. Two codewords differ in 8 positions of every 15, so in 16
blocks (64 columns) of each half and 128 columns in all: the distance of KK13's code,
split the same way between the two hashed halves.

Protocol (``G`` = the leaves' PRG below, ``H`` = :func:`~.kk13.kk13_hash` under SS16's
own tweak blocks):

1. *Setup, roles reversed.* For every block the extension receiver ``R`` draws a root
   seed and expands a GGM tree of depth 4 (below) to 16 leaf seeds ``k_{b,x}``; the
   extension sender ``S`` draws ``Delta_b < 16`` and learns every leaf but ``k_{b, Delta_b}``: per
   tree level one random 1-out-of-2 OT (240 in all; Chou-Orlandi, or 240 random IKNP
   OTs of an :class:`~ppdm.protocols.ot.extension.OTSession`) in which ``S`` chooses the
   side off its path, and ``R`` sends the XOR of that level's left and of its right
   children, each masked with its OT key (the GGM punctured PRF as in Ferret and
   SoftSpoken). Both send a random 16-byte nonce first (the session tag).
2. *Extension of ``m`` OTs with choices ``r_j < 16``.* ``R`` expands every leaf to
   ``m`` bits and sets, per block, ``u_b = XOR_x G(k_{b,x})`` and the planes ``V_b[l] =
   XOR_{x: bit l of x} G(k_{b,x})``; it sends ``c_b = u_b XOR C_b(r)`` (60 x m bits)
   and keeps the columns ``t = V``. ``S`` computes ``W_b[l] = XOR_{x != Delta_b} (bit l
   of x XOR Delta_b) G(k_{b,x}) = V_b[l] XOR Delta_{b,l} u_b`` (the unknown leaf has
   coefficient 0) and ``q = W XOR Delta_{b,l} c_b = t XOR C(r) Delta``: KK13's
   correlation with ``s = Delta`` (240 uniform bits, 0 in the dead columns).
3. *Outputs.* As KK13: ``S`` gets ``H(j, q_j XOR (C(v) AND s))`` for the 16 ``v``,
   ``R`` gets ``H(j, t_j)``, with the tweak block numbers :data:`TWEAK_BLOCK_SS16` and
   ``+ 1`` (KK13's are :data:`~.kk13.TWEAK_BLOCK` and ``+ 1``): the two protocols never
   hash under the same tweak, whatever their session tags.

PRGs (as libOTe's SoftSpoken): the GGM tree expands a node ``k`` to its children
``(pi_L(k) XOR k, pi_R(k) XOR k)``, ``pi_L`` and ``pi_R`` AES-128 under two fixed public
keys of their own (:data:`TREE_KEYS`, not the hash's), modelled as random permutations,
as in the GGM trees of emp-ot's Ferret and libOTe's PPRF (60 trees of 15 inner nodes:
an attacker's fixed-key query hits one of under 2^10 secret nodes). Each leaf's stream
is AES-128 in counter mode *keyed by the leaf* (:func:`prg`: 128-bit big-endian counter
blocks from 0, OpenSSL's CTR, as :class:`~ppdm.protocols.ot.crhash.AESCTRStream`), so
the streams rest on AES's multi-key security over the session's 960 leaf keys, not on
one fixed-key permutation at every (leaf, counter) point, where each of ``q`` queries
could hit any of ``L`` counters of ``T`` seeds (``q L T / 2^128``: short of 112 bits
here); tree and streams are different functions, not one function on offset inputs.
The leaves' key schedules are computed once per session (:func:`schedules`: 960 x 176
bytes a direction) for the compiled ``_bits.ss_columns`` (VAES, or AES-NI); without it,
OpenSSL's AES-CTR keyed by each leaf gives the same bytes.

Security (semi-honest, two parties)
-----------------------------------
- ``S`` sees the GGM messages (each level's sums masked by the OT key it did not choose
  on the path side: nothing about ``k_{b, Delta_b}``) and ``c_b``, masked by
  ``G(k_{b, Delta_b})``: nothing about the choices.
- ``R`` sees nothing from ``S`` after the base OTs: ``Delta`` is uniform to it. For
  ``v != r_j``, ``q_j XOR (C(v) AND s) = t_j XOR (C(r_j XOR v) AND s)`` hides the 128
  bits of ``Delta`` in the 32 blocks where ``C(r_j XOR v)`` is 1 (64 in each hashed
  half), as in KK13: the 15 other keys are pseudorandom to it.
- Semi-honest only (no consistency check): the comparison keeps its KOS15-checked IKNP
  leaves in a session with ``malicious_receiver=True``.
- Messages of the wrong type, dtype or shape raise :class:`~ppdm.errors.ProtocolError`
  naming the peer and the step.

Cost per OT after the setup: 7.5 bytes ``R -> S`` (``c``: 60 bits; KK13: 30 bytes), one
message per chunk, one-way. PRG: 16 AES blocks per block and 128 OTs at ``R`` (7.5 per
OT), 15 at ``S``, each under its leaf's key; hashing as KK13 (16 keys of 4 AES calls at
``S``, 4 at ``R``). Chunks are whole PRG blocks (128 OTs). Setup: 240 random OTs and
``60 x 4 x 32`` bytes (7.5 KiB) ``R -> S``, two nonces.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from ppdm.errors import ProtocolError
from ppdm.parties.network import Network
from ppdm.protocols.ot import bits as _bitsmod
from ppdm.protocols.ot.base import base_ot_receive_random, base_ot_send_random
from ppdm.protocols.ot.bits import pack, transpose_bits
from ppdm.protocols.ot.common import check_chunk as _check_chunk
from ppdm.protocols.ot.common import scoped_errors as _scoped_errors
from ppdm.protocols.ot.common import session_tag as _session_tag
from ppdm.protocols.ot.crhash import BLOCK, aes_permute
from ppdm.protocols.ot.kk13 import (
    _HASH_BATCH,
    CHOICES,
    CODE_BITS,
    DEFAULT_CHUNK,
    SESSION_NONCE_BYTES,
    STEP_SESSION,
    STEP_SESSION_REPLY,
    STEP_U,
    TWEAK_BLOCK,
    KK13Receiver,
    KK13Sender,
    compiled_keys,
)

__all__ = [
    "BASE_OTS",
    "BLOCKS",
    "TREE_KEYS",
    "TWEAK_BLOCK_SS16",
    "LeafKeys",
    "SS16Pair",
    "SS16Receiver",
    "SS16Sender",
    "codewords",
    "correlated_both",
    "prg",
    "schedules",
]

#: Blocks of four columns (one bit of ``c`` per block and OT: 7.5 bytes an OT).
BLOCKS = 60
#: Leaves of every block's punctured PRF (``Delta_b < 16``).
LEAVES = 16
DEPTH = 4
#: Base OTs of the set-up: one per block and tree level.
BASE_OTS = BLOCKS * DEPTH
#: The GGM tree's fixed public AES keys of the left and the right children
#: (nothing-up-my-sleeve; not the hash's key).
TREE_KEYS = tuple(
    hashlib.sha256(b"ppdm/ot/softspoken/ggm-" + side).digest()[:BLOCK]
    for side in (b"left", b"right")
)
#: The first of SS16's two tweak block numbers of the hash (KK13 uses ``TWEAK_BLOCK``
#: and ``+ 1``): its hash inputs never share a tweak with KK13's.
TWEAK_BLOCK_SS16 = TWEAK_BLOCK + 2
_ROUNDS = 11  # round keys of one AES-128 key schedule
_OTS_PER_BLOCK = 8 * BLOCK  # OTs per PRG block of a column
STEP_GGM = "ggm"

#: Code position ``p_b`` and the four columns of every block (module docstring).
_POSITION = np.arange(BLOCKS) % 15 + 1
_COLUMNS = (128 * (np.arange(BLOCKS) // 30) + 4 * (np.arange(BLOCKS) % 30))[:, None] + np.arange(4)
_FLAT_COLUMNS = _COLUMNS.reshape(-1)


def _prefix(sender: str, receiver: str) -> str:
    return f"ot/ss16/{sender}>{receiver}"


def session_tag(receiver_nonce: bytes, sender_nonce: bytes) -> int:
    """The session tag of the hash tweaks (a label of its own: never a KK13 or IKNP
    session's tag for the same nonces)."""
    return _session_tag(b"ppdm/ss16/session", receiver_nonce, sender_nonce)


@functools.lru_cache(maxsize=1)
def codewords() -> np.ndarray:
    """The 16 codewords ``C(v)``: ``(16, 32)`` uint8, 256 bits packed little-endian
    (``parity(v AND p_b)`` in the four columns of block ``b``, 0 in the dead ones).

    >>> from ppdm.protocols.ot.bits import unpack
    >>> c = unpack(codewords(), 256).astype(int)
    >>> sorted({int((c[a] ^ c[b]).sum()) for a in range(16) for b in range(a)})
    [128]
    """
    v = np.arange(CHOICES)[:, None]
    parity = np.unpackbits((v & _POSITION[None, :]).astype(np.uint8)[..., None], axis=-1)
    bits = np.zeros((CHOICES, CODE_BITS), dtype=np.uint8)
    bits[:, _FLAT_COLUMNS] = np.repeat(parity.sum(axis=-1) & 1, 4, axis=1)
    out = pack(bits)
    out.flags.writeable = False
    return out


def prg(seeds: np.ndarray, start: int, blocks: int, *, ecb: list[Any] | None = None) -> np.ndarray:
    """The leaves' PRG: blocks ``start .. start + blocks - 1`` of AES-128-CTR keyed by
    every 16-byte seed (``(..., 16)`` uint8; 128-bit big-endian counter blocks, OpenSSL's
    CTR): ``(..., 16 * blocks)`` uint8. ``ecb``: OpenSSL ECB encryptors of the seeds, one
    per seed in order (:meth:`LeafKeys.ecb`), made here when not given."""
    flat = np.ascontiguousarray(seeds, dtype=np.uint8).reshape(-1, BLOCK)
    if ecb is None:
        ecb = [Cipher(algorithms.AES(k.tobytes()), modes.ECB()).encryptor() for k in flat]
    ctr = np.zeros((blocks, 2), dtype=">u8")  # counter blocks: 128-bit big-endian
    ctr[:, 1] = np.arange(start, start + blocks, dtype=np.uint64)
    x = ctr.view(np.uint8).reshape(-1)
    nbytes = BLOCK * blocks
    out = np.empty((len(flat), nbytes + BLOCK), dtype=np.uint8)  # update_into's slack
    for i, enc in enumerate(ecb):
        enc.update_into(x, out[i])
    return out[:, :nbytes].reshape(*np.shape(seeds)[:-1], nbytes)


def schedules(leaves: np.ndarray) -> np.ndarray | None:
    """The AES-128 key schedules of the ``(nb, 16, 16)`` leaves for the compiled kernel,
    round by round within a block: ``(nb, 11, 16, 16)`` uint8 (round ``r`` of leaf ``x``
    at ``[b, r, x]``; 2.75 KiB a block), or ``None`` when it is not built or the CPU has
    no AES instructions."""
    ext = _bitsmod._bits
    if ext is None or not hasattr(ext, "aes_schedules"):
        return None
    keys = np.ascontiguousarray(leaves, dtype=np.uint8)
    if keys.ndim != 3 or keys.shape[1:] != (LEAVES, BLOCK):
        raise ValueError(f"leaves must be (blocks, {LEAVES}, {BLOCK}) uint8")
    out = np.empty((len(keys), LEAVES, _ROUNDS, BLOCK), dtype=np.uint8)
    if not ext.aes_schedules(keys, len(keys) * LEAVES, out):
        return None
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3))


class LeafKeys:
    """A session's leaves as AES-128 keys, prepared once: their key schedules for the
    compiled kernel (:func:`schedules`; ``None`` without it) and, only when that is
    missing, OpenSSL ECB encryptors (:meth:`ecb`)."""

    def __init__(self, leaves: np.ndarray) -> None:
        self.leaves = np.ascontiguousarray(leaves, dtype=np.uint8)
        self.schedules = schedules(self.leaves)
        self._ecb: list[Any] | None = None

    def ecb(self) -> list[Any]:
        """One ECB encryptor per leaf (leaf order), made on first use."""
        if self._ecb is None:
            keys = self.leaves.reshape(-1, BLOCK)
            self._ecb = [Cipher(algorithms.AES(k.tobytes()), modes.ECB()).encryptor() for k in keys]
        return self._ecb


def _planes_numpy(keys: LeafKeys, start: int, blocks: int, punctured: bool) -> np.ndarray:
    g = prg(keys.leaves, start, blocks, ecb=keys.ecb()).view(np.uint64)  # (nb, 16, words)
    out = np.zeros((len(keys.leaves), 5, 2 * blocks), dtype=np.uint64)
    if punctured:
        g[:, 0] = 0
    # Butterfly: after level l the rows are the XORs over the low l + 1 bits of x, and
    # plane l is the XOR of the rows whose bit l is set before the fold.
    for lv in range(4):
        out[:, 1 + lv] = np.bitwise_xor.reduce(g[:, 1::2], axis=1)
        g = g[:, 0::2] ^ g[:, 1::2]
    if not punctured:
        out[:, 0] = g[:, 0]
    return out.view(np.uint8)


def columns(
    leaves: np.ndarray,
    start: int,
    blocks: int,
    out: np.ndarray,
    rows: np.ndarray,
    *,
    u: np.ndarray | None = None,
    corr: np.ndarray | None = None,
    dmask: np.ndarray | None = None,
    keys: LeafKeys | None = None,
) -> None:
    """Expand the ``(nb, 16, 16)`` leaf seeds by ``blocks`` PRG blocks (counters from
    ``start``, :func:`prg`) and fold them (module docstring): plane ``l`` of block ``b``
    (the XOR of the streams of the leaves ``x`` with bit ``l`` set) into row ``rows[4 b
    + l]`` of ``out`` (uint8 rows of ``16 blocks`` bytes), XORed with row ``b`` of
    ``corr`` where bit ``l`` of ``dmask[b]`` is set; ``u`` (``(nb, 16 blocks)``), when
    given, gets the XOR of all 16 streams. Without ``u`` leaf 0 is the unknown
    (punctured) one and is left out. ``keys``: the session's :class:`LeafKeys` of these
    leaves, made here when not given. Compiled (``_bits.ss_columns``, VAES or AES-NI) or
    OpenSSL's AES: the same bytes."""
    nb = len(leaves)
    keys = LeafKeys(leaves) if keys is None else keys
    dm = np.zeros(nb, dtype=np.uint8) if dmask is None else np.ascontiguousarray(dmask, np.uint8)
    ext = _bitsmod._bits
    if ext is not None and hasattr(ext, "aes_schedules") and keys.schedules is not None:
        empty = np.zeros(0, dtype=np.uint8)
        args = (keys.schedules, nb, start, blocks, u is None, rows.astype(np.int32))
        extra = (empty if corr is None else corr, dm, out, empty if u is None else u)
        if ext.ss_columns(*args, *extra):
            return
    p = _planes_numpy(keys, start, blocks, u is None)
    w = p[:, 1:]
    if corr is not None:
        bit = ((dm[:, None] >> np.arange(4)) & 1).astype(bool)
        w ^= np.where(bit[:, :, None], corr[:, None, :], np.uint8(0))
    out[rows] = w.reshape(-1, BLOCK * blocks)
    if u is not None:
        u[:] = p[:, 0]


def planes(leaves: np.ndarray, start: int, blocks: int, *, punctured: bool) -> np.ndarray:
    """The five planes of every block: ``(nb, 5, 16 * blocks)`` uint8, plane 0 the XOR
    of all streams (zero when ``punctured``), plane ``1 + l`` the XOR of those of the
    leaves with bit ``l`` set (:func:`columns`)."""
    nb = len(leaves)
    out = np.zeros((nb, 5, BLOCK * blocks), dtype=np.uint8)
    t = np.zeros((4 * nb, BLOCK * blocks), dtype=np.uint8)
    u = None if punctured else np.zeros((nb, BLOCK * blocks), dtype=np.uint8)
    columns(leaves, start, blocks, t, np.arange(4 * nb), u=u)
    out[:, 1:] = t.reshape(nb, 4, -1)
    if u is not None:
        out[:, 0] = u
    return out


def _pad(n: int) -> int:
    """OTs of a chunk rounded up to whole PRG blocks (128 OTs: one AES block a column)."""
    return -(-n // _OTS_PER_BLOCK) * _OTS_PER_BLOCK


def _check_ss_chunk(chunk: int) -> int:
    """A chunk size rounded down to whole PRG blocks (128 OTs), so that only a call's
    last chunk is padded (``check_chunk`` aligns to the transpose's 64)."""
    chunk = _check_chunk(chunk)
    if chunk < _OTS_PER_BLOCK:
        raise ValueError(f"chunk must be at least {_OTS_PER_BLOCK} OTs")
    return chunk - chunk % _OTS_PER_BLOCK


def _expand(nodes: np.ndarray) -> np.ndarray:
    """GGM expansion: ``(B, w, 16)`` nodes ``k`` -> ``(B, 2 w, 16)`` children
    ``pi_L(k) XOR k``, ``pi_R(k) XOR k`` (left, right; :data:`TREE_KEYS`)."""
    x = np.ascontiguousarray(nodes).reshape(-1, BLOCK)
    out = np.empty((len(x), 2, BLOCK), dtype=np.uint8)
    for side, key in enumerate(TREE_KEYS):
        np.bitwise_xor(aes_permute(x, key=key), x, out=out[:, side])
    return out.reshape(nodes.shape[0], 2 * nodes.shape[1], BLOCK)


def _check_bytes(got: object, peer: str, step: str, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(got, np.ndarray) or got.dtype != np.uint8 or got.shape != shape:
        raise ProtocolError(peer, step, f"expected a uint8 array of shape {shape}")
    return got


def _nonce(got: bytes, peer: str, step: str) -> bytes:
    if len(got) != SESSION_NONCE_BYTES:
        raise ProtocolError(peer, step, f"session nonce must be {SESSION_NONCE_BYTES} bytes")
    return got


class SS16Sender(KK13Sender):
    """The extension sender's side of a SoftSpoken 1-out-of-16 session with ``peer``
    (KK13's keys and methods, :class:`~ppdm.protocols.ot.kk13.KK13Sender`, under SS16's
    own tweak blocks)."""

    tweak_block = TWEAK_BLOCK_SS16

    def __init__(
        self,
        net: Network,
        peer: str,
        delta: np.ndarray,
        leaves: np.ndarray,
        session: int,
        *,
        chunk: int,
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_ss_chunk(chunk)
        self._delta = delta  # (BLOCKS,) below 16
        s_bits = np.zeros(CODE_BITS, dtype=np.uint8)
        s_bits[_FLAT_COLUMNS] = ((delta[:, None] >> np.arange(4)) & 1).reshape(-1)
        self._s_bits = s_bits.astype(bool)
        self._mask_rows = codewords() & pack(s_bits)[None, :]  # C(v) AND s: (16, 32)
        masks = self._mask_rows.view(np.uint64)  # (16, 4)
        self._masks = [np.tile(masks[:, h : h + 2], (_HASH_BATCH, 1)) for h in (0, 2)]
        # Row y of block b is the leaf x = y XOR Delta_b (row 0, the unknown leaf, zero).
        rows = np.arange(LEAVES)[None, :] ^ delta[:, None]
        self._leaves = np.ascontiguousarray(leaves[np.arange(BLOCKS)[:, None], rows])
        self._leaf_keys = LeafKeys(self._leaves)  # key schedules: once a session
        self._dm = np.ascontiguousarray(delta, dtype=np.uint8)  # bit l: Delta_{b,l}
        self._session = session
        self._index = 0
        self._pos = 0  # PRG blocks consumed per stream

    @classmethod
    def setup(  # type: ignore[override]
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        base_ots: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> SS16Sender:
        """Learn 15 of the 16 leaves of every block (as GGM receiver, module docstring)
        with 240 base OTs: Chou-Orlandi, or ``base_ots(choices)``, random OTs of another
        extension that return the chosen 16-byte keys."""
        prefix = _prefix(net.me, peer)
        scoped = net.scoped(prefix)
        theirs = _nonce(scoped.receive(peer, STEP_SESSION, expect=bytes), peer, f"{prefix}/session")
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION_REPLY, mine)
        delta = np.frombuffer(secrets.token_bytes(BLOCKS), np.uint8) & np.uint8(LEAVES - 1)
        # Level j (MSB first) of block b: the path bit of Delta_b; choose the other side.
        path = (delta[:, None] >> (DEPTH - 1 - np.arange(DEPTH))) & 1  # (BLOCKS, DEPTH)
        choices = (1 - path).astype(np.uint8).reshape(-1)
        if base_ots is not None:
            keys = base_ots(choices)
        else:
            with _scoped_errors(prefix):
                keys = base_ot_receive_random(scoped, peer, choices)
        keys = np.asarray(keys)
        if keys.dtype != np.uint8 or keys.shape != (BASE_OTS, BLOCK):
            raise ValueError(f"base OTs must give ({BASE_OTS}, {BLOCK}) uint8 keys")
        ggm = _check_bytes(
            scoped.receive(peer, STEP_GGM, expect=np.ndarray),
            peer,
            f"{prefix}/{STEP_GGM}",
            (BLOCKS, DEPTH, 2, BLOCK),
        )
        rows = np.arange(BLOCKS)
        sums = ggm[rows[:, None], np.arange(DEPTH)[None, :], 1 - path] ^ keys.reshape(
            BLOCKS, DEPTH, BLOCK
        )
        nodes = np.zeros((BLOCKS, 1, BLOCK), dtype=np.uint8)  # the root: unknown
        for j in range(DEPTH):
            hole = (delta >> (DEPTH - j)).astype(np.intp)  # unknown node of level j
            children = _expand(nodes)
            children[rows, 2 * hole] = 0
            children[rows, 2 * hole + 1] = 0
            side = (1 - path[:, j]).astype(np.intp)
            # The off-path child of the hole: that side's sum XOR its known siblings.
            pairs = children.reshape(BLOCKS, -1, 2, BLOCK)
            known = np.bitwise_xor.reduce(pairs[rows, :, side], axis=1)
            children[rows, 2 * hole + side] = sums[:, j] ^ known
            nodes = children
        return cls(scoped, peer, delta, nodes, session_tag(theirs, mine), chunk=chunk)

    def _q_rows(self, n: int) -> tuple[int, np.ndarray]:
        """Receive one ``c`` chunk for ``n`` OTs: (first index, ``q`` rows ``(n, 32)``)."""
        padded = _pad(n)
        nbytes = padded // 8
        c = _check_bytes(
            self.net.receive(self.peer, STEP_U, expect=np.ndarray),
            self.peer,
            f"{_prefix(self.net.me, self.peer)}/{STEP_U}",
            (BLOCKS, nbytes),
        )
        g = np.zeros((CODE_BITS, nbytes), dtype=np.uint8)
        c = np.ascontiguousarray(c)
        blocks = nbytes // BLOCK
        columns(
            self._leaves,
            self._pos,
            blocks,
            g,
            _FLAT_COLUMNS,
            corr=c,
            dmask=self._dm,
            keys=self._leaf_keys,
        )
        self._pos += blocks
        start = self._index
        self._index += padded
        return start, transpose_bits(g)[:n]


class SS16Receiver(KK13Receiver):
    """The extension receiver's side of a SoftSpoken 1-out-of-16 session with ``peer``
    (KK13's methods, :class:`~ppdm.protocols.ot.kk13.KK13Receiver`, under SS16's own
    tweak blocks)."""

    tweak_block = TWEAK_BLOCK_SS16

    def __init__(
        self, net: Network, peer: str, leaves: np.ndarray, session: int, *, chunk: int
    ) -> None:
        self.net = net
        self.peer = peer
        self.chunk = _check_ss_chunk(chunk)
        self._leaves = np.ascontiguousarray(leaves)  # (BLOCKS, 16, 16)
        self._leaf_keys = LeafKeys(self._leaves)  # key schedules: once a session
        self._session = session
        self._index = 0
        self._pos = 0

    @classmethod
    def setup(  # type: ignore[override]
        cls,
        net: Network,
        peer: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        base_ots: Callable[[int], tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> SS16Receiver:
        """Draw the GGM trees and send every level's masked sums (as GGM sender) over
        240 base OTs: Chou-Orlandi, or ``base_ots(240)``, random OTs of another
        extension that return both 16-byte keys of every OT."""
        prefix = _prefix(peer, net.me)
        scoped = net.scoped(prefix)
        mine = secrets.token_bytes(SESSION_NONCE_BYTES)
        scoped.send(peer, STEP_SESSION, mine)
        if base_ots is not None:
            k0, k1 = base_ots(BASE_OTS)
        else:
            with _scoped_errors(prefix):
                k0, k1 = base_ot_send_random(scoped, peer, BASE_OTS)
        nodes = np.frombuffer(secrets.token_bytes(BLOCKS * BLOCK), np.uint8)
        nodes = nodes.reshape(BLOCKS, 1, BLOCK)
        ggm = np.empty((BLOCKS, DEPTH, 2, BLOCK), dtype=np.uint8)
        keys = np.stack([np.asarray(k0), np.asarray(k1)], axis=1).reshape(BLOCKS, DEPTH, 2, BLOCK)
        for j in range(DEPTH):
            nodes = _expand(nodes)
            ggm[:, j, 0] = np.bitwise_xor.reduce(nodes[:, 0::2], axis=1)
            ggm[:, j, 1] = np.bitwise_xor.reduce(nodes[:, 1::2], axis=1)
        scoped.send(peer, STEP_GGM, ggm ^ keys)
        theirs = _nonce(
            scoped.receive(peer, STEP_SESSION_REPLY, expect=bytes),
            peer,
            f"{prefix}/{STEP_SESSION_REPLY}",
        )
        return cls(scoped, peer, nodes, session_tag(mine, theirs), chunk=chunk)

    def _t_rows(self, r: np.ndarray) -> tuple[int, np.ndarray]:
        """Send ``c`` for the choices ``r`` of one chunk: (first index, ``t`` rows)."""
        n = len(r)
        padded = _pad(n)
        nbytes = padded // 8
        bits = np.zeros((4, padded), dtype=np.uint8)
        bits[:, :n] = (r[None, :] >> np.arange(4, dtype=np.uint8)[:, None]) & 1
        packed = pack(bits)  # (4, nbytes): bit k of every choice
        d = np.zeros((CHOICES, nbytes), dtype=np.uint8)  # d[p]: parity(r AND p)
        for a in range(1, CHOICES):
            low = a & -a
            d[a] = d[a ^ low] ^ packed[low.bit_length() - 1]
        u = np.empty((BLOCKS, nbytes), dtype=np.uint8)
        t = np.zeros((CODE_BITS, nbytes), dtype=np.uint8)
        columns(
            self._leaves, self._pos, nbytes // BLOCK, t, _FLAT_COLUMNS, u=u, keys=self._leaf_keys
        )
        self._pos += nbytes // BLOCK
        u ^= d[_POSITION]
        self.net.send(self.peer, STEP_U, u)
        start = self._index
        self._index += padded
        return start, transpose_bits(t)[:n]


class SS16Pair:
    """Both directions of this module's OTs between the two parties of an
    :class:`~ppdm.protocols.ot.extension.OTSession` (its ``ot16``), each set up on first
    use from 240 random IKNP OTs of the session (this party as IKNP receiver for its
    :attr:`sender`, as IKNP sender for its :attr:`receiver`). Both parties must make the
    same calls in the same order."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._sender: SS16Sender | None = None
        self._receiver: SS16Receiver | None = None

    @property
    def sender(self) -> SS16Sender:
        """This party as extension sender (the peer must use its :attr:`receiver`)."""
        if self._sender is None:
            s = self._session
            self._sender = SS16Sender.setup(s.net, s.peer, base_ots=s.receiver.random)
        return self._sender

    @property
    def receiver(self) -> SS16Receiver:
        """This party as extension receiver (the peer must use its :attr:`sender`)."""
        if self._receiver is None:
            s = self._session
            self._receiver = SS16Receiver.setup(s.net, s.peer, base_ots=s.sender.random)
        return self._receiver

    def setup_both(self) -> None:
        """Both IKNP directions, then both of these, in an order both parties agree on
        (the first party sets up its sender first, the second its receiver)."""
        self._session.setup_both()
        if self._session.is_first:
            _ = self.sender
            _ = self.receiver
        else:
            _ = self.receiver
            _ = self.sender


# Correlated OT on the 1-out-of-16 OTs (choices 0 and 1) ---------------------------------

STEP_COT = "cot"
_PAIR = np.array([0, 1])


Lane = tuple[np.dtype, tuple[int, ...], int, int]  # dtype, shape, byte offset, bytes


def _layout(lanes: tuple[np.ndarray, ...]) -> tuple[list[Lane], int]:
    """Where every lane (``(m,)`` or ``(m, w)`` unsigned) sits in an OT's key bytes."""
    out: list[Lane] = []
    off = 0
    for a in lanes:
        if a.ndim not in (1, 2) or a.dtype.type not in (np.uint8, np.uint16, np.uint32, np.uint64):
            raise ValueError("correlations must be 1-D or 2-D unsigned integer arrays")
        if len(a) != len(lanes[0]):
            raise ValueError("every lane needs one row per OT")
        nbytes = a.dtype.itemsize * (1 if a.ndim == 1 else a.shape[1])
        out.append((a.dtype, a.shape[1:], off, nbytes))
        off += nbytes
    if not 0 < off <= BLOCK:
        raise ValueError(f"correlations of 1 to {BLOCK} bytes an OT")
    return out, off


def _split(raw: np.ndarray, layout: list[Lane]) -> list[np.ndarray]:
    """``(m, bytes)`` uint8 -> one array per lane."""
    m = len(raw)
    return [
        np.ascontiguousarray(raw[:, o : o + nb]).view(dt).reshape((m, *sh))
        for dt, sh, o, nb in layout
    ]


def _join(lanes: list[np.ndarray], layout: list[Lane]) -> np.ndarray:
    """One array per lane -> ``(m, bytes)`` uint8 (explicit widths: ``m`` may be 0)."""
    m = len(lanes[0])
    return np.concatenate(
        [
            np.ascontiguousarray(a).view(np.uint8).reshape(m, nb)
            for a, (_, _, _, nb) in zip(lanes, layout, strict=True)
        ],
        axis=1,
    )


def _sender_correlated(
    sender: SS16Sender, delta: tuple[np.ndarray, ...], layout: list[Lane], nbytes: int
) -> list[np.ndarray]:
    """ALSZ13's correlated OT from the keys ``x^0``, ``x^1`` of 1-out-of-16 OTs whose
    receiver chooses 0 or 1: keeps ``x0 = x^0`` and sends ``d = x0 + delta - x^1`` (mod
    ``2^(8 itemsize)`` lane by lane, the lanes' bytes side by side). Only the two keys
    are hashed."""
    m = len(delta[0])
    x0 = [np.empty_like(a) for a in delta]
    d = [np.empty_like(a) for a in delta]
    for o in range(0, m, sender.chunk):
        n = min(sender.chunk, m - o)
        start, q = sender._q_rows(n)
        masks = sender._mask_rows[_PAIR]
        keys = compiled_keys(q, masks, start, sender._session, nbytes, block=sender.tweak_block)
        if keys is None:
            keys = sender._keys(q, start, nbytes)[:, :2]
        k0, k1 = _split(keys[:, 0], layout), _split(keys[:, 1], layout)
        for i, a in enumerate(delta):
            x0[i][o : o + n] = k0[i]
            d[i][o : o + n] = k0[i] + a[o : o + n] - k1[i]
    sender.net.send(sender.peer, STEP_COT, _join(d, layout))
    return x0


def _receiver_finish(
    receiver: SS16Receiver, c: np.ndarray, keys: np.ndarray, layout: list[Lane], nbytes: int
) -> list[np.ndarray]:
    m = len(c)
    d = receiver.net.receive(receiver.peer, STEP_COT, expect=np.ndarray)
    if d.dtype != np.uint8 or d.shape != (m, nbytes):
        raise ProtocolError(
            receiver.peer,
            f"{_prefix(receiver.peer, receiver.net.me)}/{STEP_COT}",
            f"expected corrections of shape {(m, nbytes)} (uint8)",
        )
    out = []
    for x, dd, (dt, sh, _, _) in zip(_split(keys, layout), _split(d, layout), layout, strict=True):
        bit = c.astype(dt) if not sh else c.astype(dt)[:, None]
        out.append(x + bit * dd)
    return out


def correlated_both(
    session: Any, delta: np.ndarray | tuple[np.ndarray, ...], choices: np.ndarray
) -> tuple[Any, Any]:
    """:meth:`~ppdm.protocols.ot.extension.OTSession.correlated_both` on this module's
    OTs (one round trip): this party sends with correlations ``delta`` (``(m,)`` or
    ``(m, w)`` unsigned; or a tuple of such lanes of different dtypes, at most 16 bytes
    an OT in all) and receives with choice bits ``choices``; returns ``(x0 as sender,
    x0' + choice * delta' as receiver)`` (tuples of lanes when ``delta`` is one). An OT
    costs 7.5 bytes of ``u`` and the corrections, where IKNP's cost 16 and the
    corrections."""
    lanes = delta if isinstance(delta, tuple) else (delta,)
    lanes = tuple(np.ascontiguousarray(a) for a in lanes)
    layout, nbytes = _layout(lanes)
    c = np.asarray(choices)
    if c.shape != (len(lanes[0]),) or (c.size and (int(c.min()) < 0 or int(c.max()) > 1)):
        raise ValueError("choices must be one bit per OT")
    if not len(c):  # nothing to send either way (no set-up either)
        x0, got = [a.copy() for a in lanes], [a.copy() for a in lanes]
        return (tuple(x0), tuple(got)) if isinstance(delta, tuple) else (x0[0], got[0])
    pair: SS16Pair = session.ot16
    pair.setup_both()
    keys = pair.receiver.random(c, length=nbytes)  # sends u
    x0 = _sender_correlated(pair.sender, lanes, layout, nbytes)
    got = _receiver_finish(pair.receiver, c, keys, layout, nbytes)
    if isinstance(delta, tuple):
        return tuple(x0), tuple(got)
    return x0[0], got[0]
