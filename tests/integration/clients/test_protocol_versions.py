"""Which version of each API every client negotiates with each broker.

The same short transactional flow (init, begin, send to 2 partitions, commit, then a
read_committed read) runs through every client driver against the embedded broker and
against Apache Kafka, each behind the Kafka-aware proxy, whose transcript names the API and
version of every request. The table is printed and written to ``protocol-versions.txt``.

The embedded broker advertises what it implements; where a client would negotiate a different
version with it than with Apache Kafka, the client would exercise different broker rules on the
two targets, so the test requires the same version for every API both saw.
"""

from __future__ import annotations

import pytest

from conformance.proxy import ProxyServer
from conformance.targets import TopicSpec, Topology, make_target

TARGETS = [pytest.param("embedded", id="embedded"),
           pytest.param("apache-kafka", id="kafka", marks=[pytest.mark.slow, pytest.mark.kafka])]
TXN_APIS = {"InitProducerId", "EndTxn", "FindCoordinator", "Produce", "Fetch"}


def _flow(spawn, h, client: str, bootstrap: str, topic: str) -> None:
    p = spawn(client, label=f"{client}-producer")
    h.ok(p.call("create_producer", config={"bootstrap.servers": bootstrap,
                                           "transactional.id": h.unique(f"pv-{client}")}))
    h.ok(p.call("init_transactions", deadline_ms=60_000))
    h.ok(p.call("begin_transaction"))
    for i in range(2):
        h.ok(p.call("send", topic=topic, partition=i, key=f"k{i}", value=f"v{i}"))
    h.ok(p.call("commit_transaction", deadline_ms=60_000))
    c = spawn(client, label=f"{client}-consumer")
    h.ok(c.call("create_consumer", config={"bootstrap.servers": bootstrap, "group.id": h.unique("pv"),
                                           "isolation.level": "read_committed",
                                           "auto.offset.reset": "earliest", "enable.auto.commit": "false"}))
    h.ok(c.call("assign", partitions=[{"topic": topic, "partition": i, "offset": 0} for i in range(2)]))
    end = h.end_offsets(c, topic, 2, "read_committed")
    records = h.read_until_end(c, [{"topic": topic, "partition": i} for i in range(2)], end)
    assert sorted(r["value"] for r in records) == ["v0", "v1"]
    p.close()
    c.close()


def _negotiated(lines: list[dict]) -> dict[str, set[int]]:
    """Versions of the client's own requests; the broker's requests to itself (Kafka's
    AddPartitionsToTxnManager verifying a partition goes through the advertised listener too)
    carry the broker's client id and are left out."""
    out: dict[str, set[int]] = {}
    for line in lines:
        cid = line.get("client_id") or ""
        if cid.startswith(("broker-", "AddPartitionsManager-")):
            continue
        if line.get("dir") == "c2b" and line.get("api_name"):
            out.setdefault(line["api_name"], set()).add(line["api_version"])
    return out


@pytest.fixture(scope="module")
def table():
    rows: dict[tuple[str, str], dict[str, set[int]]] = {}
    yield rows


@pytest.mark.parametrize("target_name", TARGETS)
def test_versions_negotiated_per_client(target_name, spawn, h, tmp_path, table):
    target = make_target(target_name)
    ok, why = target.availability()
    if not ok:
        pytest.skip(f"{target_name} unavailable: {why}")
    proxy = ProxyServer()
    node = proxy.add_node(1)
    try:
        # topics are created once the proxy forwards: the node advertises the proxy's port
        upstream = target.start(Topology(1, []), {"advertised.listeners": node.listener}, tmp_path / target_name)
        host, port = upstream.split(",")[0].rsplit(":", 1)
        node.set_upstream(host, int(port))
        proxy.start_in_thread()
        from conformance.clients import CLIENTS
        for client in CLIENTS:
            if not CLIENTS[client].availability()[0]:
                continue
            topic = f"versions-{client}"
            target.create_topics([TopicSpec(topic, 2, 1)])
            proxy.transcript.restart()
            _flow(spawn, h, client, proxy.bootstrap, topic)
            table[(target_name, client)] = _negotiated(proxy.transcript.lines())
    finally:
        proxy.stop()
        target.stop()
    for client in CLIENTS:
        seen = table.get((target_name, client))
        if seen is None:
            continue
        assert TXN_APIS <= set(seen), f"{client} on {target_name}: {sorted(seen)}"
    # the report, once both targets ran
    if {t for t, _ in table} >= {"embedded", "apache-kafka"}:
        apis = sorted({a for v in table.values() for a in v})
        clients = sorted({c for _, c in table})
        header = f"{'API':<22}" + "".join(f"{c + '@' + t:>26}" for c in clients for t in ("embedded", "apache-kafka"))
        lines = [header]
        for a in apis:
            row = f"{a:<22}"
            for c in clients:
                for t in ("embedded", "apache-kafka"):
                    vs = table.get((t, c), {}).get(a)
                    row += f"{(','.join(map(str, sorted(vs))) if vs else '-'):>26}"
            lines.append(row)
        text = "\n".join(lines)
        print("\n" + text)
        (tmp_path / "protocol-versions.txt").write_text(text + "\n")
        mismatches = [(c, a, sorted(table[("embedded", c)][a]), sorted(table[("apache-kafka", c)][a]))
                      for c in clients for a in apis
                      if a in table.get(("embedded", c), {}) and a in table.get(("apache-kafka", c), {})
                      and table[("embedded", c)][a] != table[("apache-kafka", c)][a]]
        assert not mismatches, f"versions negotiated differ (client, api, embedded, kafka): {mismatches}"
