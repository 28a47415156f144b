"""The data-owner policy: parsing, validation and evaluation on declared leakage."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdm.errors import ConfigError
from ppdm.jobs.registry import PartyContext
from ppdm.service.policy import (
    DEFAULT_POLICY_TOML,
    PolicyFile,
    evaluate,
    load_policy,
    parse_policy,
)
from ppdm.service.profiles import get_profile, profile_names

ROSTER = ["alice", "bob", "carol", "dave", "mallory"]


def policy(text: str = ""):
    return parse_policy(tomllib.loads("version = 1\n" + text), source="<test>")


def ctx(tmp_path: Path, **inputs) -> PartyContext:
    return PartyContext(name="bob", settings={"inputs": inputs, "data": {}}, base_dir=tmp_path)


def decide(pol, job, params=None, parties=("alice", "bob", "carol"), initiator="alice", c=None):
    from ppdm.jobs.registry import get_job

    merged = get_job(job).params(params or {})
    prof = get_profile(job)
    disclosure = prof.disclosure(merged, list(parties), "bob", c) if prof else None
    return evaluate(
        pol,
        job=job,
        params=merged,
        initiator=initiator,
        parties=list(parties),
        me="bob",
        disclosure=disclosure,
    )


def test_default_policy_parses_and_is_what_init_writes():
    p = load_policy(None)
    assert p.rules("secure-sum").min_parties == 3
    assert p.rules("secure-sum").allow
    assert parse_policy(tomllib.loads(DEFAULT_POLICY_TOML)) == p.__class__(
        defaults=p.defaults, jobs=p.jobs, data=p.data, source="<policy>"
    )


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("oops = 1", "unknown top-level"),
        ("[defaults]\nmin_parties = 0", "min_parties"),
        ("[defaults]\nmin_parties = 5\nmax_parties = 4", "above max_parties"),
        ("[defaults]\nresults = 'everyone'", "results must be one of"),
        ("[defaults]\nrate_limit = { jobs = 0, per_s = 10 }", "rate_limit.jobs"),
        ("[defaults]\nconsent = 'yes'", "consent must be true or false"),
        ("[defaults]\ninitiators = 'alice'", "list of names"),
        ("[defaults]\nfoo = 1", "unknown key(s) in [defaults]: foo"),
        ("[jobs.assoc]\nbogus = 1", "jobs.assoc: unknown key(s) bogus"),
        ("[jobs.assoc.params]\nmin_support = 0.1", "must be a table"),
        ("[jobs.assoc.params]\nmin_support = { min = 0.5, max = 0.1 }", "min is above max"),
        ("[jobs.assoc.params]\nmin_support = { any = false }", "any must be true"),
        ("[data.records]\ncolumns = 'age'", "data.records.columns"),
        ("[data.records]\nmin_support = 2", "fraction"),
        ("[inputs.secure_sum]\nwhatever = 1", "unknown key(s) whatever"),
    ],
)
def test_bad_policies_are_refused_naming_the_key(text, fragment):
    with pytest.raises(ConfigError) as info:
        policy(text)
    assert fragment in str(info.value)


def test_a_policy_must_say_its_version(tmp_path):
    for text, fragment in (("", "starts with 'version = 1'"), ("version = 2", "version must be 1")):
        with pytest.raises(ConfigError, match=fragment):
            parse_policy(tomllib.loads(text))


def test_policy_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="policy file not found"):
        load_policy(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[defaults\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_policy(bad)


def test_policy_file_reloads_and_keeps_the_old_one_when_broken(tmp_path):
    import os
    import time

    path = tmp_path / "p.toml"

    def write(text, *, age):
        path.write_text("version = 1\n" + text)
        t = time.time() - age
        os.utime(path, (t, t))

    write("[defaults]\nmin_parties = 3\n", age=5)
    pf = PolicyFile(path)
    assert pf.current().rules("secure-sum").min_parties == 3
    write("[defaults]\nmin_parties = 4\n# longer\n", age=0)
    assert pf.current().rules("secure-sum").min_parties == 3  # not settled yet
    write("[defaults]\nmin_parties = 4\n# longer\n", age=5)
    assert pf.current().rules("secure-sum").min_parties == 4
    write("[defaults]\nmin_parties = 'many'\n# longer still\n", age=5)
    assert pf.current().rules("secure-sum").min_parties == 4  # kept
    path.write_text("")  # a half-written file is not the default policy
    os.utime(path, (time.time() - 5, time.time() - 5))
    assert pf.current().rules("secure-sum").min_parties == 4
    write("[defaults]\nmin_parties = 5\n", age=0)
    assert pf.reload() and pf.current().rules("secure-sum").min_parties == 5  # SIGHUP: at once


def test_two_party_aggregates_are_refused_by_default(tmp_path):
    c = ctx(tmp_path, secure_sum=5, dot_product=[1, 0, 1])
    p = policy()
    for job in ("secure-sum", "secure-sum-shared", "set-union", "intersection-cardinality"):
        d = decide(p, job, parties=("bob", "mallory"), initiator="mallory", c=c)
        assert (d.outcome, d.rule) == ("refuse", "min_parties"), job
    d = decide(p, "paillier-dot-product", parties=("bob", "mallory"), initiator="mallory", c=c)
    assert (d.outcome, d.rule) == ("refuse", "min_parties")
    # Even among many members, the dot product itself has two participants.
    d = decide(p, "paillier-dot-product", parties=tuple(ROSTER), initiator="mallory", c=c)
    assert (d.outcome, d.rule) == ("refuse", "min_parties")
    assert decide(p, "secure-sum", parties=("alice", "bob", "carol"), c=c).outcome == "accept"


def test_generated_inputs_need_no_minimum(tmp_path):
    c = ctx(tmp_path)
    p = policy()
    assert (
        decide(p, "paillier-dot-product", {"length": 100}, ("alice", "bob"), c=c).outcome
        == "accept"
    )
    assert decide(p, "ot-extension", {"count": 10}, ("alice", "bob"), c=c).outcome == "accept"
    assert decide(p, "set-union", {"generate_n": 10}, ("alice", "bob"), c=c).outcome == "accept"


@pytest.mark.parametrize(
    "job, params, rule",
    [
        ("assoc", {"reveal_counts": True}, "params.reveal_counts"),
        ("assoc", {"report_local": True}, "params.report_local"),
        ("assoc", {"fake_ratio": 0.0}, "params.fake_ratio"),
        ("kmeans", {"include_labels": True}, "params.include_labels"),
        ("kmeans", {"report_local": True}, "params.report_local"),
        ("set-union", {"pad_to": 1000}, "params.pad_to"),
        ("secure-sum-shared", {"aggregator": "alice"}, "params.aggregator"),
        ("kmeans", {"init": [[0.0, 1.0]]}, "params.init"),
    ],
)
def test_disclosure_parameters_are_refused_unless_allowed(tmp_path, job, params, rule):
    (tmp_path / "r.csv").write_text("record_id,age,income\n1,30,10\n")
    (tmp_path / "t.dat").write_text("1 2\n")
    c = PartyContext(
        name="bob",
        settings={
            "inputs": {"secure_sum": 1, "set_union": ["x"]},
            "data": {"records": "r.csv", "transactions": "t.dat"},
        },
        base_dir=tmp_path,
    )
    d = decide(policy(), job, params, c=c)
    assert (d.outcome, d.rule) == ("refuse", rule)
    name = rule.split(".", 1)[1]
    if name != "init":
        allowed = policy(f"[jobs.{job}.params]\n{name} = {{ any = true }}\n")
        assert decide(allowed, job, params, c=c).outcome == "accept"


def test_explicit_centres_only_refused_on_own_columns(tmp_path):
    (tmp_path / "r.csv").write_text("record_id,age\n1,30\n")
    c = PartyContext(name="bob", settings={"data": {"records": "r.csv"}}, base_dir=tmp_path)
    # Vertical k-means publishes every record's label: the owner opts in to that first.
    p = policy("[defaults]\nallow_records = true\n")
    job = {"mode": "vertical", "k": 1, "min_cluster_size": 10}
    own = decide(p, "kmeans", {**job, "init": {"age": [1.0]}}, c=c)
    assert (own.outcome, own.rule) == ("refuse", "params.init")
    other = decide(p, "kmeans", {**job, "init": {"income": [1.0]}}, c=c)
    assert other.outcome == "accept"
    allowed = policy("[defaults]\nallow_records = true\n[data.records]\nexplicit_centres = true\n")
    assert decide(allowed, "kmeans", {**job, "init": {"age": [1.0]}}, c=c).outcome == "accept"
    # Without the opt-in, the per-record labels are refused by the statement rule.
    assert decide(policy(), "kmeans", {**job, "init": {"income": [1.0]}}, c=c).rule == (
        "allow_records"
    )


def test_initiators_co_parties_jobs_rate_and_consent(tmp_path):
    c = ctx(tmp_path, secure_sum=1)
    p = policy('[defaults]\ninitiators = ["alice"]\nco_parties = ["alice", "carol", "dave"]\n')
    assert decide(p, "secure-sum", initiator="carol", c=c).rule == "initiators"
    assert decide(p, "secure-sum", parties=("alice", "bob", "mallory"), c=c).rule == "co_parties"
    assert decide(p, "secure-sum", c=c).outcome == "accept"
    off = policy("[jobs.secure-sum]\nallow = false\n")
    assert decide(off, "secure-sum", c=c).rule == "jobs.secure-sum.allow"
    only = policy('[defaults]\njobs = ["assoc"]\n')
    assert decide(only, "secure-sum", c=c).rule == "jobs.secure-sum.allow"
    unknown = evaluate(
        policy(),
        job="mystery",
        params={},
        initiator="alice",
        parties=["alice", "bob"],
        me="bob",
        disclosure=None,
    )
    assert unknown.rule == "jobs"
    rate = policy("[defaults]\nrate_limit = { jobs = 2, per_s = 60 }\n")
    d = evaluate(
        rate,
        job="secure-sum",
        params={"modulus": None},
        initiator="alice",
        parties=["alice", "bob", "carol"],
        me="bob",
        disclosure=get_profile("secure-sum").disclosure({}, ["alice", "bob", "carol"], "bob", c),
        recent_by_initiator=2,
    )
    assert d.rule == "rate_limit"
    consent = policy("[defaults]\nconsent = true\nconsent_timeout_s = 30\n")
    d = decide(consent, "secure-sum", c=c)
    assert (d.outcome, d.rule, d.expires_s) == ("pending", "consent", 30.0)
    # Jobs on public data need no consent unless the job's own table asks for it.
    assert decide(consent, "ot-extension", {"count": 1}, c=c).outcome == "accept"
    assert (
        decide(policy("[jobs.ot-extension]\nconsent = true\n"), "ot-extension", c=c).outcome
        == "pending"
    )


def test_data_rules_columns_min_sizes(tmp_path):
    (tmp_path / "r.csv").write_text("record_id,age,income\n1,30,10\n")
    (tmp_path / "t.dat").write_text("1 2\n")
    c = PartyContext(
        name="bob",
        settings={"data": {"records": "r.csv", "transactions": "t.dat"}},
        base_dir=tmp_path,
    )
    p = policy(
        "[defaults]\nmin_aggregate = 5\n"
        '[data.records]\njobs = ["kmeans"]\ncolumns = ["age"]\nmin_cluster_size = 5\n'
        "[data.transactions]\nmin_support = 0.05\nmin_parties = 4\n"
    )
    assert (
        decide(p, "kmeans", {"columns": ["age"], "min_cluster_size": 4}, c=c).rule
        == "data.records.min_cluster_size"
    )
    assert decide(p, "kmeans", {"columns": ["age"], "min_cluster_size": 5}, c=c).outcome == "accept"
    assert (
        decide(p, "kmeans", {"columns": ["age", "income"], "min_cluster_size": 5}, c=c).rule
        == "data.records.columns"
    )
    assert decide(p, "kmeans", {"min_cluster_size": 5}, c=c).rule == "data.records.columns"
    assert decide(p, "assoc", {"min_support": 0.01}, c=c).rule == "data.transactions.min_support"
    assert decide(p, "assoc", {"min_support": 0.1}, c=c).rule == "min_parties"
    four = ("alice", "bob", "carol", "dave")
    assert decide(p, "assoc", {"min_support": 0.1}, four, c=c).outcome == "accept"


def test_vertical_column_control_covers_the_columns_a_party_holds(tmp_path):
    """Vertically a hospital's column control applies to the job's columns it holds: a
    job naming the other hospitals' columns too is accepted, one reading a column it
    holds but does not allow is refused."""
    (tmp_path / "r.csv").write_text("record_id,age,income,diagnosis\n1,30,10,3\n")
    c = PartyContext(name="bob", settings={"data": {"records": "r.csv"}}, base_dir=tmp_path)
    p = policy(
        '[defaults]\nallow_records = true\n[data.records]\njobs = ["kmeans"]\n'
        'columns = ["age", "income", "record_id"]\n'
    )
    vertical = {"mode": "vertical", "min_cluster_size": 10}
    others = ["age", "income", "blood_pressure", "claims"]  # the last two: other parties'
    assert decide(p, "kmeans", {**vertical, "columns": others}, c=c).outcome == "accept"
    held_not_allowed = [*others, "diagnosis"]
    assert (
        decide(p, "kmeans", {**vertical, "columns": held_not_allowed}, c=c).rule
        == "data.records.columns"
    )
    # horizontally every party reads every column the job names
    assert decide(p, "kmeans", {"columns": others}, c=c).rule == "data.records.columns"
    # the id column orders and aligns vertical records: it is a column the job reads
    no_id = policy(
        '[defaults]\nallow_records = true\n[data.records]\ncolumns = ["age", "income"]\n'
    )
    assert decide(no_id, "kmeans", {**vertical, "columns": others}, c=c).rule == (
        "data.records.columns"
    )


def test_every_registered_job_has_a_profile():
    from ppdm.jobs.registry import job_names

    shipped = {name for name in job_names() if not name.startswith("test-")}  # tests add some
    assert shipped <= set(profile_names()), "a job without a leakage profile"


@settings(max_examples=60, deadline=None)
@given(
    parties=st.lists(st.sampled_from(ROSTER), min_size=1, max_size=5, unique=True),
    value=st.integers(10**4, 10**12) | st.integers(-(10**12), -(10**4)),
)
def test_evaluation_never_depends_on_the_value(tmp_path_factory, parties, value):
    """The policy decision is a function of the request, not of the party's data."""
    if "bob" not in parties:
        parties = [*parties, "bob"]
    base = tmp_path_factory.getbasetemp()
    a = decide(
        policy(),
        "secure-sum",
        parties=tuple(parties),
        initiator=parties[0],
        c=ctx(base, secure_sum=value),
    )
    b = decide(
        policy(),
        "secure-sum",
        parties=tuple(parties),
        initiator=parties[0],
        c=ctx(base, secure_sum=7),
    )
    assert a == b
    assert str(abs(value)) not in a.reason


