"""Optional dependencies: which extra installs what, and the one-line error when it is
missing (issue 25, item 7).

A plain ``pip install ppdm`` is the core a party node needs: the protocols, the party
network, the job service, the ``ppdm`` command and the miners over FIMI files (numpy,
pandas, gRPC, protobuf, cryptography, gmpy2 and a few small packages). A feature that
needs a heavy library imports it through :func:`require`, which names the extra that
installs it:

=========== ================================ ================================================
extra       installs                         needed by
=========== ================================ ================================================
``files``   duckdb, pyarrow                  CSV and Parquet data sources (``[data]`` files)
``sql``     psycopg, duckdb, pyarrow         PostgreSQL and SQLite sources
``stats``   scipy                            ``ppdm.perturb``, ``ppdm.risk``, the Gaussian
                                             mechanism, sparse counting of wide data sets
``hiding``  scipy, highspy                   ``ppdm.hiding`` (rule hiding, query auditing)
``plot``    matplotlib                       the plots of ``ppdm evaluate`` and ``--plot``
``console`` starlette, jinja2, uvicorn       the data officer's web console
``spark``   pyspark                          ``[compute] engine = "spark"``
``all``     every extra above
=========== ================================ ================================================

    >>> require("math", "stats", "a test").sqrt(4.0)
    2.0
    >>> require("surely_not_installed_xyz", "stats", "ppdm.risk")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ppdm.extras.MissingExtra: ppdm.risk needs surely_not_installed_xyz, ...: pip install 'ppdm[stats]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ppdm.errors import ConfigError

__all__ = ["EXTRAS", "MissingExtra", "require"]

#: extra -> the top-level modules it installs (``pyproject.toml`` is the truth; a test
#: checks the two agree).
EXTRAS: dict[str, tuple[str, ...]] = {
    "files": ("duckdb", "pyarrow"),
    "sql": ("psycopg", "duckdb", "pyarrow"),
    "stats": ("scipy",),
    "hiding": ("scipy", "highspy"),
    "plot": ("matplotlib",),
    "console": ("starlette", "jinja2", "uvicorn"),
    "spark": ("pyspark",),
}


class MissingExtra(ConfigError):
    """A feature's optional dependency is not installed; the message names the extra."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f"{feature} needs {module}, which is not installed: pip install 'ppdm[{extra}]'"
        )


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (dotted names allowed) for ``feature``, or raise
    :class:`MissingExtra` naming ``extra`` when its top-level package is missing. An
    import that fails for another reason (a broken install) propagates unchanged."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] == top:
            raise MissingExtra(top, extra, feature) from None
        raise
