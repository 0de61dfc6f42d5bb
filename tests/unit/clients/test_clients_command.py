"""`kconform clients`: one line per registered client, whether it can run here and why (not)."""

from __future__ import annotations

import json

from conformance.cli import main
from conformance.clients.errors import KAFKA_ERRORS, error_table_file
from conformance.clients.registry import CLIENTS, VERSIONED


def test_clients_lists_every_registered_client_with_its_availability(capsys):
    assert main(["clients"]) == 0
    lines = capsys.readouterr().out.splitlines()
    forms = [f"{prefix}@VERSION" for prefix in VERSIONED]
    assert [line.split()[0] for line in lines] == [*CLIENTS, *forms]
    for line, (name, spec) in zip(lines, CLIENTS.items()):
        ok, detail = spec.availability()
        assert line.split()[1] == ("yes" if ok else "no") and line.rstrip().endswith(detail)
    versioned = dict(zip(forms, lines[len(CLIENTS):]))
    assert versioned["java@VERSION"].split()[1] == lines[list(CLIENTS).index("java")].split()[1]  # usable where java is
    assert "Maven Central" in versioned["java@VERSION"] and "ready here:" in versioned["java@VERSION"]
    for client, source in (("franz-go", "Go module proxy"), ("sarama", "Go module proxy"), ("confluent", "from PyPI"),
                           ("aiokafka", "from PyPI"), ("kafka-python", "from PyPI")):
        assert source in versioned[f"{client}@VERSION"] and "ready here:" in versioned[f"{client}@VERSION"]
    for client in ("franz-go", "sarama"):  # usable where its client is
        assert versioned[f"{client}@VERSION"].split()[1] == lines[list(CLIENTS).index(client)].split()[1]


def test_error_table_file_is_kafkas_table(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    path = error_table_file()
    assert path.is_relative_to(tmp_path) and error_table_file() == path  # written once, same name
    table = json.loads(path.read_text())
    assert table == {str(code): name for code, (name, _) in KAFKA_ERRORS.items()}
    assert table["90"] == "PRODUCER_FENCED" and table["47"] == "INVALID_PRODUCER_EPOCH"
