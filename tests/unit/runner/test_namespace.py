"""Names a case uses are made unique per row and mapped back (conformance/runner/namespace)."""
from conformance.runner.namespace import Namespace


def test_case_names_are_suffixed_and_mapped_back():
    ns = Namespace("abc123")
    assert ns.name("t1") == "t1-abc123" and ns.name("t1-abc123") == "t1-abc123"
    assert ns.config({"transactional.id": "txn-1", "acks": "all"}) == {"transactional.id": "txn-1-abc123", "acks": "all"}
    assert ns.unmap({"topic": "t1-abc123", "note": "to t1-abc123 at 0"}) == {"topic": "t1", "note": "to t1 at 0"}


def test_kafkas_internal_topics_keep_their_names():
    ns = Namespace("abc123")
    assert ns.name("__transaction_state") == "__transaction_state"
    assert ns.args({"topics": ["__consumer_offsets", "t1"]})["topics"] == ["__consumer_offsets", "t1-abc123"]
