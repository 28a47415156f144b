"""Who may use the console: the owner's login token, sessions, CSRF tokens, headers.

The node writes a fresh login token (32 random bytes from :mod:`secrets`, URL-safe text)
to ``console.token`` in its state folder at every start, readable by the owner only
(mode 0600, in the 0700 state folder the ledger lives in). Whoever can read that file is
the owner; a peer's certificate or another member's token gives no access. The token is
exchanged once for a session cookie (``HttpOnly``, ``SameSite=Strict``, path ``/``); the
session holds its own CSRF token, which every form carries and every POST must echo.
A POST whose ``Origin`` or ``Sec-Fetch-Site`` shows another origin is refused before the
token is even read (another port on 127.0.0.1 is the same *site* but not the same origin,
so ``SameSite`` alone would not stop it).
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "COOKIE",
    "SECURITY_HEADERS",
    "Session",
    "SessionStore",
    "read_token",
    "write_token",
]

COOKIE = "ppdm_console"
TOKEN_FILE = "console.token"
SESSION_IDLE_S = 30 * 60.0
MAX_SESSIONS = 64
LOGIN_FAILURES_PER_MINUTE = 10

#: Every response carries these (no inline script or style, no framing, no referrer).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def write_token(state_dir: Path) -> str:
    """Write a fresh login token to ``state_dir/console.token`` (mode 0600) and return
    it; the previous token stops working."""
    state_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    path = state_dir / TOKEN_FILE
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


def read_token(state_dir: Path) -> str:
    """The login token the node wrote to ``state_dir`` (for the owner's tools and tests)."""
    return (state_dir / TOKEN_FILE).read_text().strip()


@dataclass
class Session:
    sid: str
    csrf: str
    last: float = field(default_factory=time.monotonic)


class SessionStore:
    """Sessions of one console (in memory: a node restart logs everybody out)."""

    def __init__(self, token: str) -> None:
        self._token = token
        self._sessions: dict[str, Session] = {}
        self._failures: list[float] = []
        self._lock = threading.Lock()

    def login(self, offered: str) -> Session | None:
        """A new session if ``offered`` is the login token, else ``None`` (and, after
        :data:`LOGIN_FAILURES_PER_MINUTE` failures in a minute, ``None`` for every try
        until the minute has passed)."""
        now = time.monotonic()
        with self._lock:
            self._failures = [t for t in self._failures if now - t < 60.0]
            if len(self._failures) >= LOGIN_FAILURES_PER_MINUTE:
                return None
            if not hmac.compare_digest(offered.strip().encode(), self._token.encode()):
                self._failures.append(now)
                return None
            self._expire(now)
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.last)
                del self._sessions[oldest.sid]
            session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now)
            self._sessions[session.sid] = session
            return session

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            session = self._sessions.get(sid)
            if session is not None:
                session.last = now
            return session

    def logout(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)

    def _expire(self, now: float) -> None:
        for sid in [s for s, v in self._sessions.items() if now - v.last > SESSION_IDLE_S]:
            del self._sessions[sid]


def csrf_ok(session: Session, offered: str | None) -> bool:
    """Whether a form's CSRF field matches the session's token."""
    return bool(offered) and hmac.compare_digest(str(offered).encode(), session.csrf.encode())


def same_origin(headers: Mapping[str, str], host: str | None) -> bool:
    """``False`` if the request says it comes from another origin.

    Browsers that send ``Sec-Fetch-Site`` (every current one) are judged by it alone:
    ``same-origin`` or ``none`` (typed by the user). Otherwise an ``Origin`` header must
    name this host. (Under ``Referrer-Policy: no-referrer`` a browser's own same-origin
    form posts carry ``Origin: null``, so ``null`` only counts with ``Sec-Fetch-Site``.)
    A request with neither header (a command-line client) passes this check; it still
    needs the session cookie and the CSRF token."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return True
    return host is not None and origin in (f"http://{host}", f"https://{host}")
