"""The container image's runtime, simulated without Docker (issue 16, item 5).

What the image does, done here by hand: build the wheel from exactly the files the
Dockerfile's build stage copies (``pip wheel .``), install it into a fresh virtual
environment (``--system-site-packages`` and ``--no-deps``: the dependencies are this
machine's, so nothing is downloaded), then, as a non-root user, write a consortium with
the installed ``ppdm`` and serve three nodes from it until the image's health command
(``ppdm party health``) passes and a secure-sum job succeeds.

Needs root (to create the user and switch to it); skipped with the reason otherwise.
This machine's Python lives under root's private home (mode 0700), which a real image
does not have; each command of the user therefore runs in a private mount namespace in
which only that interpreter is visible under the same path (``unshare``), so the
user still cannot read root's files, nor another user's.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
USER = "ppdm"
PARTIES = ("alice", "bob", "carol")


def _image_uid(runtime: list[tuple[str, str]]) -> int:
    arg = next(a for op, a in runtime if op == "ARG" and a.startswith("PPDM_UID="))
    return int(arg.split("=", 1)[1])


def _ensure_user(uid: int) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    ids: list[str] = []
    try:
        pwd.getpwuid(uid)
    except KeyError:
        ids = ["--uid", str(uid)]  # the image's uid (and gid) when it is free
    try:
        grp.getgrnam(USER)
    except KeyError:
        gid = ["--gid", str(uid)] if ids and not _gid_taken(uid) else []
        subprocess.run(["groupadd", "--system", *gid, USER], check=True, timeout=30)
    cmd = ["useradd", "--system", "--gid", USER, "--no-create-home", *ids]
    cmd += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"]
    subprocess.run([*cmd, USER], check=True, capture_output=True, timeout=30)
    return pwd.getpwnam(USER)


def _gid_taken(gid: int) -> bool:
    try:
        grp.getgrgid(gid)
    except KeyError:
        return False
    return True


def _free_base_port(count: int) -> int:
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count >= 65536:
            continue
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free run of ports")


@pytest.fixture(scope="module")
def runtime(stages) -> Iterator[dict]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the non-root user and switch to it")
    for tool in ("unshare", "setpriv", "useradd", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    user = _ensure_user(_image_uid(stages[-1]))
    assert user.pw_uid != 0
    base = Path(tempfile.mkdtemp(prefix="ppdm-nonroot-", dir="/tmp"))
    try:
        base.chmod(0o755)
        yield {"user": user, "base": base, **_install(base, stages[1])}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _install(base: Path, build: list[tuple[str, str]]) -> dict:
    # The build stage: copy what it copies, then `pip wheel .` (offline: no isolation).
    context = base / "context"
    context.mkdir()
    for op, args in build:
        if op == "COPY":
            *sources, dest = args.split()
            for src in sources:
                target = context / (src if dest.endswith("/") or dest == "./" else dest)
                if (ROOT / src).is_dir():
                    shutil.copytree(
                        ROOT / src, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy2(ROOT / src, target)
    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, "."],
        cwd=context,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = wheels.glob("ppdm-*.whl")
    # The runtime stage: a fresh environment with the wheel installed, nothing else.
    venv = base / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv],
        check=True,
        timeout=120,
    )
    subprocess.run(
        [*pip, "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index", wheel],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return {"venv": venv, "wheel": wheel}


def _as_user(rt: dict, argv: list[str], *, cwd: Path) -> list[str]:
    """``argv`` run as the user, in a mount namespace where only the interpreter under
    root's home is visible (the process keeps the pid: every step execs)."""
    prefix = Path(sys.base_prefix)
    view = rt["base"] / "interpreter"
    view.mkdir(exist_ok=True)
    user = rt["user"]
    steps = ["true"]
    # the first folder above the interpreter that others may not enter (/root here)
    closed = next((a for a in reversed(prefix.parents) if not a.stat().st_mode & 0o001), None)
    if closed is not None:  # hide it, and show the interpreter alone at its own path
        q = shlex.quote
        steps += [
            f"mount --bind {q(str(prefix))} {q(str(view))}",
            f"mount -t tmpfs -o mode=0755,size=1m tmpfs {q(str(closed))}",
            f"mkdir -p {q(str(prefix))}",
            f"mount --bind {q(str(view))} {q(str(prefix))}",
        ]
    env = f"env -i HOME={shlex.quote(str(cwd))} PATH=/usr/bin:/bin LANG=C.UTF-8"
    drop = f"setpriv --reuid={user.pw_uid} --regid={user.pw_gid} --init-groups"
    steps.append(f"cd {shlex.quote(str(cwd))} && exec {drop} {env} {shlex.join(argv)}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(steps)]


def test_wheel_serves_a_consortium_as_a_non_root_user(runtime: dict) -> None:
    rt = runtime
    user = rt["user"]
    ppdm = str(rt["venv"] / "bin" / "ppdm")
    python = str(rt["venv"] / "bin" / "python")
    home = rt["base"] / "home"
    home.mkdir()
    os.chown(home, user.pw_uid, user.pw_gid)
    etc = home / "etc-ppdm"  # the image's /etc/ppdm volume

    def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _as_user(rt, argv, cwd=home), capture_output=True, text=True, timeout=timeout
        )

    # The installed wheel is what runs, not this checkout.
    where = run([python, "-c", "import os, ppdm; print(ppdm.__file__, os.getuid())"])
    assert where.returncode == 0, where.stderr
    module, uid = where.stdout.split()
    assert module.startswith(str(rt["venv"])) and int(uid) == user.pw_uid != 0

    # The user cannot read root's files (the namespace shows the interpreter only).
    secret = rt["base"] / "root-only.key"
    secret.write_text("not for the node")
    secret.chmod(0o600)
    denied = run([python, "-c", f"open({str(secret)!r}).read()"])
    assert "PermissionError" in denied.stderr

    port = _free_base_port(len(PARTIES))
    names = ",".join(PARTIES)
    where_to = ["--host", "127.0.0.1", "--base-port", str(port), "--out", str(etc)]
    init = run([ppdm, "consortium", "init", "--parties", names, *where_to])
    assert init.returncode == 0, init.stderr
    key = etc / "private" / "alice.key"
    assert key.stat().st_uid == user.pw_uid and key.stat().st_mode & 0o777 == 0o600

    nodes: dict[str, subprocess.Popen[bytes]] = {}
    logs = {p: (home / f"{p}.log").open("wb") for p in PARTIES}
    try:
        for p in PARTIES:
            nodes[p] = subprocess.Popen(
                _as_user(rt, [ppdm, "party", "serve", str(etc / f"{p}.toml")], cwd=home),
                stdout=logs[p],
                stderr=subprocess.STDOUT,
            )
        # the image's HEALTHCHECK command, until it passes (bounded)
        health = ["party", "health", "--settings", str(etc / "alice.toml"), "--timeout", "3"]
        deadline = time.monotonic() + 60
        while True:
            done = run([ppdm, *health])
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            assert all(n.poll() is None for n in nodes.values()), _logs(home)
            time.sleep(0.5)
        assert done.returncode == 0, done.stdout + done.stderr + _logs(home)
        report = json.loads(done.stdout)
        assert sorted(report) == list(PARTIES) and all(r["ok"] for r in report.values())

        for p, node in nodes.items():  # each node process is the user's, not root's
            status = Path(f"/proc/{node.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uids.split()[1:] == [str(user.pw_uid)] * 4, (p, uids)

        out = home / "sum.json"
        bob = str(etc / "bob.toml")
        job = run([ppdm, "job", "run", "secure-sum", "--settings", bob, "--output", str(out)])
        assert job.returncode == 0, job.stdout + job.stderr + _logs(home)
        inputs = [
            tomllib.loads((etc / f"{p}.toml").read_text())["inputs"]["secure_sum"] for p in PARTIES
        ]
        doc = json.loads(out.read_text())
        assert {p: r["result"]["sum"] for p, r in doc["parties"].items()} == dict.fromkeys(
            PARTIES, sum(inputs)
        )
        ledger = etc / "state" / "alice" / "ledger.sqlite"
        assert ledger.stat().st_uid == user.pw_uid  # the state the node writes is its own
    finally:
        for node in nodes.values():
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in nodes.values():
            try:
                node.wait(timeout=15)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait(timeout=5)
        for f in logs.values():
            f.close()
    assert all(n.returncode == 0 for n in nodes.values()), _logs(home)  # clean stop


def _logs(home: Path) -> str:
    return "\n".join(
        f"--- {p}\n" + (home / f"{p}.log").read_text(errors="replace")[-2000:]
        for p in PARTIES
        if (home / f"{p}.log").exists()
    )
