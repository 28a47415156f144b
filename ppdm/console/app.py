"""The console's web application (Starlette, Jinja2 templates) and its server thread.

Routes (every page needs a session; every POST a CSRF token and a same-origin request):

========================  ==========================================================
``GET  /login``           the login form (the token from ``console.token``)
``POST /login``           token -> session cookie
``POST /logout``          end the session
``GET  /pending``         jobs waiting for the owner
``POST /pending/decide``  approve or reject one (``PartyNode.owner_decision``, as the CLI)
``GET  /jobs``            job history, filterable (``?state=&job=&initiator=&party=&q=``)
``GET  /jobs/{id}``       one job: its document, ledger entries and per-step figure
``GET  /ledger``          ledger pages, ``ledger verify`` status, heads held of peers
``GET  /policy``          the policy in force; ``POST /policy/check``: the dry run
``GET  /node``            roster, peers' reachability and certificates, limits, load, data
========================  ==========================================================

The server is uvicorn on a socket bound before its thread starts (an address in use is a
:class:`~ppdm.errors.ConfigError` at node start), in a daemon thread of the node process.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ppdm.console import pages
from ppdm.console.security import (
    COOKIE,
    SECURITY_HEADERS,
    Session,
    SessionStore,
    csrf_ok,
    same_origin,
    write_token,
)
from ppdm.errors import ConfigError, PPDMError
from ppdm.service.ledger import ledger_path
from ppdm.service.node import PartyNode

__all__ = ["ConsoleServer", "build_app", "state_dir"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
MAX_FORM_BYTES = 64 << 10


def state_dir(node: PartyNode) -> Path:
    """The node's state folder (where the ledger and ``console.token`` live)."""
    return ledger_path(node.settings).parent