def test_results_as_shares_only(tmp_path):
    c = ctx(tmp_path, dot_product=[1, 0, 1], secure_sum=3)
    p = policy('[defaults]\nresults = "shares"\nmin_parties = 2\nexact_partners = ["alice"]\n')
    assert decide(p, "secure-sum", c=c).rule == "results"
    d = decide(p, "paillier-dot-product", {"output": "holder"}, ("alice", "bob"), c=c)
    assert d.rule == "results"
    d = decide(p, "paillier-dot-product", {"output": "shares"}, ("alice", "bob"), c=c)
    assert d.outcome == "accept"


def _sample_context(tmp_path: Path) -> PartyContext:
    (tmp_path / "r.csv").write_text("record_id,age\n1,30\n")
    (tmp_path / "t.dat").write_text("1 2\n")
    return PartyContext(
        name="bob",
        settings={
            "inputs": {
                "secure_sum": 3,
                "set_union": ["x"],
                "intersection": [1],
                "dot_product": [1, 0],
                "ids": ["a"],
            },
            "data": {"records": "r.csv", "transactions": "t.dat"},
        },
        base_dir=tmp_path,
    )


def test_every_registered_job_states_a_complete_disclosure(tmp_path):
    """A job without a complete disclosure statement cannot run: walk the registry with
    the job's defaults and its main variants."""
    from ppdm.jobs.registry import get_job, job_names
    from ppdm.service.profiles import incomplete_statement, unprofiled_jobs

    assert [j for j in unprofiled_jobs() if not j.startswith("test-")] == []
    c = _sample_context(tmp_path)
    variants = {
        "assoc": [{}, {"mode": "vertical"}, {"mode": "vertical", "protect": "exact"}],
        "kmeans": [{}, {"mode": "vertical"}, {"init": "first-k"}, {"align": True}],
        "psi-align": [{}, {"inputs": "ids"}],
    }
    for name in job_names():
        if name.startswith("test-"):
            continue
        for extra in variants.get(name, [{}]):
            params = get_job(name).params(extra)
            d = get_profile(name).disclosure(params, ["alice", "bob", "carol"], "bob", c)
            assert incomplete_statement(d) is None, (name, extra, incomplete_statement(d))
            if d.private:
                assert d.outputs, name
                assert d.describe()


