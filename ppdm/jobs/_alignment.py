"""The size bounds of a private record alignment, shared by the ``psi-align`` job and the
mining jobs' ``align=true`` (one module both import, so neither imports the other)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ppdm.errors import ConfigError
from ppdm.protocols.psi import DEFAULT_MAX_SET_RATIO, DEFAULT_MIN_SET_SIZE

__all__ = ["bounds"]


def bounds(params: Mapping[str, Any]) -> tuple[float, int]:
    """The validated size bounds of an alignment: ``(max_set_ratio, min_set_size)``
    (defaults 2.0 and 10, when the job has no such parameter); :class:`ConfigError`
    naming the bad parameter."""
    ratio = params.get("max_set_ratio", DEFAULT_MAX_SET_RATIO)
    if (
        isinstance(ratio, bool)
        or not isinstance(ratio, int | float)
        or not math.isfinite(ratio)
        or ratio < 1
    ):
        raise ConfigError("max_set_ratio must be a finite number >= 1")
    size = params.get("min_set_size", DEFAULT_MIN_SET_SIZE)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ConfigError("min_set_size must be an int >= 0")
    return float(ratio), size
