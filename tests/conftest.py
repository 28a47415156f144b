"""Shared fixtures: where the shared data sets live, and hypothesis profiles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PPDM_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The ``../shared/data`` folder beside the checkout (Adult, hierarchies, FIMI sets)."""
    if not DATA.is_dir():
        pytest.fail(f"shared data folder not found at {DATA} (set PPDM_SHARED)")
    return DATA


@pytest.fixture(scope="session")
def adult_dir(shared_data: Path) -> Path:
    return shared_data / "adult"


@pytest.fixture(scope="session")
def fimi_dir(shared_data: Path) -> Path:
    return shared_data / "fimi"
