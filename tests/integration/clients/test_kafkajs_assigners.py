"""The KafkaJS driver's range and roundrobin assigners (conformance/clients/kafkajs/assigners.js)
compute what Java's RangeAssignor and RoundRobinAssignor compute.

Why against Java itself: a KafkaJS member that leads a mixed group assigns for every member, so
its plan must be Java's to the partition -- member order (static members first, by instance id,
then member id), members subscribed to different topics, uneven partition counts, a topic no
metadata knows. The oracle is kafka-clients 4.4.0's assignors, run from the Java driver's class
path on the same seeded random groups; the test needs no broker.
"""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from conformance.clients import CLIENTS

ORACLE = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.TopicPartition;

public class AssignorOracle {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        ArrayNode out = json.createArrayNode();
        for (JsonNode c : json.readTree(System.in)) {
            Map<String, Integer> counts = new HashMap<>();
            c.get("partitions").fields().forEachRemaining(e -> counts.put(e.getKey(), e.getValue().asInt()));
            Map<String, Subscription> subs = new HashMap<>();
            for (JsonNode m : c.get("members")) {
                List<String> topics = new ArrayList<>();
                m.get("topics").forEach(t -> topics.add(t.asText()));
                Subscription s = new Subscription(topics, null, List.of(), -1, Optional.empty());
                if (m.hasNonNull("instance_id")) s.setGroupInstanceId(Optional.of(m.get("instance_id").asText()));
                subs.put(m.get("member_id").asText(), s);
            }
            Map<String, List<TopicPartition>> plan = c.get("assignor").asText().equals("range")
                ? new RangeAssignor().assign(counts, subs) : new RoundRobinAssignor().assign(counts, subs);
            ObjectNode row = out.addObject();
            for (Map.Entry<String, List<TopicPartition>> e : plan.entrySet()) {
                ObjectNode byTopic = row.putObject(e.getKey());
                for (TopicPartition tp : e.getValue()) {
                    ArrayNode ps = byTopic.has(tp.topic()) ? (ArrayNode) byTopic.get(tp.topic()) : byTopic.putArray(tp.topic());
                    ps.add(tp.partition());
                }
            }
        }
        System.out.println(json.writeValueAsString(out));
    }
}
"""

# assigners.js on the same cases: members ordered and assigned as the assigner does, with the
# partition counts the leader's metadata would give (topics sorted, unknown ones absent).
NODE = r"""
const { rangeAssign, roundRobinAssign, javaMemberOrder } = require('./assigners')
let input = ''
process.stdin.on('data', d => { input += d })
process.stdin.on('end', () => {
  const out = JSON.parse(input).map(c => {
    const subs = c.members.map(m => ({ memberId: m.member_id, groupInstanceId: m.instance_id, topics: new Set(m.topics) }))
      .sort(javaMemberOrder)
    const counts = new Map(Object.keys(c.partitions).sort().map(t => [t, c.partitions[t]]))
    const plan = (c.assignor === 'range' ? rangeAssign : roundRobinAssign)(subs, counts)
    return Object.fromEntries([...plan].map(([member, byTopic]) => [member, byTopic]))
  })
  process.stdout.write(JSON.stringify(out))
})
"""


def random_groups(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        topics = [f"t{k}" for k in range(rng.randint(1, 3))]
        partitions = {t: rng.randint(1, 9) for t in topics}
        unknown = "no-metadata"  # a topic some member subscribes to that the leader's metadata lacks
        members = []
        for m in range(rng.randint(1, 6)):
            subscribed = rng.sample(topics, rng.randint(1, len(topics))) + ([unknown] if rng.random() < 0.1 else [])
            members.append({"member_id": f"{rng.choice('abcz')}{rng.randrange(10**6)}-{m}",
                            "instance_id": f"i{rng.randrange(100)}-{m}" if rng.random() < 0.3 else None,
                            "topics": subscribed})
        cases.append({"assignor": "range" if i % 2 == 0 else "roundrobin", "partitions": partitions,
                      "members": members})
    return cases


def _normalised(plans: list[dict]) -> list[dict]:
    """member -> topic -> sorted partitions, members and topics with nothing dropped."""
    return [{m: {t: sorted(ps) for t, ps in byTopic.items() if ps} for m, byTopic in plan.items()
             if any(byTopic.values())} for plan in plans]


def test_kafkajs_range_and_roundrobin_are_javas(tmp_path):
    for client in ("java", "kafkajs"):
        ok, reason = CLIENTS[client].availability()
        if not ok:
            pytest.skip(f"{client} unavailable: {reason}")
    from conformance.clients import java_build, kafkajs_build

    cases = random_groups(seed=20240601, count=400)
    source = tmp_path / "AssignorOracle.java"
    source.write_text(ORACLE)
    java = subprocess.run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", java_build.classpath(),
                           str(source)], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=120)
    assert java.returncode == 0, java.stderr[-2000:]
    node = subprocess.run(["node", "-e", NODE], cwd=kafkajs_build.BUILD.ensure(), input=json.dumps(cases),
                          capture_output=True, text=True, timeout=60)
    assert node.returncode == 0, node.stderr[-2000:]
    want, got = _normalised(json.loads(java.stdout)), _normalised(json.loads(node.stdout))
    differ = [(c, w, g) for c, w, g in zip(cases, want, got) if w != g]
    assert len(want) == len(got) == len(cases)
    assert not differ, f"{len(differ)} of {len(cases)} groups differ; first: {differ[0]}"
    assert sum(1 for c in cases for m in c["members"] if m["instance_id"]) > 50  # the order was exercised
