"""A privacy budget per data set that persists between queries (``ppdm dp``).

Sequential composition (Seidl 2016, §8 "Composition"; Dwork & Roth 2014, theorem 3.16)
holds over a data set's whole life, not over one process: every query answered from the
same records spends from one total. :class:`BudgetFile` keeps that total and the ledger
of what was spent in a small JSON file, and :meth:`BudgetFile.accountant` opens it as a
:class:`~ppdm.dp.accountant.BudgetAccountant`: the query is charged in memory
first (refused with :class:`~ppdm.dp.accountant.BudgetExceededError`, nothing
spent, when it would exceed the total) and the new charges are written back only when
the query finished. The file's folder is locked (``flock``) for the whole query, so two
concurrent queries cannot both spend the last of a budget (queries on the data sets of
one folder wait for each other).

Where the file lives: ``--budget-file FILE``, else one file per data set in the state
folder, ``$PPDM_STATE_DIR`` or ``$XDG_STATE_HOME/ppdm`` or ``~/.local/state/ppdm``, under
``dp-budgets/`` and named after the data file and a hash of its absolute path. The
folder is created ``0700`` and the file ``0600``; a budget file that others may read or
write is refused (whoever can edit it can reset the budget). The ledger holds the query
kind, column, epsilon and delta of every charge and its time, never a result.

Amounts are exact rationals written as ``"p/q"`` strings, so 0.1 three times fits 0.3.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from ppdm.dp.accountant import BudgetAccountant
from ppdm.errors import ConfigError

__all__ = [
    "DEFAULT_DELTA",
    "DEFAULT_EPSILON",
    "BudgetFile",
    "default_budget_path",
    "state_dir",
]

#: The total a data set gets when its first query creates the budget file.
DEFAULT_EPSILON = Fraction(5)
#: The default total delta (only the Gaussian mechanism spends delta).
DEFAULT_DELTA = Fraction(1, 1_000_000)
FORMAT_VERSION = 1


def state_dir() -> Path:
    """``$PPDM_STATE_DIR``, else ``$XDG_STATE_HOME/ppdm``, else ``~/.local/state/ppdm``."""
    explicit = os.environ.get("PPDM_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "ppdm"


def default_budget_path(data: str | Path) -> Path:
    """The budget file of the data set at ``data`` in the state folder.

    >>> p = default_budget_path("/data/adult.csv")
    >>> p.parent.name, p.name.startswith("adult.csv-"), p.suffix
    ('dp-budgets', True, '.json')
    """
    resolved = Path(data).expanduser().resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    return state_dir() / "dp-budgets" / f"{resolved.name}-{digest}.json"


def _frac(value: object, what: str) -> Fraction:
    try:
        f = Fraction(str(value))
    except (ValueError, ZeroDivisionError) as exc:
        raise ConfigError(f"budget file: {what} is not a number") from exc
    if f < 0:
        raise ConfigError(f"budget file: {what} is negative")
    return f


def _text(f: Fraction) -> str:
    return str(f)  # "1/2", "3": exact


class BudgetFile:
    """The persistent budget of one data set.

    Parameters
    ----------
    path : path
        The budget file (created on first use, owner-only).
    dataset : str, optional
        The data set it belongs to (recorded when the file is created; a file made for
        another data set is refused).

    Examples
    --------
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> budget = BudgetFile(os.path.join(folder, "b.json"), dataset="adult.csv")
    >>> budget.set_total(1)
    >>> with budget.accountant() as acct:
    ...     acct.spend(0.5, label="count")
    >>> with budget.accountant() as acct:  # another process, later: 0.5 is left
    ...     acct.remaining()[0]
    Fraction(1, 2)
    """

    def __init__(self, path: str | Path, *, dataset: str | None = None) -> None:
        self.path = Path(path)
        self.dataset = dataset

    # -- reading and writing ----------------------------------------------------------

    def _check_permissions(self) -> None:
        st = self.path.stat()
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"budget file {self.path} is readable or writable by others; "
                f"make it owner-only (chmod 600 {self.path})"
            )
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise ConfigError(f"budget file {self.path} belongs to another user")

    def _fresh(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "dataset": self.dataset,
            "epsilon_budget": _text(DEFAULT_EPSILON),
            "delta_budget": _text(DEFAULT_DELTA),
            "ledger": [],
        }

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return self._fresh()
        self._check_permissions()
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"budget file {self.path} cannot be read: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            raise ConfigError(f"budget file {self.path} is not a ppdm budget file")
        if not isinstance(doc.get("ledger"), list):
            raise ConfigError(f"budget file {self.path}: the ledger is not a list")
        if self.dataset and doc.get("dataset") and doc["dataset"] != self.dataset:
            raise ConfigError(
                f"budget file {self.path} belongs to another data set ({doc['dataset']})"
            )
        return doc

    def _save(self, doc: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # The folder is locked, not the file: the file is replaced on every write, and a
        # lock file would be one more file (a failed query leaves nothing behind).
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def _totals(doc: dict[str, Any]) -> tuple[Fraction, Fraction]:
        return (
            _frac(doc.get("epsilon_budget"), "epsilon_budget"),
            _frac(doc.get("delta_budget"), "delta_budget"),
        )

    @staticmethod
    def _spent(doc: dict[str, Any]) -> tuple[Fraction, Fraction]:
        eps = sum((_frac(c.get("epsilon"), "a charge") for c in doc["ledger"]), Fraction(0))
        delta = sum((_frac(c.get("delta", 0), "a charge") for c in doc["ledger"]), Fraction(0))
        return eps, delta

    # -- the public interface ---------------------------------------------------------

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def set_total(
        self, epsilon: float | Fraction | str, delta: float | Fraction | str | None = None
    ) -> None:
        """Set the data set's total budget (not below what was spent already)."""
        eps = _frac(epsilon, "the epsilon budget")
        if eps <= 0:
            raise ConfigError("the epsilon budget must be positive")
        with self._locked():
            doc = self._load()
            spent_e, spent_d = self._spent(doc)
            new_d = self._totals(doc)[1] if delta is None else _frac(delta, "the delta budget")
            if new_d >= 1:
                raise ConfigError("the delta budget must be below 1")
            if eps < spent_e or new_d < spent_d:
                raise ConfigError(
                    f"the data set has already spent epsilon={float(spent_e):g}, "
                    f"delta={float(spent_d):g}; a total below that is not possible"
                )
            doc["epsilon_budget"] = _text(eps)
            doc["delta_budget"] = _text(new_d)
            self._save(doc)

    @contextlib.contextmanager
    def accountant(
        self, *, query: str = "query", column: str | None = None
    ) -> Iterator[BudgetAccountant]:
        """A :class:`BudgetAccountant` holding this data set's total and past charges.

        The file stays locked until the block ends; the charges made inside are written
        back when it ends without an exception (a query that failed released nothing).
        """
        with self._locked():
            doc = self._load()
            total_e, total_d = self._totals(doc)
            acct = BudgetAccountant(total_e, total_d)
            past = len(doc["ledger"])
            for c in doc["ledger"]:  # replay: the totals were checked when they were spent
                acct.spend(
                    _frac(c["epsilon"], "a charge"),
                    _frac(c.get("delta", 0), "a charge"),
                    label=str(c.get("query", "query")),
                )
            yield acct
            now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
            for charge in acct.ledger[past:]:
                doc["ledger"].append(
                    {
                        "query": query,
                        "column": column,
                        "label": charge.label,
                        "epsilon": _text(charge.epsilon),
                        "delta": _text(charge.delta),
                        "time": now,
                    }
                )
            if len(acct.ledger) > past or not self.path.exists():
                self._save(doc)

    def summary(self) -> dict[str, Any]:
        """Total, spent, remaining and the ledger (floats for display)."""
        with self._locked():
            doc = self._load()
        total_e, total_d = self._totals(doc)
        spent_e, spent_d = self._spent(doc)
        return {
            "budget_file": str(self.path),
            "dataset": doc.get("dataset"),
            "created": self.path.exists(),
            "epsilon_budget": float(total_e),
            "delta_budget": float(total_d),
            "epsilon_spent": float(spent_e),
            "delta_spent": float(spent_d),
            "epsilon_remaining": float(total_e - spent_e),
            "delta_remaining": float(total_d - spent_d),
            "ledger": [
                {
                    "query": c.get("query"),
                    "column": c.get("column"),
                    "epsilon": float(_frac(c.get("epsilon"), "a charge")),
                    "delta": float(_frac(c.get("delta", 0), "a charge")),
                    "time": c.get("time"),
                }
                for c in doc["ledger"]
            ],
        }
