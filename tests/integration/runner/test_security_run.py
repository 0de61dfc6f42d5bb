"""A run over SASL (`kconform run --security sasl_plaintext`): every client authenticates, the rows
say so, and the run's password is written nowhere in its results directory (issue 22: secrets
never land in results, transcripts, pcap or reports)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from conformance.clients.registry import CLIENTS
from conformance.dsl import load_cases
from conformance.runner import RunOptions, run
from conformance.security import Security
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _available_clients() -> list[str]:
    return [name for name, spec in CLIENTS.items() if spec.availability()[0]]


def secret_leaks(root: Path, secret: str) -> list[str]:
    """Every place under ``root`` that holds ``secret``: any file's bytes (UTF-8 and UTF-16, as a
    JVM or a report may write it), and the frames a transcript keeps base64-encoded, decoded."""
    needles = [secret.encode("utf-8"), secret.encode("utf-16-le"), secret.encode("utf-16-be")]
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if any(n in raw for n in needles):
            found.append(str(path.relative_to(root)))
        if path.name.endswith(".jsonl"):
            for i, line in enumerate(raw.splitlines()):
                try:
                    data = json.loads(line).get("data")
                except (ValueError, AttributeError):
                    continue
                if isinstance(data, str) and secret.encode() in base64.b64decode(data + "=" * (-len(data) % 4)):
                    found.append(f"{path.relative_to(root)} line {i + 1} (a frame)")
    return found


def test_secret_leaks_finds_a_password_in_a_file_and_in_a_frame(tmp_path):
    """The search itself: a password in a log line, in a UTF-16 file, in a transcript's frame."""
    (tmp_path / "a.log").write_text("connecting with s3cr3t-pw\n")
    (tmp_path / "b.bin").write_bytes("xx s3cr3t-pw".encode("utf-16-le"))
    frame = base64.b64encode(b"\x00\x01user\x00s3cr3t-pw").decode()
    (tmp_path / "t.jsonl").write_text(json.dumps({"data": frame}) + "\n")
    (tmp_path / "clean.log").write_text("nothing here\n")
    assert secret_leaks(tmp_path, "s3cr3t-pw") == ["a.log", "b.bin", "t.jsonl line 1 (a frame)"]


# Embedded with every client (each driver's logs); Apache Kafka with one (its server.log, format.log).
# Over SASL_SSL the proxy ends and opens TLS, so its transcript still holds the SCRAM exchange.
@pytest.mark.parametrize("target,every_client,protocol", [("embedded", True, "sasl_plaintext"),
                                                          ("embedded", True, "sasl_ssl"),
                                                          ("apache-kafka", False, "sasl_ssl")])
def test_a_run_over_sasl_authenticates_every_client_and_writes_no_password(tmp_path, target, every_client,
                                                                          protocol):
    ok, why = TARGETS[target].availability()
    if not ok:
        pytest.skip(why)
    clients = _available_clients()
    if not every_client:
        clients = [c for c in clients if c == "confluent"]
    if not clients:
        pytest.skip("no client available")
    sec = Security.generate(protocol)
    assert sec.password not in repr(sec)
    results = tmp_path / "results"
    rows = run(RunOptions(targets=[target], clients=clients, cases=load_cases(["txn/basic_commit"]),
                          results_dir=results, proxy="auto", jobs=1, security=sec))
    assert [(r.client, r.verdict.value, r.security_protocol) for r in rows] == \
        [(c, "pass", protocol.upper()) for c in clients], [r.reason for r in rows]
    meta = json.loads((results / "run.json").read_text())
    assert meta["security_protocol"] == protocol.upper()
    for row in rows:   # the clients really authenticated: their transcripts hold the SCRAM exchange
        transcript = results / row.artifacts["transcript"]
        names = [json.loads(line).get("api_name") for line in transcript.read_text().splitlines()]
        assert names.count("SaslAuthenticate") >= 4, (row.client, names[:10])
    assert secret_leaks(results, sec.password) == []
    if sec.tls:   # nor the brokers' private key
        key_line = Path(sec.keystore_file).read_text().splitlines()[1]
        assert secret_leaks(results, key_line) == []


def test_a_changed_password_is_written_nowhere_either(tmp_path, monkeypatch):
    """cases/security/scram_password_changed_mid_transaction gives the run's user a second
    password mid-run (change_run_password): neither it nor the run's own lands in the results."""
    if not CLIENTS["confluent"].availability()[0]:
        pytest.skip("confluent-kafka is not available")
    import types

    from conformance.runner import case_run
    changed = "kconform-changed-" + "x7Qp2" * 4
    made = []

    def token_urlsafe(n: int) -> str:
        made.append(n)
        return changed

    monkeypatch.setattr(case_run, "secrets", types.SimpleNamespace(token_urlsafe=token_urlsafe))
    sec = Security.generate("sasl_plaintext")
    results = tmp_path / "results"
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"],
                          cases=load_cases(["security/scram_password_changed_mid_transaction"]),
                          results_dir=results, proxy="auto", jobs=1, security=sec))
    assert [r.verdict.value for r in rows] == ["pass"], [r.reason for r in rows]
    assert made == [18]   # the case's password: new step made it here
    assert secret_leaks(results, changed) == []
    assert secret_leaks(results, sec.password) == []


def test_an_embedded_cluster_serves_a_sasl_ssl_run(tmp_path):
    """Three brokers and a controller, the clients on SASL_SSL, the brokers dialling each other on
    their PLAINTEXT REPLICATION listener: a leader killed under acks=all, and a transaction
    coordinator killed mid-transaction (markers and verification between brokers). The clients authenticated (their
    transcripts hold the SCRAM exchange) and no broker log says a replica fetch, a marker or a
    verification was refused."""
    if not CLIENTS["confluent"].availability()[0]:
        pytest.skip("confluent-kafka is not available")
    sec = Security.generate("sasl_ssl")
    results = tmp_path / "results"
    cases = ["cluster/acks_all_survives_leader_kill", "cluster/coordinator_kill_mid_txn"]
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"], cases=load_cases(cases),
                          results_dir=results, proxy="auto", jobs=1, security=sec))
    assert [(r.case, r.verdict.value, r.security_protocol) for r in rows] == \
        [(c, "pass", "SASL_SSL") for c in cases], [r.reason for r in rows]
    for row in rows:
        transcript = results / row.artifacts["transcript"]
        names = [json.loads(line).get("api_name") for line in transcript.read_text().splitlines()]
        assert names.count("SaslAuthenticate") >= 4, (row.case, names[:10])
    logs = "\n".join(p.read_text(errors="replace") for p in results.rglob("broker.log")) + \
        "\n".join(p.read_text(errors="replace") for p in results.rglob("*server*.log"))
    assert "ILLEGAL_SASL_STATE" not in logs and "SASL_AUTHENTICATION_FAILED" not in logs
    assert secret_leaks(results, sec.password) == []
