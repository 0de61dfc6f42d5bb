"""A Go client at an old release (`franz-go@1.18.0`), built from the one driver source against that
release from the Go module proxy, on a real socket to the embedded broker: the binary links exactly
that release (and the kmsg it requires), the row records it, txn/basic_commit passes, and the
regression of a bug the release has (franz-go#1359, fixed in 1.21.6) fails as the bug says.

Cost: one Go build (~1 min, cached in go-drivers@franz-go@1.18.0 afterwards) and one broker.
Skipped with Go's reason when the module proxy cannot serve the release.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conformance import buildcache
from conformance.clients import go_build
from conformance.clients.registry import CLIENTS
from conformance.dsl import load_cases
from conformance.runner import RunOptions, run
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RELEASE = "1.18.0"
CLIENT = f"franz-go@{RELEASE}"


@pytest.fixture(scope="module")
def built():
    build = go_build.build_for("franz-go", RELEASE)
    missing = build.tools_missing()
    if missing:
        pytest.skip(f"{', '.join(missing)} not on PATH")
    try:
        return build.ensure() / go_build.BINARY
    except buildcache.BuildError as exc:
        if "proxy" in str(exc) or "dial tcp" in str(exc) or "no such host" in str(exc):
            pytest.skip(f"the Go module proxy cannot serve franz-go v{RELEASE}: {str(exc).splitlines()[-1]}")
        raise


def test_the_binary_links_the_release_and_the_kmsg_it_requires(built):
    linked = json.loads(subprocess.run([str(built), "versions"], capture_output=True, check=True, text=True,
                                       timeout=30).stdout)
    assert linked["franz-go"] == f"v{RELEASE}" and CLIENTS[CLIENT].version() == RELEASE
    done = subprocess.run(go_build.command("franz-go", RELEASE), input='{"id": 1, "op": "hello"}\n',
                          capture_output=True, text=True, timeout=30)
    hello = json.loads(done.stdout.splitlines()[0])["data"]
    assert hello["client_version"] == RELEASE
    assert hello["kmsg_version"] == "1.9.0"  # what franz-go 1.18.0's go.mod requires, not the repo's pin


def test_an_old_release_commits_and_has_its_bug_on_the_embedded_broker(built, tmp_path):
    ok, why = TARGETS["embedded"].availability()
    if not ok:
        pytest.skip(why)
    rows = run(RunOptions(targets=["embedded"], clients=[CLIENT],
                          cases=load_cases(["txn/basic_commit", "regressions/franz-go-1359"]),
                          results_dir=tmp_path / "results", proxy="auto", jobs=1))
    by_case = {r.case: r for r in rows}
    assert {r.client_version for r in rows} == {RELEASE}
    assert by_case["txn/basic_commit"].verdict.value == "pass", by_case["txn/basic_commit"].reason
    bug = by_case["regressions/franz-go-1359"]
    assert bug.verdict.value == "fail"
    assert any("read ['a', 'b']" in (c.message or "") for c in bug.checks if not c.passed), bug.checks
