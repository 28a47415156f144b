"""Argument checks shared by every command, run before any work or any output is made.

Three kinds of tool, so that a command checks a class of bad input once rather than one
example at a time (issue 23, item 8):

* **argparse types** (:func:`finite_float`, :func:`bounded_int`, :func:`fraction`,
  :func:`seconds`, :func:`host_name`): a bad number or name is an argument error of the
  parser, reported before the handler runs, like a missing option;
* **input files** (:func:`check_input_file`, run by :func:`check_arguments` on every
  option that names an input): a regular, readable file -- not a folder, a FIFO (opening
  one blocks until a writer comes) or a device -- and, for text inputs, read in bounded
  pieces up to :data:`MAX_LINE_BYTES` to refuse a binary file, a file that is not UTF-8 or
  a first line longer than that (a 3 GB file without a newline) before a reader loads it
  whole;
* **outputs written whole or not at all** (:func:`atomic_file`, :func:`atomic_folder`):
  the command writes to a temporary name next to the output and renames it only on
  success, so a refused or failed run leaves no file and no empty folder behind.

:func:`check_support_budget` bounds what a minimum support lets a miner produce: on
the pooled data, more than :data:`MAX_FREQUENT_ITEMSETS` frequent itemsets is refused
before any party starts (``--min-support 1e-9`` made every subset of every basket
frequent: a hang, then gigabytes).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ppdm.errors import ConfigError

__all__ = [
    "INPUT_OPTIONS",
    "MAX_FREQUENT_ITEMSETS",
    "MAX_LINE_BYTES",
    "atomic_file",
    "atomic_folder",
    "bounded_int",
    "check_address",
    "check_arguments",
    "check_csv_header",
    "check_input_file",
    "check_support_budget",
    "finite_float",
    "fraction",
    "host_name",
    "seconds",
]

#: Longest first line a text input may have (bytes). Read in pieces of :data:`_PIECE`.
MAX_LINE_BYTES = 16 << 20
_PIECE = 1 << 20
#: Most frequent itemsets a minimum support may produce on the pooled data of a command.
MAX_FREQUENT_ITEMSETS = 250_000
#: Longest timeout in seconds any option accepts (a day).
MAX_SECONDS = 86_400.0

#: Options that name an input file: ``dest -> text`` (``False``: a binary file such as
#: a ledger database or a Parquet table, checked for kind and readability only).
INPUT_OPTIONS: dict[str, bool] = {
    "input": True,
    "transactions": True,
    "population": True,
    "public": True,
    "settings": True,
    "roster": True,
    "file": True,
    "ledger": False,
}
_BINARY_SUFFIXES = (".parquet", ".pq", ".sqlite", ".db")


# -- argparse types -----------------------------------------------------------------------


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def finite_float(
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Callable[[str], float]:
    """An argparse type: a finite float in ``[lo, hi]`` (``lo_open``/``hi_open``: the
    bound itself excluded).

    >>> finite_float(0, lo_open=True)("2.5")
    2.5
    >>> finite_float(0, 1)("1e308")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be in [0, 1], not 1e308
    """
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    low = "-inf" if lo is None else f"{lo:g}"
    high = "inf" if hi is None else f"{hi:g}"
    where = f"{left}{low}, {high}{right}"

    def parse(text: str) -> float:
        value = _number(text)
        low_bad = lo is not None and (value <= lo if lo_open else value < lo)
        high_bad = hi is not None and (value >= hi if hi_open else value > hi)
        if low_bad or high_bad:
            raise argparse.ArgumentTypeError(f"must be in {where}, not {text}")
        return value

    parse.__name__ = "number"
    return parse


def bounded_int(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[lo, hi]``.

    >>> bounded_int(1, 10)("3")
    3
    """

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be in [{lo:,}, {hi:,}], not {text}")
        return value

    parse.__name__ = "integer"
    return parse


