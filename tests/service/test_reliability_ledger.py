"""Issue 23 item 5 over real node processes: every proposal is in the ledger, including
one refused because the node's own settings file cannot be read, and the job document
names the party whose settings failed (not the initiator)."""

from __future__ import annotations

import pytest

from ppdm.service.ledger import read_entries, verify_file
from ppdm.service.node import SETTINGS_RULE
from ppdm.service.policy import OPEN_POLICY_TOML
from ppdm.testbed.consortia import GrpcTestbed

pytestmark = [pytest.mark.grpc, pytest.mark.timeout(600)]


def test_unreadable_settings_are_a_recorded_refusal_naming_the_party(tmp_path):
    with GrpcTestbed(["alice", "bob", "carol"], tmp_path, policy=OPEN_POLICY_TOML) as bed:
        path = bed.settings_path("carol")
        good = path.read_text()
        path.write_text(good + "\n[inputs\nbroken = = 1\n")  # invalid TOML
        doc = bed.run_job("secure-sum")
        assert doc["state"] == "refused", doc
        assert doc["failed_party"] == "carol", doc
        assert doc["decisions"]["carol"]["rule"] == SETTINGS_RULE
        assert "settings" in doc["decisions"]["carol"]["reason"]
        refused_id = doc["job_id"]
        # the owner fixes the file: the next job runs, without a restart
        path.write_text(good)
        assert bed.run_job("secure-sum")["state"] == "succeeded"
        # a proposal with an id the node knows already is recorded too
        again = bed.run_job("secure-sum", job_id=refused_id)
        assert again["state"] != "succeeded"
    for party in bed.parties:
        ledger = tmp_path / "state" / party / "ledger.sqlite"
        assert verify_file(ledger).ok
        requests = [e for e in read_entries(ledger, job_id=refused_id) if e.kind == "request"]
        assert requests, f"no request entry at {party}"
    carol = [
        e.record
        for e in read_entries(tmp_path / "state" / "carol" / "ledger.sqlite", job_id=refused_id)
        if e.kind == "request"
    ]
    assert carol[0]["decision"] == "refuse" and carol[0]["rule"] == SETTINGS_RULE
    assert len(carol) == 2 and carol[1]["decision"] == "invalid"
    # nothing of carol's private settings is in what the peers were told
    assert "broken" not in doc["decisions"]["carol"]["reason"]
