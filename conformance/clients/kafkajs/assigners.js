'use strict'
/**
 * Java's "range" and "roundrobin" assignors as KafkaJS partition assigners, so that a KafkaJS
 * member can share a consumer group with members of the other clients.
 *
 * Why: a group's members must offer one protocol name for the coordinator to pick it, and KafkaJS
 * 2.2.4's only assigner is named "RoundRobinAssigner" (not Java's "roundrobin"); its algorithm
 * also differs (it assigns every partition of the leader's own topics to every member, ignoring
 * what each member subscribed to). The group's leader runs its own assignor, so a KafkaJS leader
 * of a mixed group must compute what Java's would. Both Java assignors are small and exact to
 * reproduce (kafka-clients 4.4.0, RangeAssignor and RoundRobinAssignor without racks -- KafkaJS
 * sends no rack, and Java's rack matching applies only when every member has one):
 *
 * - members are ordered as Java's AbstractPartitionAssignor.MemberInfo: those with a group
 *   instance id first, by it, then the others by member id (String.compareTo: UTF-16 code units,
 *   which JavaScript's < compares too);
 * - range: per topic, the members subscribed to it in that order; with P partitions and C
 *   members, member i takes floor(P/C) partitions, one more for the first P % C, consecutively
 *   from partition 0;
 * - roundrobin: every partition of every subscribed topic, topics sorted by name and partitions
 *   by number, dealt to the members in a circle, skipping a member not subscribed to the topic.
 * A topic the cluster's metadata does not know is skipped, as Java skips it.
 *
 * Wire format (ConsumerProtocol): the subscription is sent at version 0 (topics, user data; what
 * KafkaJS's own assigner sends), the assignment at version 0. KafkaJS's MemberMetadata.decode reads
 * the fields of version 0 from a Java member's version 3 subscription and ignores the fields
 * after them (owned partitions, generation, rack), which an eager assignor does not use.
 *
 * Both are eager: KafkaJS revokes every partition before it rejoins (no KIP-429), so Java's sticky
 * and cooperative-sticky assignors have no KafkaJS counterpart (config.js refuses them).
 */

const { AssignerProtocol } = require('kafkajs')

const SUBSCRIPTION_VERSION = 0
const ASSIGNMENT_VERSION = 0

/** Java's MemberInfo order: static members (by instance id) before dynamic ones (by member id). */
function javaMemberOrder (a, b) {
  const ai = a.groupInstanceId
  const bi = b.groupInstanceId
  if (ai != null && bi != null) return ai < bi ? -1 : ai > bi ? 1 : 0
  if (ai != null) return -1
  if (bi != null) return 1
  return a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0
}

/** Each member's subscribed topics (decoded from its JoinGroup metadata), in Java's order. */
function subscriptions (members) {
  return members.map(m => ({
    memberId: m.memberId,
    groupInstanceId: m.groupInstanceId == null ? null : m.groupInstanceId,
    topics: new Set(AssignerProtocol.MemberMetadata.decode(m.memberMetadata).topics)
  })).sort(javaMemberOrder)
}

/** topic -> partition count, for every topic some member subscribed to and the cluster knows. */
async function partitionCounts (cluster, subs) {
  const topics = [...new Set(subs.flatMap(s => [...s.topics]))].sort()
  await cluster.addMultipleTargetTopics(topics) // the leader's metadata must cover every member's topics
  const counts = new Map()
  for (const topic of topics) {
    const n = cluster.findTopicPartitionMetadata(topic).length
    if (n > 0) counts.set(topic, n)
  }
  return counts
}

function rangeAssign (subs, counts) {
  const out = new Map(subs.map(s => [s.memberId, {}]))
  for (const [topic, n] of counts) {
    const consumers = subs.filter(s => s.topics.has(topic))
    if (!consumers.length) continue
    const per = Math.floor(n / consumers.length)
    const extra = n % consumers.length
    consumers.forEach((s, i) => {
      const start = per * i + Math.min(i, extra)
      const length = per + (i + 1 > extra ? 0 : 1)
      if (length > 0) out.get(s.memberId)[topic] = Array.from({ length }, (_, k) => start + k)
    })
  }
  return out
}

function roundRobinAssign (subs, counts) {
  const out = new Map(subs.map(s => [s.memberId, {}]))
  let next = 0
  for (const [topic, n] of counts) { // Map keeps partitionCounts' sorted topic order
    if (!subs.some(s => s.topics.has(topic))) continue
    for (let p = 0; p < n; p++) {
      while (!subs[next % subs.length].topics.has(topic)) next++
      const member = out.get(subs[next % subs.length].memberId);
      (member[topic] = member[topic] || []).push(p)
      next++
    }
  }
  return out
}

const ALGORITHMS = { range: rangeAssign, roundrobin: roundRobinAssign }

/** A KafkaJS partition assigner factory for Java's assignor `name` ("range" | "roundrobin");
 * `onCluster` receives the cluster KafkaJS hands to assigners (the driver commits through it). */
function javaAssigner (name, onCluster) {
  const algorithm = ALGORITHMS[name]
  if (!algorithm) throw new Error(`no Java-compatible KafkaJS assigner named ${name}`)
  return ({ cluster }) => {
    if (onCluster) onCluster(cluster)
    return {
      name,
      version: SUBSCRIPTION_VERSION,
      async assign ({ members }) {
        const subs = subscriptions(members)
        const plan = algorithm(subs, await partitionCounts(cluster, subs))
        return subs.map(s => ({
          memberId: s.memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({
            version: ASSIGNMENT_VERSION, assignment: plan.get(s.memberId), userData: Buffer.alloc(0)
          })
        }))
      },
      protocol ({ topics }) {
        return {
          name,
          metadata: AssignerProtocol.MemberMetadata.encode({ version: SUBSCRIPTION_VERSION, topics, userData: Buffer.alloc(0) })
        }
      }
    }
  }
}

module.exports = { javaAssigner, rangeAssign, roundRobinAssign, javaMemberOrder, ASSIGNERS: Object.keys(ALGORITHMS) }
