"""Shared fixtures: where the shared data sets live, hypothesis profiles, and tiers that
cannot run here (a skip on a workstation, a failure under ``CI=true``)."""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings

# One BLAS/OpenMP thread per process: the suite runs three workers (and their nodes and
# subprocesses, which inherit this) on two cores, where numpy's second OpenBLAS thread
# only spins against the other processes (five reconstructions: 28 CPU s with the default
# threads, 2 s with one). xdist workers and subprocesses start with these variables;
# this process loaded numpy already (pytest-randomly imports it), so it is limited through
# threadpoolctl (scikit-learn's dependency) in pytest_configure. A run that chose its own
# value keeps it.
_ONE_THREAD = "OPENBLAS_NUM_THREADS" not in os.environ
# pytest caches the assertion-rewritten test modules only where bytecode may be written;
# under PYTHONDONTWRITEBYTECODE every worker of every run rewrote all of the about 290 modules again
# (about 9 CPU s each). The cache sits in the checkout's __pycache__ folders (ignored by git).
sys.dont_write_bytecode = False
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# The test processes start nodes (fork, then exec) while their own gRPC clients have
# threads running; gRPC's fork handlers (pthread_atfork) then wait for those threads
# inside fork() and, now and then, forever (seen: a testbed spawn stuck in gRPC's prefork
# handler). A child that execs at once needs none of gRPC's fork support.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        _compile_ppdm()
    if _ONE_THREAD:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - comes with scikit-learn (the dev extra)
            return
        threadpool_limits(1)


REPO = Path(__file__).resolve().parent.parent


def _compile_ppdm() -> None:
    """Byte-compile the package once, before the workers start.

    An editable install (the README's ``pip install -e``) leaves ``ppdm/`` uncompiled,
    unlike pip's install of a wheel, and where ``PYTHONDONTWRITEBYTECODE`` is set nothing
    ever writes the ``.pyc`` files: every node and CLI process the suite starts (well over
    a thousand) would compile the modules it imports from source again, 0.85 CPU s for the
    whole package. ``py_compile`` writes regardless of that variable; a file that is
    already current is skipped.
    """
    import compileall

    compileall.compile_dir(REPO / "ppdm", quiet=1, workers=1)


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


# -- scheduling on xdist workers: the longest work first, a module's shared fixture once ------
#
# ``--dist loadgroup --no-loadscope-reorder`` (pyproject's addopts) hands each worker one
# unit of work at a time from the front of the collection. A unit is one test, or a whole
# module when its tests share a module-scoped fixture (a Spark session, a bed of nodes, a
# PostgreSQL server): the fixture then starts once, on one worker, instead of once on
# every worker that happens to run one of its tests. Units are ordered longest first
# (their times in ``tests/durations.json``, rounded to powers of two so that the order of
# the many short tests stays pytest-randomly's), which keeps a long test from starting
# last and running alone at the end. ``--record-durations=FILE`` writes the times of a
# run in that file's format.

DURATIONS = Path(__file__).with_name("durations.json")
_DEFAULT_S = 0.5
_recorded: dict[str, float] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        metavar="FILE",
        default=None,
        help="write each test's wall time (setup + call + teardown) to FILE as JSON",
    )


def _base_id(nodeid: str) -> str:
    """A node id without the ``@group`` suffix xdist adds under ``--dist loadgroup``."""
    at, bracket = nodeid.rfind("@"), nodeid.rfind("]")
    return nodeid[:at] if at > bracket else nodeid


def _module_scoped(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        defs and defs[-1].scope in ("module", "package", "class")
        for defs in info.name2fixturedefs.values()
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):  # type: ignore[no-untyped-def]
    """Under ``--dist loadgroup``: before every other plugin (xdist reads the groups),
    put the tests of a module with a module-scoped fixture in one group; after them all
    (pytest-randomly's shuffle included), order the units longest first."""
    # (on a worker, xdist keeps the choice in the ``loadgroup`` option, not in ``dist``)
    loadgroup = bool(getattr(config.option, "loadgroup", False)) or (
        config.getoption("dist", "no") == "loadgroup"
    )
    if loadgroup:
        for item in items:
            # (a module's own group, such as the Spark modules' shared session, is kept)
            if _module_scoped(item) and item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    yield
    if loadgroup:
        _check_groups_in_effect(items)
    if loadgroup and DURATIONS.is_file():
        _longest_first(items, json.loads(DURATIONS.read_text()))


def _check_groups_in_effect(items: list[pytest.Item]) -> None:
    """On a worker, xdist marks a grouped test by a ``@group`` suffix of its node id; the
    controller schedules by that suffix alone. Where the suffix is missing (pytest 9.2
    with pytest-xdist 3.8, pytest-xdist #1386), the groups are silently ignored: shared
    testbeds start once per worker and race. End such a run at once, saying why (the
    workers' exit shows the message in the warnings summary)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller (or -n 0): nothing is scheduled by group
    lost = [
        item.nodeid
        for item in items
        if item.get_closest_marker("xdist_group") is not None
        and _base_id(item.nodeid) == item.nodeid
    ]
    if lost:
        pytest.exit(
            f"--dist loadgroup is not in effect: {len(lost)} grouped tests (e.g. {lost[0]}) "
            f"carry no @group node-id suffix (pytest {pytest.__version__} with this "
            "pytest-xdist; see pytest-xdist #1386): install the pinned versions "
            "(pip install -e '.[dev]') or run with -n 0"
        )


def _longest_first(items: list[pytest.Item], known: dict[str, float]) -> None:
    """Sort ``items`` by their unit's recorded time, in powers of two (stable: the order
    within a class of times is the one the other plugins left)."""
    units: dict[str, float] = {}
    unit_of: dict[str, str] = {}
    for item in items:
        base = _base_id(item.nodeid)
        unit = item.nodeid[len(base) + 1 :] if item.nodeid != base else base
        unit_of[item.nodeid] = unit
        units[unit] = units.get(unit, 0.0) + known.get(base, _DEFAULT_S)

    def rank(item: pytest.Item) -> int:
        return -math.floor(math.log2(max(units[unit_of[item.nodeid]], _DEFAULT_S) / _DEFAULT_S))

    items.sort(key=rank)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _recorded[_base_id(report.nodeid)] = _recorded.get(_base_id(report.nodeid), 0.0) + float(
        report.duration
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("record_durations")
    if target and not hasattr(session.config, "workerinput"):  # the controller writes
        rows = {k: round(v, 3) for k, v in sorted(_recorded.items())}
        Path(target).write_text(json.dumps(rows, indent=0) + "\n")
