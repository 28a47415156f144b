"""The console's page helpers without a node: the per-step figure and the plain-words
account of ledger entries (what a peer can influence on a page is escaped)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ppdm.console.pages import entry_words, parse_params, steps_svg
from ppdm.errors import ConfigError


def _steps() -> list[dict]:
    return [
        {
            "step": "secure-sum/ring",
            "messages_sent": 1,
            "messages_received": 1,
            "bytes_sent": 101,
            "bytes_received": 103,
            "wall_time_s": 0.25,
        },
        {
            # A step tag arrives in a peer's envelope: the peer chooses it.
            "step": '<script>alert(1)</script>"&',
            "messages_sent": 3,
            "messages_received": 0,
            "bytes_sent": 50,
            "bytes_received": 0,
            "wall_time_s": 0.5,
        },
    ]


def test_steps_figure_is_well_formed_escaped_and_proportional():
    svg = steps_svg(_steps())
    root = ET.fromstring(svg)  # well-formed XML: the peer's tag did not break out
    assert "<script" not in svg and "style=" not in svg
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert '<script>alert(1)</script>"&'[:28] in texts
    rects = list(root.iter("{http://www.w3.org/2000/svg}rect"))
    assert len(rects) == 3 * 2  # bytes, messages, time for each step
    widths = [int(r.get("width")) for r in rects]
    # Per panel, bars are proportional to the values: 204 vs 50 bytes, 2 vs 3 messages,
    # 0.25 vs 0.5 s; the largest bar of each panel has the full width.
    bytes_, messages, time_ = widths[0:2], widths[2:4], widths[4:6]
    assert bytes_[0] > bytes_[1] and messages[1] > messages[0] and time_[1] == 2 * time_[0]
    assert steps_svg([]) == ""


def test_entry_words_say_what_each_entry_proves():
    assert entry_words("approval", {"approved": True, "reason": "ok"}, "alice") == (
        "The owner approved the job."
    )
    assert "not this quarter" in entry_words(
        "approval", {"approved": False, "reason": "not this quarter"}, "alice"
    )
    request = entry_words(
        "request",
        {
            "initiator": "bob",
            "protocol": "secure-sum",
            "parties": ["alice", "bob", "carol"],
            "decision": "pending",
            "rule": "consent",
        },
        "alice",
    )
    assert request.startswith("bob proposed a secure-sum job with alice, bob, carol")
    assert "held for the owner's approval by rule 'consent'" in request
    assert "SHA-256" in entry_words("finish", {"state": "succeeded", "result_sha256": "ab"}, "a")
    assert "cannot" in entry_words("peer-head", {"party": "bob", "seq": 4}, "alice")
    assert entry_words("something-new", {}, "alice") == "A something-new entry of alice's node."


def test_dry_run_parameters_read_like_the_cli():
    assert parse_params("k=3\nmode=vertical\n\nreveal_counts=true") == {
        "k": 3,
        "mode": "vertical",
        "reveal_counts": True,
    }
    with pytest.raises(ConfigError):
        parse_params("no equals sign")
