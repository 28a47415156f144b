"""The officer's console in a real headless Chromium, against ``ppdm party serve``
processes on 127.0.0.1: a job held for alice's consent shows up on her page, is approved
(or rejected, with a reason) with a click, and runs on every node; the history, job and
ledger pages list it; the policy dry-run form answers as ``ppdm policy check`` does."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

CLICK_DEADLINE_S = 120.0  # generous: catches a hang, not a slow machine


def _click_and_load(driver, element) -> None:
    """Click a link or a submit button and wait until the browser has left the page
    (the next ``find_element`` must see the new page, not the old one)."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, CLICK_DEADLINE_S).until(expected_conditions.staleness_of(page))


DEADLINE_S = 120.0  # generous: catches a hang, not a slow machine

pytestmark = pytest.mark.grpc


@pytest.fixture
def officer(consoles, browser, login):
    """The browser, logged in to alice's console."""
    browser.delete_all_cookies()
    login(browser, consoles.url(), consoles.token())
    assert browser.current_url.endswith("/pending"), browser.current_url
    return browser


@pytest.fixture
def pending_section(wait_for):
    """``pending_section(driver, url, job_id)``: the job's section of the pending page,
    as soon as it appears."""
    return lambda driver, url, job_id: _pending_section(driver, url, job_id, wait_for)


def _pending_section(driver, url: str, job_id: str, wait_for):
    def look():
        driver.get(url + "/pending")
        found = driver.find_elements(By.ID, f"pending-{job_id}")
        return found[0] if found else None

    return wait_for(look, f"job {job_id} on the pending page")


def _finish(box, thread):
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the job did not end"
    if "error" in box:
        raise box["error"]
    return box["doc"]


def test_held_job_is_approved_with_a_click_and_runs_everywhere(
    consoles, officer, shots, pending_section
):
    job_id, box, thread = consoles.start_job("bob")
    section = pending_section(officer, consoles.url(), job_id)
    text = section.text
    assert "bob" in section.find_element(By.CLASS_NAME, "initiator").text
    assert "alice, bob, carol" in text
    assert "sum" in section.find_element(By.CLASS_NAME, "leakage").text  # in words
    assert "consent" in section.find_element(By.CLASS_NAME, "rule").text
    assert "Deadline" in text
    shots(officer, "pending")
    section.find_element(By.CLASS_NAME, "reason").send_keys("quarterly report, ok")
    _click_and_load(officer, section.find_element(By.CLASS_NAME, "approve"))
    assert "approved" in officer.find_element(By.ID, "note").text
    doc = _finish(box, thread)
    assert doc["state"] == "succeeded", doc.get("error")
    assert doc["decisions"]["alice"]["decision"] == "approved"
    assert {p: r["state"] for p, r in doc["parties"].items()} == dict.fromkeys(
        ["alice", "bob", "carol"], "succeeded"
    )
    # Recorded exactly as `ppdm job approve` records it.
    from ppdm.service.ledger import read_entries

    entries = read_entries(consoles.state_dir("alice") / "ledger.sqlite", job_id=job_id)
    approvals = [e for e in entries if e.kind == "approval"]
    assert [e.record for e in approvals] == [{"approved": True, "reason": "quarterly report, ok"}]


def test_rejection_with_a_reason_reaches_the_initiator(consoles, officer, pending_section):
    job_id, box, thread = consoles.start_job("carol")
    section = pending_section(officer, consoles.url(), job_id)
    section.find_element(By.CLASS_NAME, "reason").send_keys("not before the audit")
    _click_and_load(officer, section.find_element(By.CLASS_NAME, "reject"))
    assert "rejected" in officer.find_element(By.ID, "note").text
    doc = _finish(box, thread)
    assert doc["state"] == "refused" and doc["failed_party"] == "alice"
    decision = doc["decisions"]["alice"]
    assert decision["rule"] == "owner"
    assert "not before the audit" in decision["reason"]
    assert all(r["state"] in ("refused", "cancelled") for r in doc["parties"].values())


