"""The parameters of the ``assoc`` and ``kmeans`` jobs: their defaults and checks.

:func:`check_params` validates what an initiator sends (``ppdm job run``, ``ppdm
simulate``) before anything is read or sent; each bad parameter is a
:class:`~ppdm.errors.ConfigError` naming it. The jobs themselves are :mod:`ppdm.jobs.mining`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ppdm.errors import ConfigError
from ppdm.jobs.mining_data import MODES, TRANSACTION_FORMATS

__all__ = ["ASSOC_DEFAULTS", "KMEANS_DEFAULTS", "check_params"]

# ---------------------------------------------------------------------------------------
# Parameter checks


def _choice(params: Mapping[str, Any], name: str, allowed: Sequence[str]) -> str:
    value = params[name]
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _flag(params: Mapping[str, Any], name: str) -> bool:
    value = params[name]
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    return value


def _fraction(params: Mapping[str, Any], name: str, *, low_open: bool) -> float:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    v = float(value)
    ok = (0.0 < v <= 1.0) if low_open else (0.0 <= v <= 1.0)
    if not ok or math.isnan(v):
        raise ConfigError(f"{name} must be in {'(0, 1]' if low_open else '[0, 1]'}, not {value!r}")
    return v


def _integer(params: Mapping[str, Any], name: str, *, low: int, high: int | None = None) -> int:
    value = params[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON numbers may arrive as floats
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{name} must be {bound}, not {value}")
    return value


def _optional_integer(
    params: Mapping[str, Any], name: str, *, low: int, high: int | None = None
) -> int | None:
    return None if params[name] is None else _integer(params, name, low=low, high=high)


def _number(params: Mapping[str, Any], name: str, *, low: float = 0.0) -> float:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    if value < low:
        raise ConfigError(f"{name} must be >= {low:g}, not {value!r}")
    return float(value)


ASSOC_DEFAULTS: dict[str, Any] = {
    "mode": "horizontal",
    "min_support": 0.1,
    "min_confidence": 0.8,
    "reveal_counts": False,
    "method": "ot",
    "multiparty": "gmw",
    "protect": "dp",
    "epsilon": 1.0,
    "max_shared_candidates": 256,
    "max_paillier_encryptions": 1_000_000,
    "max_len": None,
    "label_bytes": None,
    "fake_ratio": 0.25,
    "min_aggregate": 10,
    "colluders": 1,
    "format": "auto",
    "sep": ",",
    "data": "transactions",
    "report_local": False,
    "align": False,
    "align_method": "oprf",
    "max_set_ratio": 2.0,
    "min_set_size": 10,
}


KMEANS_DEFAULTS: dict[str, Any] = {
    "mode": "horizontal",
    "k": 3,
    "init": "aggregate",
    "seed": 0,
    "max_iter": 300,
    "tol": 0.0,
    "fraction_bits": None,
    "columns": None,
    "id_column": "record_id",
    "sep": ",",
    "data": "records",
    "include_labels": False,
    "report_local": False,
    "min_cluster_size": 10,
    "min_party_records": 3,
    "align": False,
    "align_method": "oprf",
    "max_set_ratio": 2.0,
    "min_set_size": 10,
}


def check_params(job: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The validated parameters of job ``assoc`` or ``kmeans`` (defaults filled in);
    :class:`ConfigError` naming the first bad one. Data-dependent checks (explicit
    initial centers, label sizes) happen in the job."""
    if job == "assoc":
        merged = {**ASSOC_DEFAULTS, **params}
        fmt = merged["format"]
        if fmt not in ("auto", *TRANSACTION_FORMATS):
            raise ConfigError(f"format must be auto, fimi or basket, not {fmt!r}")
        return {
            "mode": _choice(merged, "mode", MODES),
            "min_support": _fraction(merged, "min_support", low_open=True),
            "min_confidence": _fraction(merged, "min_confidence", low_open=False),
            "reveal_counts": _flag(merged, "reveal_counts"),
            "method": _choice(merged, "method", ("ot", "gilboa", "paillier")),
            "multiparty": _choice(merged, "multiparty", ("gmw", "intersection")),
            "protect": _choice(merged, "protect", ("dp", "exact")),
            "epsilon": _vertical_epsilon(merged),
            "max_shared_candidates": _integer(merged, "max_shared_candidates", low=1),
            "max_paillier_encryptions": _integer(merged, "max_paillier_encryptions", low=0),
            "max_len": _optional_integer(merged, "max_len", low=1),
            "label_bytes": _optional_integer(merged, "label_bytes", low=1, high=255),
            "fake_ratio": _number(merged, "fake_ratio"),
            "min_aggregate": _integer(merged, "min_aggregate", low=0, high=1 << 40),
            "colluders": _integer(merged, "colluders", low=1),
            "format": fmt,
            "sep": _separator(merged),
            "data": _data_key(merged),
            "report_local": _flag(merged, "report_local"),
            **_align_params(merged),
        }
    if job != "kmeans":
        raise ConfigError(f"no mining job {job!r}")
    merged = {**KMEANS_DEFAULTS, **params}
    mode = _choice(merged, "mode", MODES)
    id_column = merged["id_column"]
    if id_column is not None and not isinstance(id_column, str):
        raise ConfigError(f"id_column must be a column name or null, not {id_column!r}")
    columns = merged["columns"]
    if columns is not None and (
        not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns)
    ):
        raise ConfigError("columns must be a non-empty list of column names")
    init = merged["init"]
    if init == "aggregate":
        # The default: starting centres that are aggregates -- every party's own quantile
        # slabs along a coin-tossed direction horizontally (reliable under the size
        # floors), random groups dealt from a joint seed vertically.
        init = "random-slabs" if mode == "horizontal" else "random-partition"
    if isinstance(init, str):
        allowed = (
            ("random-partition", "random-slabs", "first-k", "kmeans++")
            if mode == "horizontal"
            else ("random-partition", "first-k", "random")
        )
        if init not in allowed:
            hint = (
                " (k-means++ seeding would reveal every record's distance in vertical mode)"
                if init == "kmeans++" and mode == "vertical"
                else ""
            )
            raise ConfigError(f"init must be one of {', '.join(allowed)} in {mode} mode{hint}")
    elif not isinstance(init, list | dict):
        raise ConfigError("init must be a method name, a {column: [k values]} object or rows")
    return {
        "mode": mode,
        "k": _integer(merged, "k", low=1),
        "init": init,
        "seed": _integer(merged, "seed", low=0),
        "max_iter": _integer(merged, "max_iter", low=1),
        "tol": _number(merged, "tol"),
        "fraction_bits": _optional_integer(merged, "fraction_bits", low=-64, high=52),
        "columns": columns,
        "id_column": id_column,
        "sep": _separator(merged),
        "data": _data_key(merged),
        "include_labels": _flag(merged, "include_labels"),
        "min_cluster_size": _integer(merged, "min_cluster_size", low=0),
        "min_party_records": _integer(merged, "min_party_records", low=0),
        "report_local": _flag(merged, "report_local"),
        **_align_params(merged),
    }