def fraction(*, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a fraction in ``(0, 1]`` (``zero=True``: ``[0, 1]``)."""
    return finite_float(0.0, 1.0, lo_open=not zero)


def seconds(text: str) -> float:
    """An argparse type: a timeout, positive and at most a day.

    >>> seconds("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be in (0, 86400], not 0
    """
    return finite_float(0.0, MAX_SECONDS, lo_open=True)(text)


_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def host_name(text: str) -> str:
    """An argparse type: a host name (DNS labels), an IPv4 or a bracket-free IPv6 address.

    >>> host_name("node-1.example.org")
    'node-1.example.org'
    >>> host_name("bad host!")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: not a host name or IP address: 'bad host!'
    """
    import ipaddress

    value = text.strip()
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    labels = value.rstrip(".").split(".")
    if not value or len(value) > 253 or not all(_LABEL.match(p) for p in labels):
        raise argparse.ArgumentTypeError(f"not a host name or IP address: {text!r}")
    if labels[-1].isdigit():  # 300.1.2.3: not an address, not a name
        raise argparse.ArgumentTypeError(f"not a host name or IP address: {text!r}")
    return value


# -- input files ---------------------------------------------------------------------------


def check_input_file(path: str | os.PathLike[str], option: str, *, text: bool = True) -> None:
    """:class:`ConfigError` unless ``path`` is a readable regular file; for ``text``
    inputs also unless its first :data:`MAX_LINE_BYTES` bytes (read in pieces) are UTF-8
    without NUL bytes and hold a line break when the file is longer than that."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(f"{option}: file not found: {p}") from None
    except PermissionError:
        raise ConfigError(f"{option}: permission denied: {p}") from None
    except OSError as exc:
        raise ConfigError(f"{option}: cannot read {p} ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{option}: {p} is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise ConfigError(f"{option}: {p} is {kind} (give a regular file)")
    if not os.access(p, os.R_OK):
        raise ConfigError(f"{option}: permission denied: {p}")
    if not text or p.suffix.lower() in _BINARY_SUFFIXES:
        return
    try:
        with p.open("rb") as fh:
            _check_text_head(fh, p, option, st.st_size)
    except PermissionError:
        raise ConfigError(f"{option}: permission denied: {p}") from None


def _check_text_head(fh: Any, p: Path, option: str, size: int) -> None:
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    read = 0
    while read < MAX_LINE_BYTES:
        piece = fh.read(min(_PIECE, MAX_LINE_BYTES - read))
        if not piece:
            return
        if b"\0" in piece:
            raise ConfigError(f"{option}: {p} is not a text file (it holds NUL bytes)")
        try:
            decoder.decode(piece)
        except UnicodeDecodeError as exc:
            where = read + exc.start
            raise ConfigError(
                f"{option}: {p} is not UTF-8 text (byte 0x{piece[exc.start]:02x} at offset {where})"
            ) from None
        if b"\n" in piece:
            return
        read += len(piece)
    if size > MAX_LINE_BYTES:
        raise ConfigError(
            f"{option}: the first line of {p} is longer than {MAX_LINE_BYTES >> 20} MiB "
            "(no line break): not a line-oriented text file"
        )


#: Options whose value is a duration in seconds, wherever they appear.
DURATION_OPTIONS = ("timeout", "time_limit")
#: Options whose value is a count that must not be negative, wherever they appear.
COUNT_OPTIONS = ("limit", "since", "top", "queries")
_CSV_SUFFIXES = (".csv", ".tsv", ".txt")


def check_arguments(args: argparse.Namespace) -> None:
    """The checks of this module every command shares (called before its handler):

    * each option of :data:`INPUT_OPTIONS` that is set names a readable regular input
      file (:func:`check_input_file`), and a CSV input has no two columns of one name;
    * every duration (:data:`DURATION_OPTIONS`) is in ``(0, MAX_SECONDS]`` (a timeout of
      0 reported every node down), every count (:data:`COUNT_OPTIONS`) is >= 0;
    * a ``--host`` is a host name or address, an ``--address`` a ``HOST:PORT``, a port
      in ``[1, 65535]``.
    """
    values = vars(args)
    for dest, text in INPUT_OPTIONS.items():
        value = values.get(dest)
        if isinstance(value, str) and value:
            option = f"--{dest}" if dest != "file" else "file"
            check_input_file(value, option, text=text)
            sep = values.get("sep")
            if (
                dest in ("input", "population", "public")
                and Path(value).suffix.lower() in _CSV_SUFFIXES
                and isinstance(sep, str)
                and len(sep) == 1
                and values.get("format") not in ("fimi", "basket")
                and "min_support" not in values  # association rules read baskets, no header
            ):
                check_csv_header(value, option, sep=sep)
    inputs = values.get("inputs")  # comma-separated input files (simulate psi-align)
    if isinstance(inputs, str):
        for part in (x.strip() for x in inputs.split(",")):
            if part:
                check_input_file(part, "--inputs")
    for dest in DURATION_OPTIONS:
        value = values.get(dest)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
            raise ConfigError(
                f"--{dest.replace('_', '-')} must be a number of seconds in "
                f"(0, {MAX_SECONDS:g}], not {value:g}"
            )
    for dest in COUNT_OPTIONS:
        value = values.get(dest)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ConfigError(f"--{dest} must be >= 0, not {value}")
    host = values.get("host")
    if isinstance(host, str):
        _to_config(host_name, host, "--host")
    address = values.get("address")
    if isinstance(address, str):
        check_address(address, "--address")
    for dest in ("port", "base_port"):
        port = values.get(dest)
        if isinstance(port, int) and not isinstance(port, bool) and not 1 <= port <= 65535:
            raise ConfigError(f"--{dest.replace('_', '-')} must be in [1, 65535], not {port}")


def _to_config(parse: Callable[[str], Any], text: str, option: str) -> Any:
    try:
        return parse(text)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def check_address(text: str, option: str) -> None:
    """:class:`ConfigError` unless ``text`` is ``HOST:PORT`` (IPv6 in brackets)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError(f"{option}: not HOST:PORT with a port in [1, 65535]: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    _to_config(host_name, host, option)


def check_csv_header(path: str | os.PathLike[str], option: str, *, sep: str) -> None:
    """:class:`ConfigError` if the header of the CSV ``path`` (its first line, bounded by
    :func:`check_input_file`) names a column twice (pandas would rename the second
    ``age`` to ``age.1`` and the command would go on silently)."""
    import csv

    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        line = fh.readline(MAX_LINE_BYTES)
    if not line.strip():
        return
    names = [c.strip() for c in next(csv.reader([line], delimiter=sep), [])]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{option}: the header of {path} names the column {name!r} twice")
        seen.add(name)


# -- outputs ------------------------------------------------------------------------------


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` when the block ends
    without an exception, else remove it (no partial or empty output is ever seen)."""
    import tempfile  # here: the commands that only read (a node's start) go without it

    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


@contextmanager
def atomic_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder next to ``path``; on success its files move into
    ``path`` (created then), else it is removed, so a refused run leaves no folder."""
    import tempfile

    target = Path(path)
    parent = target.resolve().parent
    if not parent.is_dir():
        raise ConfigError(f"--out: folder {parent} does not exist")
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out: {target} is a file, not a folder")
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=parent))
    try:
        yield tmp
        if not target.exists():
            os.replace(tmp, target)
            return
        for entry in sorted(tmp.iterdir()):
            os.replace(entry, target / entry.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- mining budgets -----------------------------------------------------------------------


def check_support_budget(
    db: Any,
    min_support: float,
    *,
    smallest: int | None = None,
    max_len: int | None = None,
    budget: int = MAX_FREQUENT_ITEMSETS,
    option: str = "--min-support",
) -> None:
    """:class:`ConfigError` when ``min_support`` is below one transaction of the
    ``smallest`` part of ``db`` (the pooled data; default: all of it) or when more than
    ``budget`` itemsets could be frequent at it, decided one itemset length at a time (it
    stops as soon as the budget is passed).

    A party holding ``smallest`` of the transactions finds an itemset locally frequent
    only if it has at least ``ceil(min_support * smallest)`` of them, so the pooled
    itemsets with that many bound what every party mines locally.
    """
    from ppdm.mining.itemsets import COMPILED, as_transaction_db, eclat_forest, frequent_itemsets

    db = as_transaction_db(db, argument="db")
    n = int(db.n_transactions)
    part = n if smallest is None else min(int(smallest), n)
    if part < 1:
        return  # fewer transactions than parties: the split itself refuses that
    if n and min_support * part < 1:
        share = "" if part == n else f" of the smallest party's {part:,}"
        raise ConfigError(
            f"{option} {min_support:g} is below one transaction{share or ' of the input'} "
            f"(at least {1 / part:.3g})"
        )
    local_support = min_support * part / n if n else min_support
    length = 1
    while max_len is None or length <= max_len:
        if COMPILED:  # counted on the kernel's arrays: no dict of frozensets per length
            forest = eclat_forest(db, local_support, max_len=length)
            count, longest = len(forest), int(forest.sizes().max()) if len(forest) else 0
        else:
            found = frequent_itemsets(db, local_support, max_len=length)
            count, longest = len(found), max(map(len, found), default=0)
        if count > budget:
            raise ConfigError(
                f"{option} {min_support:g} is too low for this input: more than {budget:,} "
                "frequent itemsets (raise it, or bound the itemset length)"
            )
        if longest < length:
            return
        length += 1