def test_history_job_and_ledger_pages_list_the_job(consoles, officer, shots, pending_section):
    job_id, box, thread = consoles.start_job("carol")
    section = pending_section(officer, consoles.url(), job_id)
    _click_and_load(officer, section.find_element(By.CLASS_NAME, "approve"))
    assert _finish(box, thread)["state"] == "succeeded"
    url = consoles.url()
    officer.get(url + "/jobs")
    row = officer.find_element(By.ID, f"job-{job_id}")
    assert "succeeded" in row.find_element(By.CLASS_NAME, "state").text
    assert "carol" in row.text
    shots(officer, "jobs")
    # Filters: by initiator and state.
    Select(officer.find_element(By.NAME, "initiator")).select_by_value("bob")
    _click_and_load(officer, officer.find_element(By.ID, "filter"))
    assert "initiator=bob" in officer.current_url
    assert not officer.find_elements(By.ID, f"job-{job_id}")  # carol's job is filtered out
    officer.get(url + "/jobs?state=succeeded&initiator=carol")
    assert officer.find_elements(By.ID, f"job-{job_id}")
    # The job page: its document and the per-step figure (server-side SVG).
    officer.get(url + "/jobs")
    _click_and_load(
        officer, officer.find_element(By.ID, f"job-{job_id}").find_element(By.TAG_NAME, "a")
    )
    assert officer.find_element(By.ID, "job-id").text == job_id
    assert officer.find_element(By.ID, "job-state").text == "succeeded"
    figure = officer.find_element(By.ID, "steps-figure")
    assert figure.find_elements(By.TAG_NAME, "rect")
    assert '"protocol": "secure-sum"' in officer.find_element(By.ID, "document").text
    shots(officer, "job")
    # The ledger: the job's entries on the first page, and the chain verifies.
    officer.get(url + "/ledger")
    assert officer.find_element(By.ID, "verify-status").text == "intact"
    table = officer.find_element(By.ID, "entries").text
    assert job_id[:12] in table
    assert "The owner approved the job." in table
    assert "bob" in officer.find_element(By.ID, "peer-heads").text
    shots(officer, "ledger")
    # `ledger verify --online`: the heads of alice's ledger that bob and carol hold.
    _click_and_load(officer, officer.find_element(By.ID, "check-peers"))
    assert officer.find_element(By.ID, "verify-status").text == "intact"
    checked = officer.find_element(By.ID, "peers-checked").text
    assert re.search(r"bob: \d+ signed heads checked", checked), checked  # bob answered
    # carol initiated this job, so she holds a signed head of alice's ledger.
    assert re.search(r"carol: [1-9]\d* signed heads checked", checked), checked


def _cli_check(consoles, capsys, *args: str) -> str:
    """The first line ``ppdm policy check ARGS --settings alice.toml`` prints."""
    from ppdm.cli.main import main

    capsys.readouterr()
    code = main(["policy", "check", *args, "--settings", str(consoles.bed.settings_path("alice"))])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return out.splitlines()[0]


@pytest.mark.parametrize(
    ("job", "params", "parties", "initiator"),
    [
        ("secure-sum", "", ["alice", "bob", "carol"], "bob"),
        ("secure-sum", "", ["alice", "bob"], "bob"),  # refused: min_parties
        ("assoc", "reveal_counts=true\nmin_support=0.5", ["alice", "bob", "carol"], "carol"),
    ],
)
def test_policy_dry_run_answers_like_ppdm_policy_check(
    consoles, officer, shots, capsys, job, params, parties, initiator
):
    officer.get(consoles.url() + "/policy")
    assert officer.find_element(By.ID, "policy-path").text.endswith("alice.policy.toml")
    Select(officer.find_element(By.ID, "check-job")).select_by_value(job)
    Select(officer.find_element(By.ID, "check-initiator")).select_by_value(initiator)
    for box in officer.find_elements(By.NAME, "parties"):
        if box.is_selected() != (box.get_attribute("value") in parties):
            box.click()
    officer.find_element(By.ID, "check-params").send_keys(params)
    _click_and_load(officer, officer.find_element(By.ID, "check"))
    verdict = officer.find_element(By.ID, "verdict").text
    cli_args = [job, "--parties", ",".join(parties), "--initiator", initiator]
    for line in params.splitlines():
        cli_args += ["--param", line]
    assert verdict == _cli_check(consoles, capsys, *cli_args)
    if parties == ["alice", "bob", "carol"] and job == "secure-sum":
        shots(officer, "policy")


def test_peers_and_node_page(consoles, officer, shots):
    officer.get(consoles.url() + "/node")
    assert officer.find_element(By.ID, "roster-version").text.isdigit()
    members = officer.find_element(By.ID, "members").text
    for peer in ("bob", "carol"):
        assert f"{peer} 127.0.0.1" in members
    reach = [c.text for c in officer.find_elements(By.CLASS_NAME, "reach")]
    assert reach.count("this node") == 1
    assert sum(r.startswith("reachable") for r in reach) == 2, reach
    sources = officer.find_element(By.ID, "sources").text
    assert "records" in sources and "opens (3 columns)" in sources
    assert "gone" in sources and "does not open" in sources
    assert "max_streams_per_peer" in officer.find_element(By.ID, "limits").text
    shots(officer, "node")


def test_login_page_refuses_a_wrong_token(consoles, browser, shots, login):
    browser.delete_all_cookies()
    browser.get(consoles.url() + "/jobs")
    assert browser.current_url.endswith("/login")  # every page sends you to the login
    shots(browser, "login")
    login(browser, consoles.url(), consoles.token("bob"))  # another member's token
    assert "not this node's login token" in browser.find_element(By.ID, "login-error").text
    login(browser, consoles.url(), consoles.token())
    assert browser.current_url.endswith("/pending")
