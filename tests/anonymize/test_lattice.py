"""Full-domain searches: seed example, Adult (anonbench) and generated tables against an
independent brute-force scan, and every release verified by pycanon."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycanon import anonymity
from scipy.stats import entropy as scipy_entropy

from ppdm.anonymize.api import anonymize
from ppdm.anonymize.hierarchy import Hierarchy, load_hierarchies
from ppdm.anonymize.lattice import (
    FullDomainProblem,
    Lattice,
    exhaustive_scan,
    incognito,
    optimal_search,
    samarati,
    search,
)
from ppdm.anonymize.metrics import objective
from ppdm.anonymize.models import make_models
from ppdm.errors import ConfigError

ANONBENCH_QI = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]

# -- Aggarwal 2015, Table 20.1 -> Table 20.3 ------------------------------------------------

TABLE_20_1 = pd.DataFrame(
    {
        "SSN": [
            "012-345-6789",
            "823-627-9231",
            "987-654-3210",
            "382-827-8264",
            "847-872-7276",
            "422-061-0089",
        ],
        "Age": [24, 37, 26, 38, 36, 25],
        "ZIP Code": ["10598", "90210", "10547", "90345", "89119", "02139"],
        "Disease": ["HIV", "Hepatitis C", "HIV", "Hepatitis C", "Diabetes", "HIV"],
    }
)
AGE_H = Hierarchy.from_rows(
    [[str(a), "[20, 30]" if a < 30 else "[30, 40]", "*"] for a in range(20, 40)],
    attribute="Age",
)
ZIP_H = Hierarchy.from_rows(  # Fig. 20.1: ZIP -> state -> region -> *
    [
        ["10598", "NY", "Northeastern US", "*"],
        ["10547", "NY", "Northeastern US", "*"],
        ["02139", "MA", "Northeastern US", "*"],
        ["90210", "CA", "Western US", "*"],
        ["90345", "CA", "Western US", "*"],
        ["89119", "NV", "Western US", "*"],
    ],
    attribute="ZIP Code",
)
TABLE_20_3 = [  # (Age, ZIP Code, Disease) of Table 20.3
    ("[20, 30]", "Northeastern US", "HIV"),
    ("[30, 40]", "Western US", "Hepatitis C"),
    ("[20, 30]", "Northeastern US", "HIV"),
    ("[30, 40]", "Western US", "Hepatitis C"),
    ("[30, 40]", "Western US", "Diabetes"),
    ("[20, 30]", "Northeastern US", "HIV"),
]


@pytest.mark.parametrize("algorithm", ["samarati", "incognito", "optimal", "exhaustive"])
def test_table_20_1_becomes_table_20_3(algorithm):
    release = anonymize(
        TABLE_20_1,
        qi=["Age", "ZIP Code"],
        sensitive="Disease",
        identifiers="SSN",
        hierarchies={"Age": AGE_H, "ZIP Code": ZIP_H},
        k=3,
        algorithm=algorithm,
        rng=7,
    )
    assert release.info["node"] == {"Age": 1, "ZIP Code": 2}  # <A_1, Z_2>
    assert release.info["minimal_nodes"] == [[1, 2]]
    assert list(release.data.columns) == ["Age", "ZIP Code", "Disease"]  # SSN dropped
    got = sorted(map(tuple, release.data.to_numpy().tolist()))
    assert got == sorted(TABLE_20_3)
    assert anonymity.k_anonymity(release.data, ["Age", "ZIP Code"]) == 3
    assert release.n_classes == 2 and release.suppressed == 0


# -- Adult, the anonbench setting ------------------------------------------------------


@pytest.fixture(scope="module")
def adult(adult_dir):
    df = pd.read_csv(adult_dir / "adult.csv", sep=";")
    hs = load_hierarchies(adult_dir, [*ANONBENCH_QI, "occupation"])
    return df, hs


@pytest.mark.parametrize(
    ("qi", "suppression", "size"),
    [(ANONBENCH_QI, 0.0, 4320), (ANONBENCH_QI[:5], 0.01, 360)],
    ids=["anonbench", "five-qi-1pct-suppression"],
)
def test_adult_anonbench_all_searches_agree_with_exhaustive(adult, qi, suppression, size):
    df, hs = adult
    problem = FullDomainProblem(
        df,
        qi=qi,
        hierarchies=hs,
        model=make_models(k=5),
        sensitive="occupation",
        suppression=suppression,
    )
    assert problem.lattice.size == size
    oracle = exhaustive_scan(problem)
    assert oracle.nodes_checked == size
    checks = {}
    for fn in (samarati, incognito, optimal_search):
        result = fn(problem)
        assert result.minimal_nodes == oracle.minimal_nodes, fn.__name__
        determined = result.status >= 0
        assert np.array_equal(result.status[determined], oracle.status[determined])
        checks[fn.__name__] = result.nodes_checked
    assert checks["optimal_search"] < size / 2
    lowest = min(sum(n) for n in oracle.minimal_nodes)
    sam = samarati(problem)
    assert sam.extra["minimal_height"] == lowest
    assert sorted(map(tuple, sam.extra["minimal_height_nodes"])) == sorted(
        n for n in oracle.minimal_nodes if sum(n) == lowest
    )


def test_adult_releases_verified_by_pycanon(adult):
    df, hs = adult
    sub = df.iloc[:6000]
    qi = ["age", "education", "marital-status", "sex", "race"]
    r = anonymize(sub, qi=qi, sensitive="occupation", hierarchies=hs, k=10, rng=1)
    assert anonymity.k_anonymity(r.data, qi) >= 10
    r = anonymize(
        sub,
        qi=qi,
        sensitive="occupation",
        hierarchies=hs,
        model="l-diversity",
        k=5,
        l=4,
        algorithm="incognito",
        suppression=0.02,
        rng=1,
    )
    assert anonymity.k_anonymity(r.data, qi) >= 5
    assert anonymity.l_diversity(r.data, qi, ["occupation"]) >= 4
    assert r.suppressed <= 0.02 * len(sub)
    r = anonymize(
        sub,
        qi=qi,
        sensitive="occupation",
        hierarchies=hs,
        model="t-closeness",
        t=0.2,
        t_distance="emd",
        t_ground="equal",
        algorithm="samarati",
        rng=1,
    )
    assert anonymity.t_closeness(r.data, qi, ["occupation"]) <= 0.2 + 1e-9


# -- generated tables against an independent brute force --------------------------------


def _hierarchy(name: str, n_leaves: int, height: int) -> Hierarchy:
    rows = []
    for v in range(n_leaves):
        row = [f"{name}{v}"]
        for lv in range(1, height - 1):
            row.append(f"{name}L{lv}_{v // (2**lv)}")
        row.append("*")
        rows.append(row[:height])
    return Hierarchy.from_rows(rows, attribute=name)


@st.composite
def problems(draw):
    n_attrs = draw(st.integers(1, 3))
    heights = [draw(st.integers(2, 4)) for _ in range(n_attrs)]
    leaves = [draw(st.integers(2, 6)) for _ in range(n_attrs)]
    n = draw(st.integers(5, 60))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    names = [f"q{a}" for a in range(n_attrs)]
    df = pd.DataFrame(
        {
            nm: [f"{nm}{v}" for v in rng.integers(0, lv, n)]
            for nm, lv in zip(names, leaves, strict=True)
        }
    )
    df["s"] = [str(v) for v in rng.integers(0, draw(st.integers(1, 4)), n)]
    hs = {nm: _hierarchy(nm, lv, h) for nm, lv, h in zip(names, leaves, heights, strict=True)}
    kind = draw(
        st.sampled_from(["k", "k+distinct", "entropy", "recursive", "t-var", "t-kl", "t-emd"])
    )
    k = draw(st.integers(1, 5))
    opts = {
        "k": {"k": k},
        "k+distinct": {"k": k, "l": draw(st.integers(1, 3))},
        "entropy": {"l": draw(st.sampled_from([1.0, 1.5, 2.0])), "l_variant": "entropy"},
        "recursive": {
            "l": 2,
            "c": draw(st.sampled_from([1.0, 2.0, 3.0])),
            "l_variant": "recursive",
        },
        "t-var": {"k": k, "t": draw(st.sampled_from([0.2, 0.4]))},
        "t-kl": {"t": draw(st.sampled_from([0.3, 0.8])), "t_distance": "kl"},
        "t-emd": {"t": 0.3, "t_distance": "emd", "t_ground": "ordered"},
    }[kind]
    suppression = draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
    return df, names, hs, opts, suppression


def _brute_status(df, names, hs, model, suppression) -> dict[tuple[int, ...], bool]:
    """Independent oracle: generalize the rows with pandas for every node."""
    max_sup = int(np.floor(suppression * len(df) + 1e-9))
    out = {}
    for node in itertools.product(*[range(hs[nm].height) for nm in names]):
        gen = pd.DataFrame(
            {nm: hs[nm].generalize(df[nm], lv) for nm, lv in zip(names, node, strict=True)}
        )
        gen["s"] = pd.Categorical(df["s"], categories=sorted(df["s"].unique()))
        counts = gen.groupby(names, observed=True)["s"].value_counts().unstack(fill_value=0)
        counts = counts.reindex(columns=sorted(df["s"].unique()), fill_value=0).to_numpy()
        ok = model.check_classes(counts)
        out[node] = int(counts[~ok].sum()) <= max_sup
    return out


def _brute_minimal(status):
    anon = [n for n, ok in status.items() if ok]
    return sorted(
        (
            n
            for n in anon
            if not any(m != n and all(a <= b for a, b in zip(m, n, strict=True)) for m in anon)
        ),
        key=lambda n: (sum(n), n),
    )


@settings(max_examples=40)
@given(problems())
def test_generated_tables_all_algorithms_match_brute_force(case):
    df, names, hs, opts, suppression = case
    model = make_models(**opts)
    problem = FullDomainProblem(
        df, qi=names, hierarchies=hs, model=model, sensitive="s", suppression=suppression
    )
    status = _brute_status(df, names, hs, model, suppression)
    want = _brute_minimal(status)
    oracle = exhaustive_scan(problem)
    lat = problem.lattice
    assert {lat.node(i): bool(oracle.status[i]) for i in range(lat.size)} == status
    for algorithm in ("samarati", "incognito", "optimal"):
        result = search(problem, algorithm=algorithm)
        assert result.minimal_nodes == want, algorithm
    # the optimal node minimizes the metric over every anonymous node
    anon = [n for n, ok in status.items() if ok]
    for metric in ("loss", "dm", "cavg"):
        best = optimal_search(problem, metric=metric)
        if not anon:
            assert best.chosen is None
            continue
        values = {n: objective(problem, problem.node_frequency_set(n), metric) for n in anon}
        assert values[best.chosen] == pytest.approx(min(values.values()))


@settings(max_examples=25)
@given(problems(), st.sampled_from(["samarati", "incognito", "optimal"]))
def test_generated_releases_verified_by_pycanon(case, algorithm):
    """Every generated release is checked, whatever its model: k and distinct l by
    pycanon; entropy l, recursive (c, l) and t (variational, KL, ordered EMD) by direct
    computations from their definitions on the released rows; and a refusal ("no
    generalization satisfies") by the brute-force scan of every lattice node."""
    df, names, hs, opts, suppression = case
    try:
        r = anonymize(
            df,
            qi=names,
            sensitive="s",
            hierarchies=hs,
            model=_model_names(opts),
            algorithm=algorithm,
            suppression=suppression,
            rng=3,
            **opts,
        )
    except ConfigError as exc:
        assert "no generalization satisfies" in str(exc)
        status = _brute_status(df, names, hs, make_models(**opts), suppression)
        assert not any(status.values()), "refused although a node satisfies the model"
        return
    assert r.suppressed <= suppression * len(df) + 1e-9
    assert len(r.data) == len(df) - r.suppressed
    if len(r.data) == 0:
        return  # everything suppressed: no class to check
    classes = [g["s"].value_counts() for _, g in r.data.groupby(names, observed=True)]
    if "k" in opts:
        assert anonymity.k_anonymity(r.data, names) >= opts["k"]
    variant = opts.get("l_variant", "distinct")
    if "l" in opts and variant == "distinct":
        assert anonymity.l_diversity(r.data, names, ["s"]) >= opts["l"]
    if "l" in opts and variant == "entropy":
        worst = min(math.exp(scipy_entropy(c.to_numpy())) for c in classes)
        assert worst >= opts["l"] - 1e-9
        assert anonymity.entropy_l_diversity(r.data, names, ["s"]) >= math.floor(worst - 1e-9)
    if "l" in opts and variant == "recursive":
        ell, c = int(opts["l"]), float(opts["c"])
        for counts in classes:
            ranked = sorted(counts.to_numpy(), reverse=True)
            assert len(ranked) >= ell and ranked[0] < c * sum(ranked[ell - 1 :])
    if "t" in opts:
        reference = df["s"].value_counts(normalize=True)  # the whole table's distribution
        domain = sorted(df["s"].unique(), key=lambda v: int(v))
        p = reference.reindex(domain, fill_value=0).to_numpy()
        dist = opts.get("t_distance", "variational")
        for counts in classes:
            q = (counts / counts.sum()).reindex(domain, fill_value=0).to_numpy()
            if dist == "variational":
                d = 0.5 * float(np.abs(q - p).sum())
            elif dist == "kl":
                mask = q > 0
                d = float(np.sum(q[mask] * np.log(q[mask] / p[mask])))
            else:  # ordered EMD: mean absolute cumulative difference over m - 1 steps
                d = float(np.abs(np.cumsum(q - p)).sum() / max(len(domain) - 1, 1))
            assert d <= opts["t"] + 1e-9, (dist, d)
        if dist == "variational" and suppression == 0:
            assert anonymity.t_closeness(r.data, names, ["s"]) <= opts["t"] + 1e-9


def _model_names(opts):
    names = []
    if "k" in opts:
        names.append("k-anonymity")
    if "l" in opts:
        names.append("l-diversity")
    if "t" in opts:
        names.append("t-closeness")
    return names


def test_release_rows_are_shuffled_and_complete():
    n = 200
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"q": [f"q{v}" for v in rng.integers(0, 4, n)], "row": np.arange(n)})
    hs = {"q": _hierarchy("q", 4, 2)}
    r = anonymize(df, qi="q", hierarchies=hs, k=2, rng=11)
    assert sorted(r.data["row"]) == list(range(n))
    assert not np.array_equal(r.data["row"].to_numpy(), np.arange(n))
    r2 = anonymize(df, qi="q", hierarchies=hs, k=2)  # default: OS randomness
    assert sorted(r2.data["row"]) == list(range(n))


