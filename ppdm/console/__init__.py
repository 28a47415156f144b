"""The data officer's console: a web page at each node, for its own owner only.

Pending approvals (approve or reject with a reason, recorded in the ledger as ``ppdm job
approve``/``reject`` record them), the job history with each job's document and per-step
costs, the ledger with its verification, the policy in force with a dry-run form, and the
roster, peers and data sources. Server-rendered (Starlette and Jinja2, no script), served
by uvicorn in a thread of the node when the settings have a ``[console]`` table::

    [console]
    listen = "127.0.0.1:9180"   # default; loopback only unless you say otherwise

At every start the node writes a fresh login token, owner-only (0600), to
``console.token`` in its state folder; see :mod:`ppdm.console.security` and
``docs/console.md``. Install with the ``console`` extra (``pip install 'ppdm[console]'``).

This package sits above :mod:`ppdm.service`: it reads the node's pending jobs, ledger,
policy and roster and calls the same node methods as the owner's CLI commands. The node
does not import it: ``ppdm party serve`` passes :func:`console_addon` to
:func:`ppdm.service.node.serve` when the settings have ``[console]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ppdm.console.app import ConsoleServer
    from ppdm.service.node import PartyNode

__all__ = ["DEFAULT_LISTEN", "console_addon", "start_console"]

DEFAULT_LISTEN = "127.0.0.1:9180"


def start_console(node: PartyNode, listen: str) -> ConsoleServer:
    """Start the console of ``node`` on ``listen`` (``host:port``); stop it with
    ``.stop()``. :class:`~ppdm.errors.ConfigError` if the extra is not installed or the
    address cannot be bound."""
    try:
        from ppdm.console.app import ConsoleServer
    except ImportError as exc:
        from ppdm.errors import ConfigError

        raise ConfigError(
            f"[console] needs the console extra (pip install 'ppdm[console]'): {exc}"
        ) from None
    server = ConsoleServer(node, listen)
    server.start()
    return server


def console_addon(node: PartyNode) -> ConsoleServer:
    """A :class:`~ppdm.service.node.PartyNode` add-on: the console on the node's
    ``[console] listen`` address, started with the node and stopped with it."""
    from ppdm.errors import ConfigError

    if node.settings.console_listen is None:
        raise ConfigError(f"{node.settings.path}: no [console] table")
    return start_console(node, node.settings.console_listen)
