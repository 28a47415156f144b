"""The container image, compose file and systemd unit in deploy/ (issue 16, item 5).

Docker cannot build here (no daemon, no base image registry), so these tests read the
files and hold them to what can be checked without it: the image builds the wheel from
this checkout with ``pip wheel .`` and installs it, runs as a fixed non-root user, exposes
the node port and has a health check; every command in the compose file and the unit is
one the ``ppdm`` CLI accepts, the compose file's settings paths are the files ``ppdm
consortium init`` writes, and its commands are the ones docs/deployment.md documents.
``test_runtime_nonroot.py`` runs the installed wheel as a non-root user.
"""

from __future__ import annotations

import configparser
import io
import re
import shlex
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from ppdm.cli.main import build_parser, main
from ppdm.parties.consortium import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
PARTIES = ("alice", "bob", "carol")


# Dockerfile -----------------------------------------------------------------------------


def cli_accepts(argv: list[str]) -> None:
    """Fail unless ``ppdm`` argv parses with the CLI's own parser (argparse)."""
    assert argv[0] == "ppdm", argv
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            build_parser().parse_args(argv[1:])
    except SystemExit as exc:  # argparse: exit 2 on a bad command line
        pytest.fail(f"ppdm rejects {shlex.join(argv)}: {err.getvalue().strip()} ({exc.code})")


def test_image_builds_the_wheel_from_this_checkout_and_installs_it(stages) -> None:
    preamble, build, runtime = stages  # ARG before FROM, then two stages
    assert build[0] == ("FROM", "${PYTHON_IMAGE} AS build")
    assert runtime[0] == ("FROM", "${PYTHON_IMAGE} AS runtime")
    assert ("ARG", "PYTHON_IMAGE=python:3.11-slim") in preamble
    copied = [args.split() for op, args in build if op == "COPY"]
    sources = {src for *srcs, _dest in copied for src in srcs}
    assert {"pyproject.toml", "ppdm"} <= sources  # the package and its build definition
    # ... and what pyproject.toml needs besides (its readme): the wheel builds from these
    assert "README.md" in sources
    runs = [args for op, args in build if op == "RUN"]
    # the checkout with the extras a node's sources need (README: the core and the extras)
    assert any(re.search(r'\bpip wheel\b.*\s"\.\[\$\{PPDM_EXTRAS\}\]"$', r) for r in runs), runs
    assert ("ARG", "PPDM_EXTRAS=files,sql") in build
    installs = [args for op, args in runtime if op == "RUN" and "pip install" in args]
    assert len(installs) == 1
    install = installs[0]
    assert "from=build" in install and "--no-index" in install
    assert '--find-links /wheels "ppdm[${PPDM_EXTRAS}]"' in install
    assert ("ARG", "PPDM_EXTRAS=files,sql") in runtime
    # nothing else of the build stage is copied into the runtime image
    assert not [a for op, a in runtime if op == "COPY" and "--from" in a]


def test_image_runs_as_a_fixed_non_root_user(stages) -> None:
    runtime = stages[-1]
    args = dict((op, a) for op, a in runtime if op in ("ARG", "USER"))
    uid = int(args["ARG"].split("=")[1])
    assert uid >= 1000
    assert args["USER"] == "${PPDM_UID}:${PPDM_UID}"  # numeric: runAsNonRoot can check it
    users = [a for op, a in runtime if op == "RUN" and "useradd" in a]
    assert users and "--uid ${PPDM_UID}" in users[0] and "nologin" in users[0]
    ops = [op for op, _ in runtime]
    # the entry point runs after USER: nothing later switches back to root
    assert ops.index("USER") < ops.index("ENTRYPOINT")
    assert ops.count("USER") == 1
    volumes = next(a for op, a in runtime if op == "VOLUME")
    assert set(re.findall(r'"([^"]+)"', volumes)) == {"/etc/ppdm", "/var/lib/ppdm", "/data"}
    assert "install -d -o ppdm -g ppdm" in users[0]  # the volumes belong to the user


