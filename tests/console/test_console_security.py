"""Who gets into alice's console, and what its pages never show.

Over real ``ppdm party serve`` processes: no page or action without alice's login token;
bob's token, bob's session, bob's certificate and key are refused; a form posted from
another origin (another port on 127.0.0.1: the same *site*) is refused even with a
stolen CSRF token, in a real browser and with a plain client; strict headers on every
response; and no value planted in any party's settings file appears on any page."""

from __future__ import annotations

import http.server
import re
import ssl
import stat
import threading
import time

import httpx
import pytest
from selenium.webdriver.common.by import By

from ppdm.console.security import (
    LOGIN_FAILURES_PER_MINUTE,
    SECURITY_HEADERS,
    SessionStore,
    csrf_ok,
    same_origin,
)

PAGES = ["/pending", "/jobs", "/ledger", "/policy", "/node"]


def _client(consoles, party: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=consoles.url(party), timeout=60.0, follow_redirects=False)


def _logged_in(consoles, party: str = "alice") -> tuple[httpx.Client, str]:
    client = _client(consoles, party)
    r = client.post("/login", data={"token": consoles.token(party)})
    assert r.status_code == 303 and r.headers["location"] == "/pending", r.text
    page = client.get("/pending")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    return client, csrf.group(1)


def _pending_at_alice(consoles, job_id: str, wait_for) -> None:
    from ppdm.service.client import pending_jobs

    settings = consoles.bed.settings["alice"]
    wait_for(
        lambda: any(j["job_id"] == job_id for j in pending_jobs(settings)),
        f"job {job_id} pending at alice",
    )


def _still_pending(consoles, job_id: str) -> bool:
    from ppdm.service.client import pending_jobs

    return any(j["job_id"] == job_id for j in pending_jobs(consoles.bed.settings["alice"]))


def test_no_access_without_the_owners_token(consoles):
    with _client(consoles) as anon:
        for page in [*PAGES, "/jobs/anything"]:
            r = anon.get(page)
            assert r.status_code == 303 and r.headers["location"] == "/login", page
        for action in ("/pending/decide", "/policy/check", "/logout"):
            assert anon.post(action, data={"csrf": "x", "job_id": "x"}).status_code == 403
        bob = consoles.bed.settings["bob"]
        for wrong in (
            "",
            "not-the-token",
            consoles.token("bob"),  # another member's token
            bob.certificate_pem.decode(),  # a peer's certificate is no credential here
            bob.private_key_pem.decode(),
        ):
            r = anon.post("/login", data={"token": wrong})
            assert r.status_code == 403 and "ppdm_console" not in r.headers.get("set-cookie", "")
        assert anon.get("/pending").status_code == 303


def test_another_members_session_and_certificate_are_refused(consoles):
    bob_client, _ = _logged_in(consoles, "bob")
    cookie = bob_client.cookies.get("ppdm_console")
    assert cookie
    with _client(consoles) as alice:
        alice.cookies.set("ppdm_console", cookie)
        for page in PAGES:
            assert alice.get(page).status_code == 303, page
    # The console speaks no TLS: a client certificate (bob's) gets it nowhere.
    bed = consoles.bed
    workdir = bed.workdir
    cert, key = workdir / "bob-client.crt", workdir / "bob-client.key"
    cert.write_bytes(bed.settings["bob"].certificate_pem)
    key.write_bytes(bed.settings["bob"].private_key_pem)
    key.chmod(0o600)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert, key)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"https://127.0.0.1:{consoles.ports['alice']}/pending", verify=ctx, timeout=30)
    # A logged-out session is dead.
    alice_client, csrf = _logged_in(consoles)
    old = alice_client.cookies.get("ppdm_console")
    assert alice_client.post("/logout", data={"csrf": csrf}).status_code == 303
    with _client(consoles) as again:
        again.cookies.set("ppdm_console", old)
        assert again.get("/pending").status_code == 303


def test_forged_posts_are_refused(consoles, wait_for):
    client, csrf = _logged_in(consoles)
    job_id, box, thread = consoles.start_job("bob")
    _pending_at_alice(consoles, job_id, wait_for)
    base = {"job_id": job_id, "action": "approve", "reason": "forged"}
    evil = f"http://127.0.0.1:{consoles.ports['bob']}"
    for data, headers in (
        (base, {}),  # no CSRF token
        ({**base, "csrf": "guessed"}, {}),
        ({**base, "csrf": csrf}, {"Origin": evil}),  # a stolen token, from elsewhere
        ({**base, "csrf": csrf}, {"Sec-Fetch-Site": "same-site"}),
        ({**base, "csrf": csrf}, {"Origin": "null"}),
    ):
        r = client.post("/pending/decide", data=data, headers=headers)
        assert r.status_code == 403, (data, headers, r.text)
    assert _still_pending(consoles, job_id)
    # The control: the same request with the token and from the page itself works.
    r = client.post(
        "/pending/decide",
        data={**base, "action": "reject", "csrf": csrf},
        headers={"Origin": consoles.url(), "Sec-Fetch-Site": "same-origin"},
    )
    assert r.status_code == 303
    thread.join(120)
    assert box["doc"]["state"] == "refused"


class _Attacker(http.server.BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *args: object) -> None:
        pass