def test_lattice_basics():
    lat = Lattice([2, 3, 2])
    assert lat.size == 12 and lat.max_height == 4
    i = lat.index((1, 1, 0))
    assert lat.node(i) == (1, 1, 0)
    assert sorted(lat.node(j) for j in lat.successors(i)) == [(1, 1, 1), (1, 2, 0)]
    assert sorted(lat.node(j) for j in lat.predecessors(i)) == [(0, 1, 0), (1, 0, 0)]


def test_errors_name_the_problem():
    df = TABLE_20_1
    # A quasi-identifier without a hierarchy gets one built from the data (ZIP codes are
    # masked digit by digit), said in the release, rather than an error.
    built = anonymize(df, qi=["Age", "ZIP Code"], hierarchies={"Age": AGE_H}, k=3)
    assert "ZIP Code" in built.info["built_hierarchies"]
    assert built.data.groupby(["Age", "ZIP Code"]).size().min() >= 3
    with pytest.raises(ConfigError, match="no generalization satisfies"):
        anonymize(df, qi=["Age", "ZIP Code"], hierarchies={"Age": AGE_H, "ZIP Code": ZIP_H}, k=7)
    with pytest.raises(ConfigError, match="needs a sensitive attribute"):
        anonymize(df, qi=["Age"], hierarchies={"Age": AGE_H}, model="l-diversity", l=2)
    with pytest.raises(ConfigError, match="not in the table"):
        anonymize(df, qi=["Age", "Zip"], hierarchies={"Age": AGE_H}, k=2)