def test_default_policy_refuses_by_the_statement_not_the_name(tmp_path):
    c = _sample_context(tmp_path)
    p = policy()
    # raw records as starting centres
    assert decide(p, "kmeans", {"init": "first-k"}, c=c).rule == "allow_records"
    assert decide(p, "kmeans", {"init": "kmeans++"}, c=c).rule == "allow_records"
    # an aggregate over fewer records than the owner's minimum
    assert decide(p, "kmeans", {"min_cluster_size": 1}, c=c).rule == "min_aggregate"
    assert decide(p, "kmeans", {"min_party_records": 1}, c=c).rule == "min_party_records"
    assert decide(p, "assoc", {"min_aggregate": 2}, c=c).rule == "min_aggregate"
    # the threshold must hold without as many parties as the owner assumes collude
    assert decide(p, "assoc", {"colluders": 0}, c=c).rule == "min_party_records"
    two = policy("[defaults]\ncolluders = 2\n")
    four = ("alice", "bob", "carol", "dave")
    assert decide(two, "assoc", {}, four, c=c).rule == "min_party_records"
    assert decide(two, "assoc", {"colluders": 2}, four, c=c).outcome == "accept"
    # exact linear queries a stranger chooses; noisy ones within the per-job budget
    assert decide(p, "assoc", {"mode": "vertical", "protect": "exact"}, c=c).rule == (
        "exact_partners"
    )
    partners = policy('[defaults]\nexact_partners = ["alice", "carol"]\n')
    assert decide(partners, "assoc", {"mode": "vertical", "protect": "exact"}, c=c).outcome == (
        "accept"
    )
    assert decide(p, "assoc", {"mode": "vertical", "epsilon": 5.0}, c=c).rule == "max_epsilon"
    assert decide(p, "intersection-cardinality", c=c).rule == "exact_partners"
    # membership answers: the other party's set bounded, the output at least min_aggregate
    assert decide(p, "psi-align", {"max_set_ratio": 50.0}, c=c).rule == "max_set_ratio"
    assert decide(p, "psi-align", {"min_set_size": 1}, c=c).rule == "min_aggregate"
    assert decide(policy("[defaults]\nreveal_size = false\n"), "psi-align", c=c).rule == (
        "reveal_size"
    )
    # every column a job touches: the id column of an alignment is read
    cols = policy('[data.records]\ncolumns = ["age"]\n')
    assert decide(cols, "psi-align", c=c).rule == "data.records.columns"
    assert decide(cols, "kmeans", {"columns": ["age"], "align": True}, c=c).rule == (
        "data.records.columns"
    )
    with_id = policy('[data.records]\ncolumns = ["age", "record_id"]\n')
    assert decide(with_id, "psi-align", c=c).outcome == "accept"
    # honest jobs of every kind run under the default policy
    for job, params in (
        ("assoc", {}),
        ("assoc", {"mode": "vertical"}),
        ("kmeans", {}),
        ("psi-align", {}),
        ("set-union", {}),
        ("secure-sum", {}),
    ):
        d = decide(p, job, params, c=c)
        assert d.outcome == "accept", (job, params, d)


def test_data_set_rules_override_the_statement_bounds(tmp_path):
    c = _sample_context(tmp_path)
    p = policy("[data.transactions]\nmin_aggregate = 50\nepsilon_budget = 0.5\n")
    assert decide(p, "assoc", {"min_aggregate": 20}, c=c).rule == "min_aggregate"
    assert decide(p, "assoc", {"min_aggregate": 50}, c=c).outcome == "accept"
    d = decide(p, "assoc", {"mode": "vertical", "min_aggregate": 50}, c=c)
    assert d.limits["epsilon_budget"] == 0.5
    with pytest.raises(ConfigError):
        policy("[defaults]\nmax_set_ratio = 0.5\n")
    with pytest.raises(ConfigError):
        policy('[defaults]\nexact_partners = "bob"\n')
