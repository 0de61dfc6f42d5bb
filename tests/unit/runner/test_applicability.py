"""A case whose raw requests name an API version the target does not serve is not applicable
before its first step (conformance/runner/case_run.py CaseRun._require_raw_apis), repeats
included: a regression case that bumps an epoch 30,000 times before its Produce v12 used to find
out after minutes on releases that serve Produce v0-11. Likewise an op the client release has
no API for (CaseRun._require_client_op): java@3.1.0 has no Admin.fenceProducers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conformance.dsl.loader import load_case
from conformance.runner.case_run import CaseRun
from conformance.targets.base import NotApplicable, Target

CASE = """\
title: raw requests in and out of a repeat
topology:
  topics: [{name: t1, partitions: 1}]
steps:
  - {actor: raw, op: request, api: InitProducerId, version: 4, body: {transactional_id: x, transaction_timeout_ms: 1000}}
  - repeat: 3
    steps:
      - {actor: raw, op: request, api: InitProducerId, version: 4, body: {transactional_id: x, transaction_timeout_ms: 1000}}
      - {actor: raw, op: request, api: Produce, version: 12, body: {acks: -1, timeout_ms: 1000, topic_data: []}}
checks:
  - {check: records, isolation: read_committed, topic: t1, count: 0}
"""


def _run(tmp_path, ranges: dict[int, tuple[int, int]]):
    path = tmp_path / "case.yaml"
    path.write_text(CASE)
    case = load_case(path)
    target = SimpleNamespace(name="apache-kafka@3.9.1", api_ranges=ranges)
    target.require_api = lambda *a: Target.require_api(target, *a)
    run = SimpleNamespace(target=target, client="confluent")
    run._require_raw_apis = lambda steps: CaseRun._require_raw_apis(run, steps)
    run._require_raw_apis(case.steps)


def test_a_version_inside_a_repeat_that_the_target_lacks_is_not_applicable_up_front(tmp_path):
    with pytest.raises(NotApplicable, match="serves Produce v0-11; the case sends v12"):
        _run(tmp_path, {22: (0, 4), 0: (0, 11)})


def test_a_missing_api_is_not_applicable_and_served_ones_pass(tmp_path):
    with pytest.raises(NotApplicable, match="does not serve Produce"):
        _run(tmp_path, {22: (0, 5)})
    _run(tmp_path, {22: (0, 5), 0: (3, 12)})


CLIENT_CASE = """\
title: an op a client release may lack
topology:
  topics: [{name: t1, partitions: 1}]
actors:
  admin: {role: admin}
steps:
  - {actor: admin, op: fence_producers, ids: [x], expect: ok}
  - {actor: admin, op: fence_producers, ids: [x], expect: {java: UNSUPPORTED_BY_CLIENT, default: ok}}
checks:
  - {check: records, isolation: read_committed, topic: t1, count: 0}
"""


def _client_op(tmp_path, index: int, client: str, error: str | None):
    path = tmp_path / "client_case.yaml"
    path.write_text(CLIENT_CASE)
    step = load_case(path).steps[index]
    run = SimpleNamespace(_client_of=lambda actor: client)
    rec = {"ok": True} if error is None else {"ok": False, "error": {"name": error, "message": "no Admin API"}}
    CaseRun._require_client_op(run, step, rec)


def test_an_op_the_client_release_lacks_makes_the_row_not_applicable_unless_expected(tmp_path):
    with pytest.raises(NotApplicable, match="client java@3.1.0 cannot fence_producers: no Admin API"):
        _client_op(tmp_path, 0, "java@3.1.0", "UNSUPPORTED_BY_CLIENT")
    _client_op(tmp_path, 1, "java@3.1.0", "UNSUPPORTED_BY_CLIENT")      # the case expects exactly that
    _client_op(tmp_path, 0, "java", None)                               # ok
    _client_op(tmp_path, 0, "java", "CONCURRENT_TRANSACTIONS")          # a real error stays a finding
