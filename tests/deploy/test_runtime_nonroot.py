"""The container image's runtime, simulated without Docker (issue 16, item 5; issue 22).

What the image does, done here by hand: build the wheel from exactly the files the
Dockerfile's build stage copies (``pip wheel .``), install it the way the runtime stage
does (``pip install --no-index --find-links WHEELS ppdm``: with its dependencies, which
pip resolves and must find satisfied) into a fresh virtual environment, then, as a
non-root user, write a consortium with the installed ``ppdm`` and serve three nodes from
it until the image's health command (``ppdm party health``) passes and a secure-sum job
succeeds.

The dependencies come from the environment running the tests, never from the base
interpreter's site-packages (a fresh ``venv`` has none): the new environment sees a
read-only view of the running environment's site folders with ppdm itself left out, so
nothing is downloaded and pip still resolves every requirement of the wheel. The test
checks that every dependency the installed wheel imports lives in that view or in the
new environment (issue 22: a test relying on packages outside the running environment
fails).

Needs root (to create the user and switch to it); skipped with the reason otherwise, a
failure under ``CI=true``. This machine's Python lives under root's private home (mode
0700), which a real image does not have; each command of the user therefore runs in a
private mount namespace in which only the interpreter and the site folders it needs are
visible under their own paths (``unshare``), so the user still cannot read root's
files, nor another user's.
"""

from __future__ import annotations

import grp
import importlib.metadata
import json
import os
import pwd
import shlex
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppdm.testbed.consortia import free_port_range, kill_tied, spawn_tied

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(900)]

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


@pytest.fixture(scope="module")
def runtime(stages, tier_unavailable) -> Iterator[dict]:
    tier = "non-root runtime"
    if os.geteuid() != 0:
        tier_unavailable(tier, "needs root to create the non-root user and switch to it")
    for tool in ("unshare", "setpriv", "useradd", "mount"):
        if shutil.which(tool) is None:
            tier_unavailable(tier, f"needs {tool}")
    user = _ensure_user(_image_uid(stages[-1]))
    assert user.pw_uid != 0
    base = Path(tempfile.mkdtemp(prefix="ppdm-nonroot-", dir="/tmp"))
    try:
        base.chmod(0o755)
        yield {"user": user, "base": base, **_install(base, stages[1])}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _install(base: Path, build: list[tuple[str, str]]) -> dict:
    # The build stage: copy what it copies, then `pip wheel .` (offline: no isolation,
    # setuptools >= 70.1, which builds wheels itself, comes from the dev extras).
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
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels, "."],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("ppdm-*.whl")
    # The runtime stage: a fresh environment (no system site-packages: those of the base
    # interpreter are not the running environment's), which sees the running
    # environment's packages through a view without ppdm, and the wheel installed with
    # its dependencies as the image installs it (resolved, satisfied from the view).
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=300)
    view = base / "site-view"
    _site_view(view)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    (Path(purelib) / "_ppdm_test_site_view.pth").write_text(f"{view}\n")
    installed = subprocess.run(
        [*pip, "--python", python, "install", "--no-index", "--find-links", wheels, "ppdm"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-3000:]
    return {"venv": venv, "wheel": wheel, "view": view}


def running_site_dirs() -> list[Path]:
    """The site folders the running interpreter imports installed packages from: its own
    environment's (a venv's, or the base interpreter's when it runs without one, plus the
    base's when the venv includes system site-packages) and the user site if enabled."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    on_path = {Path(p).resolve() for p in sys.path if p}
    found: list[Path] = []
    for d in dirs:
        path = Path(d).resolve()
        if path.is_dir() and path in on_path and path not in found:
            found.append(path)
    return found


def _site_view(view: Path) -> None:
    """A folder of links to every entry of the running site folders (first one wins)
    except ppdm's own files, so that the wheel, not this checkout, is ppdm."""
    own: set[str] = set()
    try:
        dist = importlib.metadata.distribution("ppdm")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        own = {Path(str(f)).parts[0] for f in dist.files or ()}
    view.mkdir()
    for folder in running_site_dirs():
        for entry in folder.iterdir():
            name = entry.name
            if (
                name in own
                or name == "ppdm"
                or name.startswith(("ppdm-", "__editable__", "__pycache__"))
                or name.endswith(".pth")
                or (view / name).exists()
            ):
                continue
            (view / name).symlink_to(entry.resolve())


def _visible_paths(rt: dict) -> list[Path]:
    """What the user's commands must see under root-only folders: the interpreter's
    prefix and the running site folders (the view's links point into them)."""
    needed = sorted({Path(sys.base_prefix).resolve(), *running_site_dirs()})
    out: list[Path] = []
    for p in needed:
        if not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return out


def _closed_ancestor(path: Path) -> Path | None:
    """The first folder above ``path`` that others may not enter (/root here)."""
    return next((a for a in reversed(path.parents) if not a.stat().st_mode & 0o001), None)


def _as_user(rt: dict, argv: list[str], *, cwd: Path) -> list[str]:
    """``argv`` run as the user, in a mount namespace where of the folders under
    root-only homes only the interpreter and the running site folders are visible (the
    process keeps the pid: every step execs)."""
    q = shlex.quote
    user = rt["user"]
    shown = [(p, c) for p in _visible_paths(rt) if (c := _closed_ancestor(p)) is not None]
    closed = sorted({c for _, c in shown})
    closed = [c for c in closed if not any(c != o and c.is_relative_to(o) for o in closed)]
    steps = ["true"]
    for i, (p, _) in enumerate(shown):  # stage each folder, hide its closed home, show it
        stage = rt["base"] / "interpreter" / str(i)
        stage.mkdir(parents=True, exist_ok=True)
        steps.append(f"mount --bind {q(str(p))} {q(str(stage))}")
    steps += [f"mount -t tmpfs -o mode=0755,size=1m tmpfs {q(str(c))}" for c in closed]
    for i, (p, _) in enumerate(shown):
        stage = rt["base"] / "interpreter" / str(i)
        steps.append(f"mkdir -p {q(str(p))} && mount --bind {q(str(stage))} {q(str(p))}")
    env = f"env -i HOME={q(str(cwd))} PATH=/usr/bin:/bin LANG=C.UTF-8"
    # --pdeathsig: changing the user clears the parent-death signal spawn_tied armed
    drop = f"setpriv --reuid={user.pw_uid} --regid={user.pw_gid} --init-groups --pdeathsig KILL"
    steps.append(f"cd {q(str(cwd))} && exec {drop} {env} {shlex.join(argv)}")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(steps)]


