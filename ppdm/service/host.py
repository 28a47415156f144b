"""What a node holds on its host: its party's state folder (one node per party:
:class:`StateLock`), its listen port (another holder is named at once:
:func:`check_port_free`), and the memory its jobs free, given back to the system
(:func:`tune_allocator`, :func:`trim_heap`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import ipaddress
import os
import socket
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

NODE_LOCK_NAME = "node.lock"  # in the party's state folder, held while a node runs


# One node per party ---------------------------------------------------------------------


class StateLock:
    """An exclusive ``flock`` on ``node.lock`` in a party's state folder, held for the
    node's lifetime: a second node of the same party (same settings, or another
    settings file naming the same state folder) fails at once instead of appending to
    the same ledger. The lock file holds the holder's pid (for the refusal's message);
    the kernel drops the lock when the process ends, however it ends."""

    def __init__(self, folder: Path, party: str) -> None:
        self._fd: int | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / NODE_LOCK_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise ConfigError(
                f"party {party!r} is already served by {holder} "
                f"(it holds {self.path}); stop that node first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (the node stopped)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.release()


def _lock_holder(fd: int) -> str:
    """``process PID`` from a lock file held by another node (or a vaguer phrase)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).split()[0])
        return f"process {pid}"
    return "another process"


def port_holder(port: int) -> str:
    """``process PID (NAME)`` listening on TCP ``port`` on this host, read from
    ``/proc`` (only processes this user may inspect); ``another process`` otherwise."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)
            for line in f:
                cols = line.split()
                # local address "HEX_IP:HEX_PORT", state 0A = LISTEN
                if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    if inodes:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        name = Path(f"/proc/{pid}/comm").read_text().strip()
                        return f"process {pid} ({name})"
    return "another process"


def check_port_free(listen: str) -> None:
    """Raise :class:`ConfigError` naming the holder if another process (a node of this
    or another party, or anything else) listens on ``listen``'s port, before gRPC binds
    it (exclusively: ``grpc.so_reuseport`` is off, so a race would fail there too)."""
    host, _, port_text = listen.rpartition(":")
    if not port_text.isdigit() or int(port_text) == 0:
        return
    port = int(port_text)
    name = host.strip("[]") or None
    query: str | bytes | None = name
    if name:  # an address literal is its own ASCII form: no IDNA codec (~2 ms of a start)
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(name)
            query = name.encode()
    try:
        addresses = socket.getaddrinfo(query, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # gRPC reports an address it cannot resolve
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ConfigError(
                        f"cannot listen on {listen}: the port is held by {port_holder(port)}"
                    ) from None


# Memory given back ---------------------------------------------------------------------

_M_MMAP_THRESHOLD = -3  # <malloc.h>
#: Blocks at least this large get their own mapping, unmapped when freed: a node's frames
#: (up to 2 MiB each) go back to the system when their stream or job ends instead of
#: staying in the heap (glibc raises its threshold as large blocks are freed, after which
#: a flood of frames would stay resident after the streams ended).
MMAP_THRESHOLD_BYTES = 256 << 10


@functools.cache
def _glibc() -> Any:
    """The C library, once (a new ``CDLL`` per call would leak a ctypes class each);
    ``ctypes`` is imported here, once the node serves (~1% of a start's instructions)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim"):
            return libc
    return None


def tune_allocator() -> None:
    """Make this process's large buffers return to the system when freed (glibc; a no-op
    elsewhere). What ``ppdm party serve`` does once its node serves (before its first
    job's frames, which are what it is for)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