def _align_params(merged: Mapping[str, Any]) -> dict[str, Any]:
    """``align`` (vertical mode only; k-means needs an id column), ``align_method`` and
    the size bounds of the alignment, ``max_set_ratio`` (default 2.0) and
    ``min_set_size`` (default 10), as in the ``psi-align`` job
    (:func:`ppdm.jobs.psi.bounds`)."""
    from ppdm.jobs._alignment import bounds

    align = _flag(merged, "align")
    method = _choice(merged, "align_method", ("oprf", "ec"))
    if align and merged.get("mode") != "vertical":
        raise ConfigError("align=true applies to mode=vertical only")
    if align and "id_column" in merged and merged["id_column"] is None:
        raise ConfigError("align=true needs an id_column")
    ratio, size = bounds(merged)
    return {"align": align, "align_method": method, "max_set_ratio": ratio, "min_set_size": size}


def _vertical_epsilon(params: Mapping[str, Any]) -> float:
    """``epsilon`` of ``protect="dp"``: a positive finite number (per party and job)."""
    value = _number(params, "epsilon")
    if not 0.0 < value < math.inf:
        raise ConfigError(f"epsilon must be a positive finite number, not {value!r}")
    return value


def _data_key(params: Mapping[str, Any]) -> str:
    key = params["data"]
    if not isinstance(key, str) or not key:
        raise ConfigError(f"data must name an entry of the [data] table, not {key!r}")
    return key


def _separator(params: Mapping[str, Any]) -> str:
    sep = params["sep"]
    if not isinstance(sep, str) or len(sep) != 1 or sep in '\r\n"':
        raise ConfigError(f"sep must be one character (not a quote or newline), not {sep!r}")
    return sep
