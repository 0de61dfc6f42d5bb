"""The raw actor's change_run_password op: the loader accepts `password: new` and `password:
original` only (cases/security/scram_password_changed_mid_transaction runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.dsl import CaseError, load_case

CASE = """
title: t
tags: [security]
description: d
topology: {topics: [t1], exclusive: true}
actors: {}
steps:
  - {actor: raw, op: change_run_password, password: %s}
"""


def _load(tmp_path: Path, password: str):
    path = tmp_path / "c.yaml"
    path.write_text(CASE % password)
    return load_case(path, tmp_path)


def test_new_and_original_are_the_two_passwords(tmp_path):
    assert _load(tmp_path, "new").steps[0].args == {"password": "new"}
    assert _load(tmp_path, "original").steps[0].args == {"password": "original"}
    with pytest.raises(CaseError, match="new or original"):
        _load(tmp_path, "hunter2")
