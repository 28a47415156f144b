"""The job registry and what a job function gets to see.

A job function has the signature ``run(net, params, ctx) -> dict`` where ``net`` is the
party's :class:`~ppdm.parties.network.Network` for this job, ``params`` the public job
parameters (the same at every party: JSON-like values only) and ``ctx`` the party's
:class:`PartyContext`: its private inputs and data paths, which never leave the party.
The returned dict must be JSON-serializable; it becomes the job's result at that party.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ppdm.errors import ConfigError
from ppdm.progress import Progress

if TYPE_CHECKING:
    from ppdm.parties.network import Network

__all__ = ["JobSpec", "PartyContext", "get_job", "job_names", "register_job"]


@dataclass
class PartyContext:
    """A party's private side of a job: its name, settings and data locations.

    ``settings`` is the party's own settings file as a dict (``[inputs]`` holds sample
    private inputs, ``[data]`` data file paths relative to ``base_dir``).
    """

    name: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path.cwd)
    progress: Progress | None = None

    def private_input(self, key: str) -> Any:
        """The party's private input ``key`` from the ``[inputs]`` table of its settings."""
        inputs = self.settings.get("inputs", {})
        if key not in inputs:
            raise ConfigError(
                f"party {self.name!r} has no private input {key!r} in the [inputs] table "
                "of its settings file"
            )
        return inputs[key]

    def data_path(self, key: str) -> Path:
        """Path of the party's data file ``key`` from the ``[data]`` table."""
        data = self.settings.get("data", {})
        if key not in data:
            raise ConfigError(
                f"party {self.name!r} has no data file {key!r} in the [data] table of its "
                "settings file"
            )
        path = Path(data[key])
        return path if path.is_absolute() else (self.base_dir / path)


JobFunction = Callable[["Network", Mapping[str, Any], PartyContext], dict[str, Any]]


@dataclass(frozen=True)
class JobSpec:
    """A named job: its function, a one-line summary and its parameter defaults."""

    name: str
    summary: str
    run: JobFunction
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def params(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Defaults overlaid with ``given``; unknown names are a :class:`ConfigError`."""
        merged = dict(self.defaults)
        for key, value in (given or {}).items():
            if key not in self.defaults:
                known = ", ".join(sorted(self.defaults)) or "none"
                raise ConfigError(f"job {self.name!r} has no parameter {key!r} (known: {known})")
            merged[key] = value
        return merged


_REGISTRY: dict[str, JobSpec] = {}
_loaded = False

#: The module of :mod:`ppdm.jobs` that registers each built-in job: :func:`get_job`
#: imports only that one (a node running ``secure-sum`` does not import the mining or
#: Paillier stacks); :func:`job_names` imports them all. A job missing here is still
#: found (every module is imported then); a test checks the table against what each
#: module registers.
BUILTIN_JOBS: Mapping[str, str] = {
    "argmin": "ot",
    "assoc": "mining",
    "base-ot": "ot",
    "comparison": "ot",
    "dot-product-ot": "ot",
    "intersection-cardinality": "set_ops",
    "kmeans": "mining",
    "ot-extension": "ot",
    "paillier-dot-product": "paillier",
    "psi-align": "psi",
    "ring-echo": "diagnostics",
    "secure-sum": "secure_sum",
    "secure-sum-shared": "paillier",
    "set-union": "set_ops",
    "stream": "diagnostics",
}


def register_job(spec: JobSpec) -> JobSpec:
    """Add ``spec`` to the registry (a later registration of the same name replaces it)."""
    _REGISTRY[spec.name] = spec
    return spec


def _load_builtins() -> None:
    """Import every module of :mod:`ppdm.jobs`; each registers its jobs at import."""
    global _loaded
    if not _loaded:
        # The package's folder, not ``ppdm.jobs.__path__``: the registry must not import
        # its own package (the package imports the registry).
        for info in pkgutil.iter_modules([str(Path(__file__).resolve().parent)]):
            if info.name not in ("registry",) and not info.name.startswith("_"):
                importlib.import_module(f"ppdm.jobs.{info.name}")
        _loaded = True


def get_job(name: str) -> JobSpec:
    """The job called ``name``; :class:`ConfigError` naming the known jobs otherwise."""
    module = BUILTIN_JOBS.get(name)
    if module is not None:  # registers the job at its first import, as _load_builtins would
        importlib.import_module(f"ppdm.jobs.{module}")
    if name not in _REGISTRY:
        _load_builtins()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown job {name!r}; known jobs: {', '.join(job_names())}")
    return _REGISTRY[name]


def job_names() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)
