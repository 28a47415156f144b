"""The console tier: one consortium on 127.0.0.1 (``ppdm party serve`` processes, each with
its ``[console]``) shared by the tests of this folder, and a real headless Chromium
(Debian's ``chromium`` and ``chromium-driver``, driven by Selenium).

Private values are planted in the parties' settings files, where the nodes read them for
every job (``SECRETS``); the tests look for them on every page. Without the browser the
tier is skipped on a workstation and FAILS under ``CI=true`` (``tier_unavailable``).
Screenshots go to ``tmp_path``, or to ``docs/img/console`` with
``PPDM_CONSOLE_SCREENSHOTS=1`` (how the documentation's pictures are made).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ppdm.parties.consortium import write_toml
from ppdm.testbed.consortia import GrpcTestbed, free_ports

PARTIES = ["alice", "bob", "carol"]
#: Planted in the settings files; none may appear on any page of alice's console.
SECRETS = {"alice": 7_310_457, "bob": 8_420_913, "carol": 9_530_271}
SECRET_LABELS = {
    "bob": ["bob-secret-okapi", "bob-secret-quokka"],
    "carol": ["carol-secret-narwhal", "carol-secret-axolotl"],
    "alice": ["alice-secret-pangolin"],
}
#: alice holds every job for her owner's consent (the console's reason to exist).
ALICE_POLICY = """\
version = 1
[defaults]
consent = true
consent_timeout_s = 300
[data.records]
jobs = ["kmeans"]
columns = ["age", "income"]
"""
REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 120.0  # generous: catches a hang, not a slow machine


def find_browser() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` paths, or ``None``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


class Console:
    """The testbed's consoles: URLs, login tokens and jobs held at alice."""

    def __init__(self, bed: GrpcTestbed, ports: dict[str, int]) -> None:
        self.bed = bed
        self.ports = ports

    def url(self, party: str = "alice") -> str:
        return f"http://127.0.0.1:{self.ports[party]}"

    def state_dir(self, party: str) -> Path:
        return self.bed.workdir / "state" / party

    def token(self, party: str = "alice") -> str:
        from ppdm.console.security import read_token

        return read_token(self.state_dir(party))

    def start_job(
        self, initiator: str, name: str = "secure-sum", params: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any], threading.Thread]:
        """Run a job as ``initiator`` in a thread (it waits for alice's owner); its id,
        the box its document lands in (``box["doc"]``) and the thread."""
        from ppdm.service.client import run_job

        job_id = uuid.uuid4().hex
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["doc"] = run_job(
                    self.bed.settings[initiator],
                    name,
                    params,
                    timeout=30,
                    deadline=DEADLINE_S,
                    job_id=job_id,
                )
            except BaseException as exc:  # re-raised by the test
                box["error"] = exc

        t = threading.Thread(target=run, name=f"job-{job_id[:8]}", daemon=True)
        t.start()
        return job_id, box, t


def _data(root: Path) -> dict[str, dict[str, str]]:
    out = {}
    for p in PARTIES:
        rows = "\n".join(f"{i},{30 + i % 40},{(i * 7919) % 997}" for i in range(40))
        (root / f"{p}-records.csv").write_text(f"record_id,age,income\n{rows}\n")
        out[p] = {
            "records": str(root / f"{p}-records.csv"),
            "gone": str(root / f"{p}-missing.csv"),  # a source that does not open
        }
    return out


@pytest.fixture(scope="package")
def consoles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("console")
    inputs = {p: {"secure_sum": SECRETS[p], "set_union": SECRET_LABELS[p]} for p in PARTIES}
    bed = GrpcTestbed(
        PARTIES,
        root / "bed",
        timeout=30,
        inputs=inputs,
        data=_data(root),
        policy={"alice": ALICE_POLICY},
    )
    ports = dict(zip(PARTIES, free_ports(len(PARTIES)), strict=True))
    for party, port in ports.items():
        path = bed.settings_path(party)
        doc = tomllib.loads(path.read_text())
        doc["console"] = {"listen": f"127.0.0.1:{port}"}
        path.write_text(write_toml(doc, header=f"Settings of {party} (console tests)."))
    with bed:
        yield Console(bed, ports)


@pytest.fixture(scope="package")
def browser(tier_unavailable: Callable[[str, str], Any]) -> Iterator[Any]:
    """A headless Chromium driven by Selenium (one for the folder)."""
    found = find_browser()
    if found is None:
        tier_unavailable("console", "chromium and chromium-driver are not installed")
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        tier_unavailable("console", "selenium is not installed (pip install -e '.[dev]')")
    chromium, driver_path = found  # type: ignore[misc]
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in CI's container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        "--no-first-run",
    ):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
    except WebDriverException as exc:
        tier_unavailable("console", f"chromium does not start: {exc.msg}")
    driver.set_page_load_timeout(DEADLINE_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Any, str], Path]:
    """``shots(driver, name)``: a full-page PNG of the current page."""
    folder = (
        REPO / "docs" / "img" / "console"
        if os.environ.get("PPDM_CONSOLE_SCREENSHOTS") == "1"
        else tmp_path
    )
    folder.mkdir(parents=True, exist_ok=True)

    def take(driver: Any, name: str) -> Path:
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1280, max(int(height) + 160, 600))
        path = folder / f"{name}.png"
        assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
        driver.set_window_size(1280, 1000)
        return path

    return take


@pytest.fixture(scope="session")
def planted() -> tuple[dict[str, int], dict[str, list[str]]]:
    """The values planted in the settings files: ``(SECRETS, SECRET_LABELS)``."""
    return SECRETS, SECRET_LABELS


@pytest.fixture(scope="session")
def login() -> Callable[[Any, str, str], None]:
    """``login(driver, url, token)``: log the browser in to a console."""
    return _login


@pytest.fixture(scope="session")
def wait_for() -> Callable[..., Any]:
    """``wait_for(check, what)``: poll until ``check()`` is true (generous deadline)."""
    return _wait_for


def _login(driver: Any, url: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url + "/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login").click()
    _wait_for(
        lambda: (
            not driver.current_url.endswith("/login") or driver.find_elements(By.ID, "login-error")
        ),
        "the login form's answer",
    )


def _wait_for(check: Callable[[], Any], what: str, *, deadline_s: float = DEADLINE_S) -> Any:
    """Poll ``check`` until it returns something true (generous deadline: hangs only)."""
    end = time.monotonic() + deadline_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