# Run by the installed environment as the user: where each requirement of the installed
# ppdm is found (its distribution's folder, resolved).
_WHERE_DEPS = """
import importlib.metadata as m, json, os, re
dist = m.distribution("ppdm")
out = {}
for req in dist.requires or ():
    if "extra ==" in req:
        continue
    name = re.split(r"[\\s\\[<>=!~;(]", req, maxsplit=1)[0]
    found = m.distribution(name)
    out[name] = os.path.realpath(str(getattr(found, "_path", found.locate_file(""))))
print(json.dumps({"ppdm": os.path.realpath(str(dist._path)), "deps": out}))
"""


def test_wheel_serves_a_consortium_as_a_non_root_user(runtime: dict) -> None:
    rt = runtime
    user = rt["user"]
    ppdm = str(rt["venv"] / "bin" / "ppdm")
    python = str(rt["venv"] / "bin" / "python")
    home = rt["base"] / "home"
    home.mkdir()
    os.chown(home, user.pw_uid, user.pw_gid)
    etc = home / "etc-ppdm"  # the image's /etc/ppdm volume

    def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            _as_user(rt, argv, cwd=home), capture_output=True, text=True, timeout=timeout
        )

    # The installed wheel is what runs, not this checkout.
    where = run([python, "-c", "import os, ppdm; print(ppdm.__file__, os.getuid())"])
    assert where.returncode == 0, where.stderr
    module, uid = where.stdout.split()
    assert module.startswith(str(rt["venv"])) and int(uid) == user.pw_uid != 0

    # Every dependency of the installed wheel is the running environment's (through the
    # view) or the new environment's, never a package only the base interpreter has.
    deps = run([python, "-c", _WHERE_DEPS])
    assert deps.returncode == 0, deps.stderr
    found = json.loads(deps.stdout)
    assert Path(found["ppdm"]).is_relative_to(rt["venv"])
    allowed = [Path(rt["venv"]).resolve(), *running_site_dirs()]
    assert {"numpy", "grpcio", "tomlkit", "cryptography"} <= set(found["deps"])
    outside = {
        name: path
        for name, path in found["deps"].items()
        if not any(Path(path).is_relative_to(a) for a in allowed)
    }
    assert not outside, f"dependencies from outside the running environment: {outside}"

    # The user cannot read root's files (the namespace shows the interpreter only).
    secret = rt["base"] / "root-only.key"
    secret.write_text("not for the node")
    secret.chmod(0o600)
    denied = run([python, "-c", f"open({str(secret)!r}).read()"])
    assert "PermissionError" in denied.stderr

    port = free_port_range(len(PARTIES))
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
            nodes[p] = spawn_tied(  # dies with this test however it ends
                _as_user(rt, [ppdm, "party", "serve", str(etc / f"{p}.toml")], cwd=home),
                stdout=logs[p],
                stderr=subprocess.STDOUT,
            )
        # the image's HEALTHCHECK command, until it passes (bounded)
        health = ["party", "health", "--settings", str(etc / "alice.toml"), "--timeout", "3"]
        deadline = time.monotonic() + 300  # catches a hang only
        while True:
            done = run([ppdm, *health])
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            assert all(n.poll() is None for n in nodes.values()), _logs(home)
            time.sleep(0.5)
        assert done.returncode == 0, done.stdout + done.stderr + _logs(home)
        done = run([ppdm, *health, "--json"])
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
                node.wait(timeout=120)
            except subprocess.TimeoutExpired:
                kill_tied(node)
        for f in logs.values():
            f.close()
    assert all(n.returncode == 0 for n in nodes.values()), _logs(home)  # clean stop


def _logs(home: Path) -> str:
    return "\n".join(
        f"--- {p}\n" + (home / f"{p}.log").read_text(errors="replace")[-2000:]
        for p in PARTIES
        if (home / f"{p}.log").exists()
    )
