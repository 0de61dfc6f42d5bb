"""The wire masks: what must differ between two correct brokers is masked, what must not is kept."""
from __future__ import annotations

from conformance.compare import WIRE_MASKS, normalise_response, structural_diff

UUID_A = "5a0173e6284643fd97eaff2bf6a0a460"
UUID_B = "effe6b7d75e44a83ae72f4e0e432ad05"


def test_masked_values_keep_whether_they_are_set():
    a = normalise_response({"producer_id": 0, "topic_id": UUID_A, "member_id": "c-" + "0" * 8 + "-1111-2222-3333-"
                            + "4" * 12, "session_id": 0, "cluster_id": "abc", "error_message": None,
                            "transaction_start_time_ms": -1, "throttle_time_ms": 0})
    b = normalise_response({"producer_id": 77, "topic_id": UUID_B, "member_id": "c-" + "9" * 8 + "-1111-2222-3333-"
                            + "5" * 12, "session_id": 0, "cluster_id": "xyz", "error_message": None,
                            "transaction_start_time_ms": -1, "throttle_time_ms": 5})
    assert structural_diff(a, b) == []
    assert a["member_id"] == "c-<uuid>" and a["producer_id"] == "<id>"
    unset = normalise_response({"producer_id": -1, "topic_id": "00" * 16, "error_message": "", "session_id": 0})
    assert unset == {"producer_id": -1, "topic_id": "00" * 16, "error_message": "", "session_id": 0}
    assert normalise_response({"error_message": "boom"}) == {"error_message": "<text>"}


def test_lists_with_a_natural_key_compare_by_key_not_by_position():
    a = normalise_response({"topics": [{"name": "t1", "error_code": 0}, {"name": "t2", "error_code": 3}]})
    b = normalise_response({"topics": [{"name": "t2", "error_code": 3}, {"name": "t1", "error_code": 0}]})
    assert structural_diff(a, b) == []
    c = normalise_response({"topics": [{"name": "t2", "error_code": 0}, {"name": "t1", "error_code": 0}]})
    assert [d["path"] for d in structural_diff(a, c)] == ["topics.name=t2.error_code"]


def test_keep_leaves_out_elements_of_other_probes():
    tree = {"groups": [{"group_id": "wd-g-mine"}, {"group_id": "wd-g-theirs"}, {"group_id": "__internal"}]}
    keep = lambda _f, v: not v.startswith("wd-") or v == "wd-g-mine"  # noqa: E731
    assert sorted(normalise_response(tree, keep)["groups"]) == ["group_id=__internal", "group_id=wd-g-mine"]


def test_every_mask_says_why():
    assert all(m.reason and m.kind in ("any", "set", "uuid", "id", "nonzero", "time", "text", "member")
               for m in WIRE_MASKS)


def test_node_ids_are_named_by_their_place_in_the_cluster():
    from conformance.compare.wire import node_names

    tansu = normalise_response({"brokers": [{"node_id": 111}], "controller_id": 111,
                                "partitions": [{"leader_id": 111, "isr_nodes": [111], "offline_replicas": []}]},
                               nodes=node_names([111]))
    kafka = normalise_response({"brokers": [{"node_id": 1}], "controller_id": 1,
                                "partitions": [{"leader_id": 1, "isr_nodes": [1], "offline_replicas": []}]},
                               nodes=node_names([1]))
    assert structural_diff(kafka, tansu) == []
    assert normalise_response({"leader_id": -1}, nodes=node_names([1])) == {"leader_id": -1}