def test_image_exposes_the_node_port_and_checks_health(stages) -> None:
    runtime = stages[-1]
    found = dict((op, a) for op, a in runtime)
    init_defaults = build_parser().parse_args(
        ["consortium", "init", "--parties", "a", "--out", "x"]
    )
    assert found["EXPOSE"] == str(init_defaults.base_port)  # the first party's port
    health = found["HEALTHCHECK"]
    assert "--interval=" in health and "--timeout=" in health
    cmd = health.split(" CMD ", 1)[1]
    assert cmd.endswith("> /dev/null || exit 1")
    argv = shlex.split(cmd.split(">")[0].replace('"$PPDM_SETTINGS"', "/etc/ppdm/party.toml"))
    assert argv[:3] == ["ppdm", "party", "health"]
    cli_accepts(argv)
    entry = yaml.safe_load(found["ENTRYPOINT"]) + yaml.safe_load(found["CMD"])  # JSON arrays
    assert entry == ["ppdm", "party", "serve", "/etc/ppdm/party.toml"]
    cli_accepts(entry)
    assert "PPDM_SETTINGS=/etc/ppdm/party.toml" in found["ENV"]


def test_docker_build_context_holds_what_the_build_stage_copies(stages) -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert ignore[ignore.index("*") :][:1] == ["*"]  # everything out, then what is needed
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = {src for op, a in stages[1] if op == "COPY" for src in a.split()[:-1]}
    assert copied <= allowed
    for src in copied:
        assert (ROOT / src).exists(), src


# compose.yaml ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _argv(service: dict, image_entrypoint: list[str]) -> list[str]:
    entry = service.get("entrypoint", image_entrypoint)
    command = service.get("command", [])
    assert isinstance(entry, list) and isinstance(command, list)  # exec form, no shell
    return [str(x) for x in entry + command]


def test_every_compose_command_is_a_ppdm_command(compose, stages) -> None:
    found = dict((op, a) for op, a in stages[-1])
    image_entry = yaml.safe_load(found["ENTRYPOINT"])
    services = compose["services"]
    assert set(services) == {"init", *PARTIES}
    for service in services.values():
        cli_accepts(_argv(service, image_entry))
        test = service.get("healthcheck", {}).get("test")
        if test is not None:
            assert test[0] == "CMD"
            cli_accepts(test[1:])
    init = _argv(services["init"], image_entry)
    assert init[:3] == ["ppdm", "consortium", "init"]
    assert services["init"]["profiles"] == ["init"]  # a one-shot, not part of `up`


def test_three_party_services_with_their_own_health_and_volumes(compose) -> None:
    services = compose["services"]
    volumes = set(compose["volumes"])
    for party in PARTIES:
        service = services[party]
        assert service["image"] == "ppdm:latest"
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert service["command"] == [f"/etc/ppdm/{party}.toml"]
        assert service["environment"]["PPDM_SETTINGS"] == f"/etc/ppdm/{party}.toml"
        assert service["healthcheck"]["test"][1:] == [
            "ppdm",
            "party",
            "health",
            "--self",
            "--settings",
            f"/etc/ppdm/{party}.toml",
            "--timeout",
            "5",
        ]
        assert "user" not in service  # the image's non-root user
        mounts = dict(m.split(":")[:2][::-1] for m in service["volumes"])
        assert mounts["/etc/ppdm"] == "consortium"
        assert mounts["/data"] == f"{party}-data"  # each party's data volume is its own
        assert set(mounts.values()) <= volumes
        assert "ALL" in service["cap_drop"] and service["read_only"] is True


