"""Intended differences explain only what they name."""
from __future__ import annotations

from conformance.compare import MISSING
from conformance.wirediff.generate import Names
from conformance.wirediff.known import KNOWN, explain
from conformance.wirediff.recipes import Probe

NAMES = Names("wd-data", "wd-new", "wd-group", "wd-txn", "wd-unknown")


def probe(api: str, variant: str) -> Probe:
    return Probe(api, 4, variant, NAMES)


def test_an_api_the_target_lacks_is_explained_but_a_version_range_is_not():
    lacks = {"path": "probe(ApiVersions v4).response.api_keys.api_key=17", "reference": {"api_key": 17},
             "actual": MISSING}
    assert explain("embedded", probe("ApiVersions", "valid"), lacks)
    other = dict(lacks, path="probe(ApiVersions v4).response.api_keys.api_key=0.max_version", actual=12)
    assert explain("embedded", probe("ApiVersions", "valid"), other) is None
    assert explain("tansu", probe("ApiVersions", "valid"), lacks) is None  # the embedded broker's only


def test_a_variant_entry_needs_its_variant():
    d = {"path": "probe(Produce v9).no_response", "reference": "REQUEST_TIMED_OUT", "actual": "NETWORK_EXCEPTION"}
    assert explain("embedded", probe("Produce", "null:topic_data.partition_data.records"), d)
    assert explain("embedded", probe("Produce", "valid"), d) is None


def test_every_entry_has_a_reason():
    assert all(len(k.reason) > 40 for k in KNOWN)
