"""Shared fixtures: where the shared data sets live, hypothesis profiles, and tiers that
cannot run here (a skip on a workstation, a failure under ``CI=true``)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PPDM_SHARED", REPO.parent / "shared"))
DATA = SHARED / "data"
# The persistent state of commands (the DP budgets of `ppdm dp`) goes to a folder of this
# run, never the user's ~/.local/state; subprocesses inherit it.
os.environ["PPDM_STATE_DIR"] = tempfile.mkdtemp(prefix="ppdm-test-state-")
atexit.register(shutil.rmtree, os.environ["PPDM_STATE_DIR"], ignore_errors=True)

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile("dev", max_examples=25, deadline=None)
# PPDM_HYPOTHESIS_PROFILE chooses one (benchmarks/mutations.py runs "ci": derandomized).
settings.load_profile(
    os.environ.get("PPDM_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


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


# -- tiers that need the machine's help (root, PostgreSQL, network namespaces) ---------------

_NOT_RUN: list[str] = []


def in_ci() -> bool:
    """Whether this run is CI's (``CI`` set to true, as CI services and ``.ci/run`` do)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def _tier_unavailable(tier: str, reason: str) -> NoReturn:
    message = f"{tier} tier not run: {reason}"
    _NOT_RUN.append(message)
    print(message, file=sys.stderr)
    if in_ci():
        pytest.fail(f"{message} (CI=true: every tier must run; see .ci/run)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def tier_unavailable() -> Callable[[str, str], NoReturn]:
    """``tier_unavailable(tier, reason)``: end the test because its tier cannot run on
    this machine: a skip, with the reason printed and listed at the end of the run, or a
    failure under ``CI=true`` (issue 22: CI must not pass whether or not a tier ran)."""
    return _tier_unavailable


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _NOT_RUN:
        terminalreporter.section("tiers that did not run", sep="!", red=True, bold=True)
        for line in dict.fromkeys(_NOT_RUN):
            terminalreporter.line(line)