def test_compose_settings_are_the_files_init_writes(compose, tmp_path: Path) -> None:
    """Run the compose file's init command (into a temporary folder) and load every
    party's settings exactly as its service names them; the roster addresses must be
    reachable from every node's network namespace."""
    services = compose["services"]
    argv = [str(x) for x in services["init"]["entrypoint"] + services["init"]["command"]]
    out = argv[argv.index("--out") + 1]
    argv[argv.index("--out") + 1] = str(tmp_path)
    with redirect_stdout(io.StringIO()):
        assert main(argv[1:]) == 0
    host = argv[argv.index("--host") + 1]
    for party in PARTIES:
        path = services[party]["command"][0]
        assert Path(path).parent == Path(out)
        settings = load_settings(tmp_path / Path(path).name)
        assert settings.name == party
        assert settings.listen.startswith(f"{host}:")
    if host == "127.0.0.1":  # loopback addresses: one shared network namespace
        for party in PARTIES[1:]:
            assert services[party]["network_mode"] == f"service:{PARTIES[0]}"


def test_compose_commands_are_the_documented_ones(compose) -> None:
    docs = (ROOT / "docs" / "deployment.md").read_text()
    section = docs.split("## Containers and systemd", 1)[1].split("\n## ", 1)[0]
    services = compose["services"]
    init = services["init"]["entrypoint"] + services["init"]["command"]
    assert shlex.join(init) in section
    assert "docker compose -f deploy/compose.yaml run --rm init" in section
    assert "docker compose -f deploy/compose.yaml up -d" in section
    assert "ppdm party serve /etc/ppdm/%i.toml" in section  # the systemd unit's
    # the compose file's own header shows the same commands
    header = (DEPLOY / "compose.yaml").read_text().split("\nname:", 1)[0]
    assert "docker compose -f deploy/compose.yaml run --rm init" in header
    assert "docker compose -f deploy/compose.yaml up -d" in header
    checked = 0
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            argv: list[str] | None = None
            if words[:1] == ["ppdm"]:
                argv = words
            elif words[:2] == ["docker", "compose"] and "exec" in words:
                argv = words[words.index("ppdm") :]
            elif words[:2] == ["docker", "compose"] and "run" in words:
                rest = words[words.index("init") + 1 :]  # init's entry point is ppdm
                argv = ["ppdm", *rest] if rest else init
            elif words[:2] == ["docker", "run"]:
                argv = ["ppdm", "party", "serve", *words[words.index("ppdm:latest") + 1 :]]
            if argv is not None:
                cli_accepts([str(w) for w in argv])
                checked += 1
    assert checked == 5  # docker run, init, partition, two job runs


# systemd unit ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string((DEPLOY / "ppdm-node@.service").read_text())
    return parser


def test_systemd_unit_runs_ppdm_party_serve_as_a_non_root_user(unit) -> None:
    service = unit["Service"]
    assert service["User"] == "ppdm" and service["Group"] == "ppdm"
    exec_start = shlex.split(service["ExecStart"])
    assert Path(exec_start[0]).name == "ppdm" and Path(exec_start[0]).is_absolute()
    assert exec_start[1:] == ["party", "serve", "/etc/ppdm/%i.toml"]
    cli_accepts(["ppdm", *exec_start[1:]])
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["Restart"] == "on-failure"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "ProtectHome": "yes",
        "CapabilityBoundingSet": "",
    }.items():
        assert service[key] == value, key
    # the only writable place is the instance's state folder
    assert service["ReadWritePaths"] == "/var/lib/ppdm/%i"
    assert service["StateDirectory"] == "ppdm/%i"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    """``systemd-analyze verify`` on an instance of the unit, with ExecStart pointing at
    this machine's ``ppdm`` (the unit names /usr/local/bin/ppdm)."""
    ppdm = shutil.which("ppdm")
    assert ppdm is not None
    text = (DEPLOY / "ppdm-node@.service").read_text()
    text = text.replace("/usr/local/bin/ppdm", ppdm)
    path = tmp_path / "ppdm-node@alice.service"
    path.write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    problems = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if "ppdm-node@alice.service" in line
    ]
    assert done.returncode == 0 and not problems, done.stdout + done.stderr
