"""`kconform clients`: one line per registered client, whether it can run here and why (not)."""

from __future__ import annotations

import json

from conformance.cli import main
from conformance.clients.errors import KAFKA_ERRORS, error_table_file
from conformance.clients.registry import CLIENTS


def test_clients_lists_every_registered_client_with_its_availability(capsys):
    assert main(["clients"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [*CLIENTS, "java@VERSION", "franz-go@VERSION", "sarama@VERSION"]
    for line, (name, spec) in zip(lines, CLIENTS.items()):
        ok, detail = spec.availability()
        assert line.split()[1] == ("yes" if ok else "no") and line.rstrip().endswith(detail)
    for line, (client, source) in zip(lines[len(CLIENTS):], [("java", "Maven Central"), ("franz-go", "Go module proxy"),
                                                             ("sarama", "Go module proxy")]):
        assert line.split()[1] == lines[list(CLIENTS).index(client)].split()[1]  # usable where its client is
        assert source in line and "built here:" in line


def test_error_table_file_is_kafkas_table(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    path = error_table_file()
    assert path.is_relative_to(tmp_path) and error_table_file() == path  # written once, same name
    table = json.loads(path.read_text())
    assert table == {str(code): name for code, (name, _) in KAFKA_ERRORS.items()}
    assert table["90"] == "PRODUCER_FENCED" and table["47"] == "INVALID_PRODUCER_EPOCH"
