"""No private value crosses a party boundary in an error: every job, hostile parameters,
real gRPC nodes (in this process) under the open policy (so that jobs run and fail inside)
and under the default policy (so that they are refused). Checked: every Abort any party
receives, every error field of the job document the initiator assembles."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppdm.jobs.registry import get_job, job_names
from ppdm.parties.network import Endpoint
from ppdm.proto.ppdm.v1 import envelope_pb2 as env_pb
from ppdm.service.client import run_job
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.service.testbed import LoopbackConsortium

pytestmark = pytest.mark.grpc

PARTIES = ("alice", "bob", "carol")
NUMBERS = {"alice": 7301911, "bob": -8402227, "carol": 9503393}
SET_SIZES = {"alice": 53, "bob": 59, "carol": 61}


def _label(p: str, i: int) -> str:
    return f"zq{p}secret{i:03d}"


def _private_tokens() -> list[str]:
    out = [str(abs(v)) for v in NUMBERS.values()]
    out += [_label(p, 0) for p in PARTIES] + [f"{p}colsecret" for p in PARTIES]
    out += [str(v) for v in SET_SIZES.values()]
    return out


def _setup(root):
    inputs, data = {}, {}
    for k, p in enumerate(PARTIES):
        n = SET_SIZES[p]
        inputs[p] = {
            "secure_sum": NUMBERS[p],
            "dot_product": [NUMBERS[p] % 7 + i for i in range(5)],
            "set_union": [_label(p, i) for i in range(n)],
            "intersection": [_label(p, i) for i in range(n)],
        }
        (root / f"{p}.csv").write_text(
            f"record_id,{p}colsecret\n"
            + "".join(f"{i},{(NUMBERS[p] + i) % 1000}.25\n" for i in range(9))
        )
        (root / f"{p}-b.csv").write_text(
            "".join(f"{_label(p, i)},{_label(p, i + 1)}\n" for i in range(5))
        )
        data[p] = {"records": str(root / f"{p}.csv"), "transactions": str(root / f"{p}-b.csv")}
        del k
    return inputs, data


@pytest.fixture(scope="module")
def consortia(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    inputs, data = _setup(root)
    beds = {}
    for name, policy in (("open", OPEN_POLICY_TOML), ("default", None)):
        bed = LoopbackConsortium(PARTIES, root / name, policy=policy)
        for p, s in bed.settings.items():
            s.raw.setdefault("inputs", {}).update(inputs[p])
            s.raw.setdefault("data", {}).update(data[p])
        beds[name] = bed.start()
    yield beds
    for bed in beds.values():
        bed.stop()


HOSTILE = st.one_of(
    st.sampled_from([0, -1, 1, 2, 3, 2**64, -(2**70), 1e308, -0.5, "", "x", None, True, [], {}]),
    st.sampled_from([[1, 2], {"bobcolsecret": [1.0]}, "bob", "alice", "mallory", "../../etc"]),
    st.integers(-5, 70),
)

JOBS = [j for j in job_names() if not j.startswith("test-") and j not in ("stream",)]


@st.composite
def hostile_params(draw):
    job = draw(st.sampled_from(JOBS))
    keys = sorted(get_job(job).defaults)
    chosen = draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)) if keys else []
    params = {k: draw(HOSTILE) for k in chosen}
    # Keep generated workloads small (the point is the errors, not the speed).
    for k, small in (
        ("count", 50),
        ("length", 20),
        ("generate_n", 20),
        ("points", 20),
        ("size", 64),
    ):
        value = params.get(k)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > small:
            params[k] = small
    if job == "ring-echo":
        params["delay_s"] = 0.0
    return job, params


def _leaks(text: str) -> list[str]:
    return [
        t
        for t in _private_tokens()
        if re.search(rf"(?<![0-9A-Za-z]){re.escape(t)}(?![0-9A-Za-z])", text)
    ]


@settings(
    max_examples=45,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    case=hostile_params(),
    which=st.sampled_from(["open", "default"]),
    initiator=st.sampled_from(PARTIES),
)
def test_no_private_value_in_any_error_or_abort(consortia, case, which, initiator):
    job, params = case
    bed = consortia[which]
    aborts: list[str] = []
    original = Endpoint.deliver

    def spy(self, data, *, sender=None):
        try:
            env = env_pb.Envelope.FromString(bytes(data))
            if env.WhichOneof("body") == "abort":
                aborts.append(
                    f"{env.abort.code} {env.abort.party} {env.abort.step} {env.abort.reason}"
                )
        except Exception:
            pass
        return original(self, data, sender=sender)

    Endpoint.deliver = spy  # type: ignore[method-assign]
    try:
        try:
            doc = run_job(bed.settings[initiator], job, params, timeout=4, deadline=30)
        except Exception as exc:  # refused locally (unknown parameter values, ...)
            doc = {"local_error": str(exc)}
    finally:
        Endpoint.deliver = original  # type: ignore[method-assign]
    errors = [doc.get("error") or "", doc.get("local_error", "")]
    for record in doc.get("parties", {}).values():
        errors += [record.get("error") or "", record.get("error_step") or ""]
        if record.get("state") != "succeeded":
            errors.append(json.dumps(record.get("result")))
    for d in doc.get("decisions", {}).values():
        errors.append(d.get("reason") or "")
    leaked = _leaks("\n".join(errors + aborts))
    assert not leaked, (job, params, leaked, errors, aborts)
