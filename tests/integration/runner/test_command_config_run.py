"""`kconform run --target external --command-config FILE`: a secured cluster someone else runs,
reached with the client properties file its users already have (issue 22).

The cluster here is an embedded broker this test starts with a SASL_SSL listener (PLAIN users,
a certificate of a CA made for the test); the properties file is what a Kafka user writes for
Kafka's CLI tools: PlainLoginModule in sasl.jaas.config and a JKS truststore (keytool converts
it, as it would for a user). Every client passes `txn/basic_commit` through the proxy, which
speaks TLS with a certificate of the run's own CA; the password lands nowhere in the results.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance import security
from conformance.clients.registry import CLIENTS
from tests.integration.runner.test_security_run import secret_leaks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PASSWORD = "ext-Pa55word-with-\"quote\"-and-\\back"


def _jks_truststore(ca_pem, where, password: str) -> None:
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
                    "-keystore", str(where), "-storetype", "JKS", "-storepass", password],
                   check=True, capture_output=True, timeout=60)


def test_an_external_sasl_ssl_cluster_with_the_users_own_properties(broker_factory, tmp_path):
    ca, keystore = security.certificates(tmp_path)
    broker = broker_factory({
        "listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "kconform.sasl.users": "alice:" + PASSWORD.replace(",", ""),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "group.initial.rebalance.delay.ms": "0"})
    truststore = tmp_path / "client.truststore.jks"
    _jks_truststore(ca, truststore, "changeit")
    escaped = PASSWORD.replace("\\", "\\\\").replace('"', '\\"')
    props = tmp_path / "client.properties"
    # as a user writes it: the JAAS line continued with a backslash, key: value once
    props.write_text(
        "# my cluster\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        f'    username="alice" password="{escaped.replace(chr(92), chr(92) * 2)}";\n'
        f"ssl.truststore.location={truststore}\n"
        "ssl.truststore.password=changeit\n")
    clients = [name for name, spec in CLIENTS.items() if spec.availability()[0]]
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "conformance.cli", "run", "--target", "external", "--command-config", str(props),
            "--case", "txn/basic_commit", "--results", str(results), "-j", "1", "--no-progress"]
    for c in clients:
        argv += ["--client", c]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=800,
                         env={**__import__("os").environ, "KCONFORM_BOOTSTRAP": broker.bootstrap})
    rows = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert [(r["client"], r["verdict"], r.get("security_protocol")) for r in rows] == \
        [(c, "pass", "SASL_SSL") for c in clients], (out.stdout[-2000:], out.stderr[-2000:],
                                                      [r.get("reason") for r in rows])
    for r in rows:   # through the proxy: its transcript holds each client's PLAIN exchange
        names = [json.loads(line).get("api_name") for line in (results / r["artifacts"]["transcript"]).open()]
        assert names.count("SaslAuthenticate") >= 2, (r["client"], names[:10])
    assert secret_leaks(results, PASSWORD) == []
    assert secret_leaks(results, "changeit") == []


def test_command_config_refuses_what_it_cannot_do(tmp_path):
    """Bad input names the file, the key and what was expected; exit 2 before anything starts."""
    props = tmp_path / "kerberos.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--case", "txn/basic_commit",
                               "--results", str(tmp_path / "r"), *extra], capture_output=True, text=True, timeout=120)

    out = run("--target", "external", "--command-config", str(props))
    assert out.returncode == 2 and f"{props}: sasl.mechanism: expected one of PLAIN" in out.stderr, out.stderr
    out = run("--target", "embedded", "--command-config", str(props))
    assert out.returncode == 2 and "--target external only" in out.stderr, out.stderr