def build_app(node: PartyNode, sessions: SessionStore) -> Starlette:
    """The console of ``node`` for whoever holds ``sessions``' login token."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals["party"] = node.name
    templates.env.globals["consortium"] = node.consortium.name

    def session_of(request: Request) -> Session | None:
        return sessions.get(request.cookies.get(COOKIE))

    def render(
        request: Request, name: str, session: Session, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        ctx.update(csrf=session.csrf, page=name.removesuffix(".html"))
        return templates.TemplateResponse(request, name, ctx, status_code=status)

    Handler = Callable[[Request, Session], Awaitable[Response]]

    def page(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Pages need a session; POSTs a same-origin request and the session's CSRF token."""

        async def wrapped(request: Request) -> Response:
            if request.method == "POST" and not same_origin(
                request.headers, request.headers.get("host")
            ):
                return PlainTextResponse("cross-origin request refused\n", status_code=403)
            session = session_of(request)
            if session is None:
                if request.method == "GET":
                    return RedirectResponse("/login", status_code=303)
                return PlainTextResponse("log in first\n", status_code=403)
            if request.method == "POST":
                if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
                    return PlainTextResponse("form too large\n", status_code=413)
                form = await request.form()
                if not csrf_ok(session, form.get("csrf")):  # type: ignore[arg-type]
                    return PlainTextResponse("missing or wrong CSRF token\n", status_code=403)
            return await fn(request, session)

        return wrapped

    async def login_form(request: Request) -> Response:
        return templates.TemplateResponse(request, "login.html", {"page": "login", "error": ""})

    async def login(request: Request) -> Response:
        if not same_origin(request.headers, request.headers.get("host")):
            return PlainTextResponse("cross-origin request refused\n", status_code=403)
        form = await request.form()
        session = sessions.login(str(form.get("token") or ""))
        if session is None:
            return templates.TemplateResponse(
                request,
                "login.html",
                {"page": "login", "error": "That is not this node's login token."},
                status_code=403,
            )
        resp = RedirectResponse("/pending", status_code=303)
        resp.set_cookie(COOKIE, session.sid, httponly=True, samesite="strict", path="/")
        return resp

    async def logout(request: Request, session: Session) -> Response:
        sessions.logout(session.sid)
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    async def home(request: Request) -> Response:
        return RedirectResponse("/pending", status_code=303)

    async def pending_page(request: Request, session: Session) -> Response:
        jobs = await asyncio.to_thread(pages.pending, node)
        note = request.query_params.get("done", "")
        return render(request, "pending.html", session, jobs=jobs, note=note[:200])

    async def decide(request: Request, session: Session) -> Response:
        form = await request.form()
        job_id = str(form.get("job_id") or "")
        approve = form.get("action") == "approve"
        reason = str(form.get("reason") or "")[:500]
        try:
            await asyncio.to_thread(
                node.owner_decision, job_id, approve=approve, reason=reason, caller=node.name
            )
        except (LookupError, RuntimeError) as exc:
            jobs = await asyncio.to_thread(pages.pending, node)
            return render(
                request, "pending.html", session, status=409, jobs=jobs, note="", error=str(exc)
            )
        verb = "approved" if approve else "rejected"
        return RedirectResponse(f"/pending?done={verb}+{job_id}", status_code=303)

    async def jobs_page(request: Request, session: Session) -> Response:
        keys = ("state", "job", "initiator", "party", "q")
        filters = {k: request.query_params.get(k, "")[:128] for k in keys}
        rows = await asyncio.to_thread(pages.history, node, filters=filters)
        return render(
            request,
            "jobs.html",
            session,
            rows=rows,
            filters=filters,
            states=sorted(set(pages.STATE_NAMES.values())),
            members=list(node.consortium.names),
            job_names=pages.job_names(),
        )

    async def job_page(request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        detail = await asyncio.to_thread(pages.job_detail, node, job_id)
        if detail is None:
            return render(request, "missing.html", session, status=404, job_id=job_id)
        return render(request, "job.html", session, job=detail)

    async def ledger_view(request: Request, session: Session) -> Response:
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        online = request.query_params.get("peers") == "1"
        data = await asyncio.to_thread(pages.ledger_page, node, number, online=online)
        return render(request, "ledger.html", session, ledger=data)

    async def policy_page(request: Request, session: Session) -> Response:
        table = await asyncio.to_thread(pages.policy_table, node)
        return render(request, "policy.html", session, policy=table, check=None, form={})

    async def policy_check(request: Request, session: Session) -> Response:
        form = await request.form()
        table = await asyncio.to_thread(pages.policy_table, node)
        names = table["members"]
        chosen = [str(p) for p in form.getlist("parties") if str(p) in names] or list(names)
        initiator = str(form.get("initiator") or node.name)
        job, params_text = str(form.get("job") or ""), str(form.get("params") or "")
        entered: dict[str, Any] = {
            "job": job,
            "params": params_text,
            "parties": chosen,
            "initiator": initiator,
        }
        try:
            if initiator not in names:
                raise ConfigError(f"initiator {initiator!r} is not on the roster")
            report = await asyncio.to_thread(
                pages.policy_check,
                node,
                job=job,
                params_text=params_text,
                parties=chosen,
                initiator=initiator,
            )
            check: dict[str, Any] = {"ok": True, **report}
        except PPDMError as exc:
            check = {"ok": False, "error": str(exc)}
        return render(request, "policy.html", session, policy=table, check=check, form=entered)

    async def node_page(request: Request, session: Session) -> Response:
        data = await asyncio.to_thread(pages.node_status, node)
        return render(request, "node.html", session, node=data)

    routes = [
        Route("/", home),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", page(logout), methods=["POST"]),
        Route("/pending", page(pending_page), methods=["GET"]),
        Route("/pending/decide", page(decide), methods=["POST"]),
        Route("/jobs", page(jobs_page), methods=["GET"]),
        Route("/jobs/{job_id:str}", page(job_page), methods=["GET"]),
        Route("/ledger", page(ledger_view), methods=["GET"]),
        Route("/policy", page(policy_page), methods=["GET"]),
        Route("/policy/check", page(policy_check), methods=["POST"]),
        Route("/node", page(node_page), methods=["GET"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)])


class SecurityHeaders:
    """ASGI middleware: :data:`~ppdm.console.security.SECURITY_HEADERS` on every response
    (errors and static files included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in SECURITY_HEADERS.items():
                    headers[k] = v
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ConsoleServer:
    """The console of one node: ``start()`` binds ``listen`` (``host:port``), writes a
    fresh login token to the state folder and serves in a daemon thread; ``stop()``."""

    def __init__(self, node: PartyNode, listen: str) -> None:
        import uvicorn

        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, int(port)))
        except OSError as exc:
            self._sock.close()
            raise ConfigError(f"cannot listen on console.listen {listen}: {exc}") from None
        self._sock.listen(64)
        self.token = write_token(state_dir(node))
        self.sessions = SessionStore(self.token)
        self.app = build_app(node, self.sessions)
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            server_header=False,
            proxy_headers=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name="ppdm-console",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()
