"""Requests generated from the schemas: every API version builds, variants say what they break."""
from __future__ import annotations

import pytest

from broker_impl.codec import API, REQUEST_HEADER
from conformance.raw import build_request
from conformance.refs import resolve, step_lookup
from conformance.wirediff.generate import Names, valid_body, variants, with_unknown_tags
from conformance.wirediff.recipes import CLIENT_MAX, client_versions, probes

NAMES = Names("wd-data", "wd-new", "wd-group", "wd-txn", "wd-unknown")
#: What earlier steps' responses would give the references (any target's answer has these fields).
ANSWERS = {"ctx": {"topic_id": "11" * 16},
           "create": {"response": {"topics": [{"topic_id": "22" * 16}]}},
           "init": {"producer_id": 5, "producer_epoch": 0},
           "join1": {"member_id": "m-1", "generation_id": -1}, "join": {"member_id": "m-1", "generation_id": 1},
           "probe": {"member_id": "m-1"}}
EVERY = [(name, v) for name, api in sorted(API.items()) for v in range(api.min_version, api.max_version + 1)]


def names_for(i: int) -> Names:
    return Names("wd-data", f"wd-new-{i}", f"wd-group-{i}", f"wd-txn-{i}", f"wd-unknown-{i}")


@pytest.mark.parametrize("api,version", EVERY, ids=[f"{a}-v{v}" for a, v in EVERY])
def test_every_probe_of_every_api_version_builds(api, version):
    versions = client_versions([{a.key: (a.min_version, a.max_version) for a in API.values()}])
    for probe in probes(api, version, versions, names_for):
        for step in probe.steps:
            frame = build_request(step.api, step.version, resolve(step.body, step_lookup(ANSWERS.get)))
            if step.unknown_tags:
                frame = with_unknown_tags(frame, step.api, step.version)
            assert len(frame) > 12


def test_null_where_the_schema_forbids_it_is_marked():
    body = valid_body("Produce", 9, NAMES)
    by_name = {v.name: v for v in variants("Produce", 9, body)}
    assert by_name["null:topic_data"].violates_schema
    assert not by_name["null:topic_data.partition_data.records"].violates_schema  # records are nullable
    assert not by_name["empty:topic_data"].violates_schema
    assert by_name["null:topic_data"].apply(body, NAMES)["topic_data"] is None


def test_unknown_ids_are_the_probes_own():
    body = valid_body("DescribeTransactions", 0, NAMES)
    unknown = {v.name: v for v in variants("DescribeTransactions", 0, body)}["unknown:transactional_ids[]"]
    assert unknown.apply(body, NAMES) == {"transactional_ids": ["wd-unknown"]}


def test_unknown_tagged_fields_are_skipped_by_a_reader():
    api = API["Metadata"]
    plain = build_request("Metadata", 12, valid_body("Metadata", 12, NAMES))
    tagged = with_unknown_tags(plain, "Metadata", 12)
    assert len(tagged) > len(plain)
    decoded = []
    for frame in (plain, tagged):
        header, pos = REQUEST_HEADER.decode(2, frame, 4)
        body, end = api.request.decode(12, frame, pos)
        assert end == len(frame)
        decoded.append((header.client_id, body))
    assert decoded[0] == decoded[1]
    with pytest.raises(ValueError):
        with_unknown_tags(build_request("Metadata", 8, valid_body("Metadata", 8, NAMES)), "Metadata", 8)


def test_clients_versions_are_the_highest_shared_ones():
    versions = client_versions([{0: (0, 13), 18: (0, 4), 24: (0, 5)}, {0: (3, 11), 18: (0, 3), 24: (0, 5)}])
    assert versions == {"Produce": 11, "ApiVersions": 3, "AddPartitionsToTxn": CLIENT_MAX["AddPartitionsToTxn"]}


def test_a_transaction_probe_is_a_sequence_with_references():
    versions = client_versions([{a.key: (a.min_version, a.max_version) for a in API.values()}])
    valid = probes("EndTxn", 3, versions, names_for)[0]
    assert [s.id for s in valid.steps] == ["create", "ready", "init", "add", "produce", "probe"]
    assert valid.steps[-1].body["producer_id"] == "${init.producer_id}"
    after = [p for p in probes("DescribeProducers", 0, versions, names_for) if p.variant == "ended-after-restart"][0]
    assert [s.id for s in after.steps[after.restart_at:]] == ["end", "settled", "probe"]
