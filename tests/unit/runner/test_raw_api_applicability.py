"""A case whose raw requests name an API version the target does not serve is not applicable
before its first step (conformance/runner/case_run.py CaseRun._require_raw_apis), repeats
included: a regression case that bumps an epoch 30,000 times before its Produce v12 used to find
out after minutes on releases that serve Produce v0-11."""

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