def test_cross_site_form_post_in_the_browser_is_refused(consoles, browser, login, wait_for):
    browser.delete_all_cookies()
    login(browser, consoles.url(), consoles.token())
    csrf = browser.find_element(By.NAME, "csrf").get_attribute("value")
    job_id, box, thread = consoles.start_job("carol")
    _pending_at_alice(consoles, job_id, wait_for)
    target = consoles.url() + "/pending/decide"
    _Attacker.page = (
        f'<form method="post" action="{target}">'
        f'<input name="job_id" value="{job_id}"><input name="action" value="approve">'
        f'<input name="csrf" value="{csrf}"><button id="go">win a prize</button></form>'
    ).encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{server.server_address[1]}/")
        browser.find_element(By.ID, "go").click()
        wait_for(lambda: browser.current_url.startswith(consoles.url()), "the forged post")
        assert "refused" in browser.find_element(By.TAG_NAME, "body").text
        time.sleep(0.5)
        assert _still_pending(consoles, job_id)
        # The officer's own click on her own page still works (the control).
        browser.get(consoles.url() + "/pending")
        section = browser.find_element(By.ID, f"pending-{job_id}")
        section.find_element(By.CLASS_NAME, "reject").click()
        thread.join(120)
        assert box["doc"]["state"] == "refused"
    finally:
        server.shutdown()
        server.server_close()


def test_strict_headers_cookie_and_token_file(consoles):
    client, _ = _logged_in(consoles)
    with _client(consoles) as anon:
        r = anon.post("/login", data={"token": consoles.token()})
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    for page in ["/login", *PAGES, "/static/console.css", "/nothing-here"]:
        r = client.get(page)
        for name, value in SECURITY_HEADERS.items():
            assert r.headers.get(name) == value, (page, name)
        csp = r.headers["content-security-policy"]
        assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
        assert "script-src" not in csp  # default-src 'none': no script at all
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in r.text.lower() and " style=" not in r.text
    token = consoles.state_dir("alice") / "console.token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(token.parent.stat().st_mode) & 0o077 == 0


def test_console_listens_on_loopback_by_default(consoles):
    from ppdm.console import DEFAULT_LISTEN
    from ppdm.parties.consortium import load_settings

    path = consoles.bed.settings_path("alice")
    text = re.sub(r'(?ms)^\[console\]\nlisten = "[^"]*"\n', "[console]\n", path.read_text())
    assert "[console]\n" in text
    other = path.with_name("alice-default-console.toml")
    other.write_text(text)
    assert load_settings(other).console_listen == DEFAULT_LISTEN == "127.0.0.1:9180"
    assert load_settings(path).console_listen.startswith("127.0.0.1:")


def test_no_page_carries_a_private_value(consoles, planted, wait_for):
    """Values planted in every settings file (conftest); jobs run; every page read."""
    from ppdm.service.client import decide_job

    settings = consoles.bed.settings["alice"]
    job_id, box, thread = consoles.start_job("bob")
    _pending_at_alice(consoles, job_id, wait_for)
    decide_job(settings, job_id, approve=True)
    thread.join(120)
    assert box["doc"]["state"] == "succeeded"
    held, _, held_thread = consoles.start_job("carol")  # one more left pending meanwhile
    _pending_at_alice(consoles, held, wait_for)
    client, csrf = _logged_in(consoles)
    texts = {page: client.get(page).text for page in PAGES}
    for jid in set(re.findall(r'href="/jobs/([0-9a-f]+)"', texts["/jobs"])):
        texts[f"/jobs/{jid}"] = client.get(f"/jobs/{jid}").text
    pages = int(re.search(r"page 1 of (\d+)", texts["/ledger"]).group(1))
    for n in range(2, pages + 1):
        texts[f"/ledger?page={n}"] = client.get(f"/ledger?page={n}").text
    for job in ("secure-sum", "set-union", "intersection-cardinality"):
        texts[f"check {job}"] = client.post(
            "/policy/check",
            data={"csrf": csrf, "job": job, "initiator": "bob", "params": ""},
        ).text
    assert len(texts) >= len(PAGES) + 4
    assert job_id in texts["/jobs"] and held in texts["/pending"]
    values, labels = planted
    for where, text in texts.items():
        for party, value in values.items():
            assert not re.search(rf"(?<![0-9]){value}(?![0-9])", text), (where, party)
            assert f"{value:,}" not in text, (where, party)
        for party, names in labels.items():
            for label in names:
                assert label not in text, (where, party, label)
    decide_job(settings, held, approve=False, reason="test over")
    held_thread.join(120)


# The rules themselves, without a network -------------------------------------------------


def test_login_is_locked_for_a_minute_after_repeated_failures(monkeypatch):
    import ppdm.console.security as sec

    now = [1000.0]
    monkeypatch.setattr(sec.time, "monotonic", lambda: now[0])
    store = SessionStore("the-token")
    for _ in range(LOGIN_FAILURES_PER_MINUTE):
        assert store.login("guess") is None
    assert store.login("the-token") is None  # locked, even with the right token
    now[0] += 61.0
    session = store.login("the-token")
    assert session is not None and store.get(session.sid) is session
    now[0] += sec.SESSION_IDLE_S + 1  # idle sessions end
    assert store.get(session.sid) is None


def test_csrf_and_origin_rules():
    store = SessionStore("t")
    session = store.login("t")
    assert session is not None
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, None) and not csrf_ok(session, "") and not csrf_ok(session, "x")
    host = "127.0.0.1:9180"
    assert same_origin({"sec-fetch-site": "same-origin", "origin": "null"}, host)
    assert same_origin({"sec-fetch-site": "none"}, host)
    assert same_origin({}, host)  # a command-line client: still needs cookie and token
    assert same_origin({"origin": "http://127.0.0.1:9180"}, host)
    for headers in (
        {"sec-fetch-site": "same-site"},
        {"sec-fetch-site": "cross-site", "origin": "http://127.0.0.1:9180"},
        {"origin": "http://127.0.0.1:9181"},
        {"origin": "null"},
    ):
        assert not same_origin(headers, host), headers
