package kconform.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * kconform's Java client driver: one KafkaProducer, one KafkaConsumer and one Admin of
 * org.apache.kafka:kafka-clients behind the line-delimited JSON driver protocol
 * (conformance/clients/protocol.py documents it).
 *
 * <p>Each op runs on a worker thread and the main loop waits for it until the op's deadline (+ slack):
 * several kafka-clients calls have no timeout of their own (flush, and initTransactions/commitTransaction
 * block up to max.block.ms), and the protocol promises an answer by the deadline. A call still running
 * then is answered DEADLINE_EXCEEDED and left to finish in the background.
 */
public final class Driver {
    private static final long LIBRARY_SLACK_MS = 500;
    /** Bound on the wait for a transactional producer to settle in its error state after a failed producer op. */
    private static final long ERROR_STATE_SETTLE_MS = 1000;
    private static final Set<String> OPS = Set.of(
            "hello", "create_producer", "create_consumer", "create_admin", "init_transactions",
            "begin_transaction", "send", "flush", "send_offsets_to_transaction", "commit_transaction",
            "abort_transaction", "subscribe", "assign", "poll", "commit", "committed", "position", "close",
            "describe_transactions", "describe_producers", "fence_producers", "list_offsets", "create_topics");
    /** Ops of the definition (ops.yaml, not required) that kafka-clients has no counterpart for. */
    private static final Map<String, String> UNSUPPORTED = Map.of(
            "eos_loop", "kafka-clients has no consume-transform-produce loop of its own (Kafka Streams is a framework, not this client)");
    private static final Set<String> PRODUCER_OPS = Set.of(
            "init_transactions", "begin_transaction", "send", "flush", "send_offsets_to_transaction",
            "commit_transaction", "abort_transaction");

    private volatile KafkaProducer<byte[], byte[]> producer;
    private volatile KafkaConsumer<byte[], byte[]> consumer;
    private volatile Admin admin;
    private volatile String bootstrap;
    private final ExecutorService workers = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "kconform-op");
        t.setDaemon(true);
        return t;
    });

    // Delivery results of send(wait=false), handed out by the next flush.
    private long nextSeq = 0;
    private final Set<Long> outstanding = new HashSet<>();
    private final List<ObjectNode> delivered = new ArrayList<>();
    // Partitions the group's rebalances took from the consumer (its listener, called inside
    // KafkaConsumer.poll) since the poll op last looked.
    private final Set<TopicPartition> revoked = Collections.synchronizedSet(new HashSet<>());
    // The consumer commits on its own (enable.auto.commit, true by default): poll then drops nothing
    // -- KafkaConsumer commits the positions of all it returned, the records poll gathered too, as it
    // rebalances (onJoinPrepare) and every auto.commit.interval.ms, so their next owner starts after
    // them and dropping them would lose them (tests/integration/clients/test_poll_rebalance.py).
    private boolean consumerAutoCommits = false;

    /** A failure the driver decides (not thrown by kafka-clients). */
    static final class OpError extends RuntimeException {
        final ObjectNode info;

        OpError(String name, String message) {
            super(message);
            this.info = Outcomes.driverError(name, message);
        }

        OpError(ObjectNode info) {
            super(info.path("message").asText());
            this.info = info;
        }
    }

    /** An op's time budget. */
    static final class Deadline {
        final long endNanos;

        Deadline(long budgetMs) {
            this.endNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
        }

        long remainingMs() {
            return Math.max(0, TimeUnit.NANOSECONDS.toMillis(endNanos - System.nanoTime()));
        }

        Duration remaining() {
            return Duration.ofMillis(remainingMs());
        }

        boolean expired() {
            return System.nanoTime() >= endNanos;
        }
    }

    public static void main(String[] args) throws Exception {
        // Replies own the real stdout; anything else printing to System.out lands on stderr instead.
        PrintStream replies = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        InputStream in = System.in;
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        Driver driver = new Driver();
        String line;
        while ((line = reader.readLine()) != null) {
            if (line.isBlank()) continue;
            ObjectNode reply = driver.handleLine(line);
            replies.println(Outcomes.JSON.writeValueAsString(reply));
            replies.flush();
        }
        // stdin closed: the runner is done with us. Do not wait for client threads.
        Runtime.getRuntime().halt(0);
    }

    ObjectNode handleLine(String line) {
        JsonNode req;
        try {
            req = Outcomes.JSON.readTree(line);
        } catch (Exception e) {
            return errorReply(null, Outcomes.driverError("DRIVER_ERROR", "malformed request: " + e.getMessage()));
        }
        JsonNode id = req.get("id");
        String op = req.path("op").asText("");
        Deadline deadline = new Deadline(req.path("deadline_ms").asLong(30000));
        if (UNSUPPORTED.containsKey(op)) {
            return errorReply(id, Outcomes.driverError("UNSUPPORTED_BY_CLIENT", op + ": " + UNSUPPORTED.get(op)));
        }
        if (!OPS.contains(op)) {
            return errorReply(id, Outcomes.driverError("DRIVER_ERROR", "unknown op '" + op + "'"));
        }
        Future<JsonNode> future = workers.submit(() -> dispatch(op, req, deadline));
        try {
            JsonNode data = future.get(deadline.remainingMs() + LIBRARY_SLACK_MS, TimeUnit.MILLISECONDS);
            ObjectNode reply = Outcomes.JSON.createObjectNode();
            reply.set("id", id);
            reply.put("ok", true);
            reply.set("data", data == null ? Outcomes.JSON.createObjectNode() : data);
            return reply;
        } catch (TimeoutException e) {
            return errorReply(id, Outcomes.driverError("DEADLINE_EXCEEDED",
                    op + ": the library call was still running after " + req.path("deadline_ms").asLong(30000) + " ms"));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return errorReply(id, Outcomes.driverError("DRIVER_ERROR", "interrupted"));
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof OpError) {
                return errorReply(id, ((OpError) cause).info);
            }
            if (!PRODUCER_OPS.contains(op)) {
                return errorReply(id, Outcomes.error(cause, null));
            }
            // Some failures reach the caller before the client moves to its error state (a send's
            // future, an EndTxn answered UNKNOWN_PRODUCER_ID or TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            // both measured as flipping between runs): read the settled classification.
            Outcomes.awaitTransactionErrorState(producer, ERROR_STATE_SETTLE_MS);
            return errorReply(id, Outcomes.error(cause, producer));
        }
    }

    private static ObjectNode errorReply(JsonNode id, ObjectNode info) {
        ObjectNode reply = Outcomes.JSON.createObjectNode();
        reply.set("id", id);
        reply.put("ok", false);
        reply.set("error", info);
        return reply;
    }

    private JsonNode dispatch(String op, JsonNode a, Deadline d) throws Exception {
        switch (op) {
            case "hello": return hello();
            case "create_producer": return createProducer(a);
            case "create_consumer": return createConsumer(a);
            case "create_admin": return createAdmin(a);
            case "init_transactions": producer().initTransactions(); return empty();
            case "begin_transaction": producer().beginTransaction(); return empty();
            case "commit_transaction": producer().commitTransaction(); return empty();
            case "abort_transaction": producer().abortTransaction(); return empty();
            case "send_offsets_to_transaction": return sendOffsets(a);
            case "send": return send(a, d);
            case "flush": return flush();
            case "subscribe": return subscribe(a);
            case "assign": return assign(a);
            case "poll": return poll(a, d);
            case "commit": return commit(a, d);
            case "committed": return committed(a, d);
            case "position": return position(a, d);
            case "close": return close(a, d);
            case "describe_transactions": return describeTransactions(a, d);
            case "describe_producers": return describeProducers(a, d);
            case "fence_producers": return fenceProducers(a, d);
            case "list_offsets": return listOffsets(a, d);
            case "create_topics": return createTopics(a, d);
            default: throw new OpError("UNSUPPORTED_BY_CLIENT", op);
        }
    }

    private static ObjectNode empty() {
        return Outcomes.JSON.createObjectNode();
    }

    private ObjectNode hello() throws Exception {
        ObjectNode data = empty();
        data.put("client", "java");
        data.put("library", "kafka-clients");
        data.put("library_version", Compat.clientsVersion());
        data.put("client_version", Compat.clientsVersion());
        data.put("language", "java");
        data.put("java_version", System.getProperty("java.version"));
        data.put("protocol", 1);
        data.put("pid", ProcessHandle.current().pid());
        ArrayNode ops = data.putArray("ops");
        OPS.stream().sorted().forEach(ops::add);
        return data;
    }

    // -- lifecycle ----------------------------------------------------------------------------------
    /** A JSON object of config values as strings, the way Java properties spell them. */
    private static Map<String, String> strings(JsonNode object) {
        Map<String, String> out = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = object.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            out.put(e.getKey(), e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString());
        }
        return out;
    }

    /** The run's security settings (conformance/security.py), from $KCONFORM_CLIENT_SECURITY: the
     *  Java properties every client of this driver starts from (a case's config overrides them). */
    private static final Properties SECURITY = securityProps(System.getenv("KCONFORM_CLIENT_SECURITY"));

    static Properties securityProps(String json) {
        Properties p = new Properties();
        if (json == null || json.isEmpty()) return p;
        try {
            JsonNode s = Outcomes.JSON.readTree(json);
            p.put("security.protocol", s.path("protocol").asText());
            String mechanism = s.path("mechanism").asText("");
            if (!mechanism.isEmpty()) {   // SASL: PLAIN or SCRAM, the login module Kafka pairs with it
                String module = mechanism.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                        : "org.apache.kafka.common.security.scram.ScramLoginModule";
                p.put("sasl.mechanism", mechanism);
                p.put("sasl.jaas.config", module + " required username=\""
                        + jaasEscape(s.path("username").asText()) + "\" password=\"" + jaasEscape(s.path("password").asText()) + "\";");
            }
            if (s.hasNonNull("ca_file")) {   // TLS: the run's CAs only (PEM, KIP-651); host names verified
                p.put("ssl.truststore.type", "PEM");
                p.put("ssl.truststore.location", s.path("ca_file").asText());
            }
        } catch (java.io.IOException e) {
            throw new IllegalStateException("KCONFORM_CLIENT_SECURITY is not JSON", e);
        }
        return p;
    }

    private static String jaasEscape(String v) {
        return v.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    private static Properties configProps(JsonNode a) {
        Properties p = new Properties();
        p.putAll(SECURITY);
        p.putAll(strings(a.path("config")));
        return p;
    }

    /** A producer's or consumer's config; its bootstrap.servers becomes create_admin's default. */
    private Properties clientProps(JsonNode a) {
        Properties p = configProps(a);
        if (p.getProperty("bootstrap.servers") != null) bootstrap = p.getProperty("bootstrap.servers");
        return p;
    }

    private static void ensureNew(Object client, String kind) {
        if (client != null) throw new OpError("ILLEGAL_STATE", "this driver already has a " + kind + "; start another driver");
    }

    private static ObjectNode clientIdData(JsonNode a) {
        ObjectNode data = empty();
        data.put("client_id", a.path("config").path("client.id").asText(null));
        return data;
    }

    private JsonNode createProducer(JsonNode a) {
        ensureNew(producer, "producer");
        producer = new KafkaProducer<>(clientProps(a), new ByteArraySerializer(), new ByteArraySerializer());
        return clientIdData(a);
    }

    private JsonNode createConsumer(JsonNode a) {
        ensureNew(consumer, "consumer");
        Properties props = clientProps(a);
        consumerAutoCommits = Boolean.parseBoolean(props.getProperty("enable.auto.commit", "true").trim());
        consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        return clientIdData(a);
    }

    private JsonNode createAdmin(JsonNode a) {
        Properties p = configProps(a);
        if (p.getProperty("bootstrap.servers") == null) {
            if (bootstrap == null) throw new OpError("ILLEGAL_STATE", "create_admin needs config with bootstrap.servers");
            p.put("bootstrap.servers", bootstrap);
        }
        admin = Admin.create(p);
        return empty();
    }

    private Admin admin() {
        if (admin == null) createAdmin(empty());
        return admin;
    }

    private KafkaProducer<byte[], byte[]> producer() {
        if (producer == null) throw new OpError("ILLEGAL_STATE", "no producer: call create_producer first");
        return producer;
    }

    private KafkaConsumer<byte[], byte[]> consumer() {
        if (consumer == null) throw new OpError("ILLEGAL_STATE", "no consumer: call create_consumer first");
        return consumer;
    }

    @SuppressWarnings("deprecation")
    private JsonNode close(JsonNode a, Deadline d) {
        String which = a.path("which").asText("all");
        // timeout_ms bounds how long each close may wait for in-flight work (0: not at all).
        Duration wait = a.has("timeout_ms")
                ? Duration.ofMillis(Math.max(0, Math.min(a.get("timeout_ms").asLong(), d.remainingMs())))
                : d.remaining();
        ArrayNode closed = Outcomes.JSON.createArrayNode();
        if ((which.equals("producer") || which.equals("all")) && producer != null) {
            producer.close(wait);
            producer = null;
            closed.add("producer");
        }
        if ((which.equals("consumer") || which.equals("all")) && consumer != null) {
            consumer.close(wait);
            consumer = null;
            closed.add("consumer");
        }
        if ((which.equals("admin") || which.equals("all")) && admin != null) {
            admin.close(wait);
            admin = null;
            closed.add("admin");
        }
        ObjectNode data = empty();
        data.set("closed", closed);
        return data;
    }

    // -- produce ------------------------------------------------------------------------------------
    private static TopicPartition tp(JsonNode n) {
        return new TopicPartition(n.get("topic").asText(), n.get("partition").asInt());
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsets(JsonNode rows) {
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        for (JsonNode r : rows) {
            out.put(tp(r), new OffsetAndMetadata(r.get("offset").asLong(), r.path("metadata").asText("")));
        }
        return out;
    }

    private JsonNode send(JsonNode a, Deadline d) throws Exception {
        KafkaProducer<byte[], byte[]> p = producer();
        RecordHeaders headers = new RecordHeaders();
        for (JsonNode h : a.path("headers")) {
            headers.add(h.get(0).asText(), Outcomes.bytes(h.get(1)));
        }
        Integer partition = a.hasNonNull("partition") ? a.get("partition").asInt() : null;
        Long timestamp = a.hasNonNull("timestamp_ms") ? a.get("timestamp_ms").asLong() : null;
        String topic = a.get("topic").asText();
        ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                topic, partition, timestamp, Outcomes.bytes(a.get("key")), Outcomes.bytes(a.get("value")), headers);
        if (!a.path("wait").asBoolean(true)) {
            long seq;
            synchronized (delivered) {
                seq = ++nextSeq;
                outstanding.add(seq);
            }
            try {
                p.send(record, (md, ex) -> {
                    ObjectNode r = ex == null ? metadata(md) : failed(topic, partition, ex);
                    r.put("seq", seq);
                    synchronized (delivered) {
                        outstanding.remove(seq);
                        delivered.add(r);
                    }
                });
            } catch (RuntimeException e) {
                synchronized (delivered) {
                    outstanding.remove(seq);
                }
                throw e;
            }
            ObjectNode data = empty();
            data.put("queued", true);
            data.put("seq", seq);
            return data;
        }
        Future<RecordMetadata> f = p.send(record);
        try {
            return metadata(f.get(d.remainingMs(), TimeUnit.MILLISECONDS));
        } catch (TimeoutException e) {
            throw new OpError("DEADLINE_EXCEEDED", "no delivery result before the deadline");
        }
    }

    private ObjectNode failed(String topic, Integer partition, Exception ex) {
        ObjectNode r = empty();
        r.put("topic", topic);
        if (partition == null) r.putNull("partition"); else r.put("partition", partition);
        r.set("error", Outcomes.error(ex, producer));
        return r;
    }

    private static ObjectNode metadata(RecordMetadata md) {
        ObjectNode r = empty();
        r.put("topic", md.topic());
        r.put("partition", md.partition());
        r.put("offset", md.offset());
        if (md.hasTimestamp()) r.put("timestamp_ms", md.timestamp()); else r.putNull("timestamp_ms");
        return r;
    }

    private JsonNode flush() {
        producer().flush();
        ArrayNode out = Outcomes.JSON.createArrayNode();
        int pending;
        synchronized (delivered) {
            delivered.sort(Comparator.comparingLong(n -> n.get("seq").asLong()));
            for (ObjectNode n : delivered) out.add(n);
            delivered.clear();
            pending = outstanding.size();
        }
        if (pending > 0) {
            ObjectNode info = Outcomes.driverError("DEADLINE_EXCEEDED", pending + " records undelivered after flush");
            info.set("deliveries", out);
            info.put("pending", pending);
            throw new OpError(info);
        }
        ObjectNode data = empty();
        data.set("deliveries", out);
        return data;
    }

    private JsonNode sendOffsets(JsonNode a) {
        ConsumerGroupMetadata group;
        if (consumer != null) {
            group = consumer.groupMetadata();
        } else if (a.hasNonNull("group_id")) {
            group = new ConsumerGroupMetadata(a.get("group_id").asText());
        } else {
            throw new OpError("ILLEGAL_STATE", "send_offsets_to_transaction needs a consumer or a group_id");
        }
        producer().sendOffsetsToTransaction(offsets(a.get("offsets")), group);
        return empty();
    }

    // -- consume ------------------------------------------------------------------------------------
    private JsonNode subscribe(JsonNode a) {
        List<String> topics = new ArrayList<>();
        for (JsonNode t : a.get("topics")) topics.add(t.asText());
        consumer().subscribe(topics, new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                revoked.addAll(partitions);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                revoked.addAll(partitions);
            }
        });
        return empty();
    }

    private JsonNode assign(JsonNode a) {
        List<TopicPartition> parts = new ArrayList<>();
        for (JsonNode p : a.get("partitions")) parts.add(tp(p));
        KafkaConsumer<byte[], byte[]> c = consumer();
        c.assign(parts);
        for (JsonNode p : a.get("partitions")) {
            if (p.hasNonNull("offset")) c.seek(tp(p), p.get("offset").asLong());
        }
        return empty();
    }

    private JsonNode poll(JsonNode a, Deadline d) {
        KafkaConsumer<byte[], byte[]> c = consumer();
        int max = a.path("max_records").asInt(500);
        Deadline window = new Deadline(Math.min(a.path("timeout_ms").asLong(1000), d.remainingMs()));
        ArrayNode records = Outcomes.JSON.createArrayNode();
        // Records a poll returned beyond max_records: the consumer is sought back to the first of them
        // per partition, so they are read again by the next poll, as in the other drivers.
        Map<TopicPartition, Long> rewind = new HashMap<>();
        revoked.clear();
        while (records.size() < max && !window.expired()) {
            ConsumerRecords<byte[], byte[]> batch = c.poll(Duration.ofMillis(Math.min(200, window.remainingMs())));
            if (!revoked.isEmpty() && !consumerAutoCommits) {
                // The group rebalanced inside that poll and took these partitions away (an eager
                // rebalance takes them all, then assigns some back from the committed offsets). What
                // this op gathered from them before is the old generation's: its next owner, or this
                // consumer from the committed offset, reads it again -- returning it too would hand
                // the caller records twice, and a copier would copy them twice with offsets sent under
                // the new generation. A KafkaConsumer.poll() never mixes generations; neither does
                // this op. Their rewinds go too: the rebalance set their positions.
                records = dropPartitions(records, revoked);
                rewind.keySet().removeAll(revoked);
                revoked.clear();
            }
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                TopicPartition part = new TopicPartition(r.topic(), r.partition());
                if (records.size() >= max || rewind.containsKey(part)) {
                    rewind.putIfAbsent(part, r.offset());
                    continue;
                }
                ObjectNode n = records.addObject();
                n.put("topic", r.topic());
                n.put("partition", r.partition());
                n.put("offset", r.offset());
                n.set("key", Outcomes.payload(r.key()));
                n.set("value", Outcomes.payload(r.value()));
                ArrayNode hs = n.putArray("headers");
                for (Header h : r.headers()) {
                    ArrayNode pair = hs.addArray();
                    pair.add(h.key());
                    pair.add(Outcomes.payload(h.value()));
                }
                if (r.timestamp() >= 0) n.put("timestamp_ms", r.timestamp()); else n.putNull("timestamp_ms");
            }
        }
        Set<TopicPartition> owned = c.assignment();   // seek() throws for a partition not assigned
        for (Map.Entry<TopicPartition, Long> e : rewind.entrySet()) {
            if (owned.contains(e.getKey())) c.seek(e.getKey(), e.getValue());
        }
        ObjectNode data = empty();
        data.set("records", records);
        return data;
    }

    /** The records not of these partitions, in their order. */
    private static ArrayNode dropPartitions(ArrayNode records, Set<TopicPartition> gone) {
        ArrayNode kept = Outcomes.JSON.createArrayNode();
        for (JsonNode n : records) {
            if (!gone.contains(new TopicPartition(n.get("topic").asText(), n.get("partition").asInt()))) kept.add(n);
        }
        return kept;
    }

    private JsonNode commit(JsonNode a, Deadline d) {
        if (a.hasNonNull("offsets") && a.get("offsets").size() > 0) {
            consumer().commitSync(offsets(a.get("offsets")), d.remaining());
        } else {
            consumer().commitSync(d.remaining());
        }
        return empty();
    }

    private JsonNode committed(JsonNode a, Deadline d) {
        Set<TopicPartition> parts = new java.util.LinkedHashSet<>();
        for (JsonNode p : a.get("partitions")) parts.add(tp(p));
        Map<TopicPartition, OffsetAndMetadata> got = consumer().committed(parts, d.remaining());
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (TopicPartition t : parts) {
            OffsetAndMetadata om = got.get(t);
            ObjectNode n = out.addObject();
            n.put("topic", t.topic());
            n.put("partition", t.partition());
            if (om == null) {
                n.putNull("offset");
                n.putNull("metadata");
            } else {
                n.put("offset", om.offset());
                n.put("metadata", om.metadata());
            }
        }
        ObjectNode data = empty();
        data.set("offsets", out);
        return data;
    }

    private JsonNode position(JsonNode a, Deadline d) {
        KafkaConsumer<byte[], byte[]> c = consumer();
        List<TopicPartition> parts = new ArrayList<>();
        if (a.hasNonNull("partitions") && a.get("partitions").size() > 0) {
            for (JsonNode p : a.get("partitions")) parts.add(tp(p));
        } else {
            parts.addAll(c.assignment());
            parts.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        }
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (TopicPartition t : parts) {
            ObjectNode n = out.addObject();
            n.put("topic", t.topic());
            n.put("partition", t.partition());
            n.put("offset", c.position(t, d.remaining()));
        }
        ObjectNode data = empty();
        data.set("positions", out);
        return data;
    }

    // -- admin --------------------------------------------------------------------------------------
    /** The texts of a JSON array (an op's transactional ids). */
    private static List<String> texts(JsonNode array) {
        List<String> out = new ArrayList<>();
        for (JsonNode item : array) out.add(item.asText());
        return out;
    }

    /** Admin.describeTransactions (KIP-664, kafka-clients 3.0+), reached by name (Compat). */
    private JsonNode describeTransactions(JsonNode a, Deadline d) throws Exception {
        java.lang.reflect.Method describe = Compat.method("describe_transactions", Admin.class, "describeTransactions", Collection.class);
        List<String> ids = texts(a.get("ids"));
        Object result = Compat.invoke(describe, admin(), ids);
        java.lang.reflect.Method description = result.getClass().getMethod("description", String.class);
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (String id : ids) {
            ObjectNode n = out.addObject();
            n.put("transactional_id", id);
            try {
                Object t = ((org.apache.kafka.common.KafkaFuture<?>) Compat.invoke(description, result, id))
                        .get(d.remainingMs(), TimeUnit.MILLISECONDS);
                n.put("state", Compat.get(t, "state").toString());
                n.put("producer_id", (Long) Compat.get(t, "producerId"));
                n.put("producer_epoch", (Integer) Compat.get(t, "producerEpoch"));
                n.put("timeout_ms", (Long) Compat.get(t, "transactionTimeoutMs"));
                n.put("coordinator_id", (Integer) Compat.get(t, "coordinatorId"));
                TreeMap<String, TopicPartition> sorted = new TreeMap<>();
                for (Object o : (Collection<?>) Compat.get(t, "topicPartitions")) {
                    TopicPartition tp = (TopicPartition) o;
                    sorted.put(tp.topic() + "\0" + String.format("%09d", tp.partition()), tp);
                }
                ArrayNode parts = n.putArray("partitions");
                for (TopicPartition tp : sorted.values()) {
                    ObjectNode pn = parts.addObject();
                    pn.put("topic", tp.topic());
                    pn.put("partition", tp.partition());
                }
            } catch (TimeoutException e) {
                throw new OpError("DEADLINE_EXCEEDED", "describe_transactions: no answer for " + id + " before the deadline");
            } catch (java.util.concurrent.ExecutionException e) {
                n.set("error", Outcomes.error(e, null));
            }
        }
        ObjectNode data = empty();
        data.set("transactions", out);
        return data;
    }

    /** Admin.describeProducers (KIP-664, kafka-clients 3.0+), reached by name (Compat). */
    private JsonNode describeProducers(JsonNode a, Deadline d) throws Exception {
        java.lang.reflect.Method describe = Compat.method("describe_producers", Admin.class, "describeProducers", Collection.class);
        List<TopicPartition> parts = new ArrayList<>();
        for (JsonNode p : a.get("partitions")) parts.add(new TopicPartition(p.get("topic").asText(), p.get("partition").asInt()));
        Object result = Compat.invoke(describe, admin(), parts);
        java.lang.reflect.Method partitionResult = result.getClass().getMethod("partitionResult", TopicPartition.class);
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (TopicPartition tp : parts) {
            ObjectNode n = out.addObject();
            n.put("topic", tp.topic());
            n.put("partition", tp.partition());
            try {
                Object description = ((org.apache.kafka.common.KafkaFuture<?>) Compat.invoke(partitionResult, result, tp))
                        .get(d.remainingMs(), TimeUnit.MILLISECONDS);
                List<Object> states = new ArrayList<>((Collection<?>) Compat.get(description, "activeProducers"));
                Map<Object, Long> ids = new HashMap<>();
                for (Object s : states) ids.put(s, (Long) Compat.get(s, "producerId"));
                states.sort(Comparator.comparing(ids::get));
                ArrayNode producers = n.putArray("producers");
                for (Object s : states) {
                    ObjectNode pn = producers.addObject();
                    pn.put("producer_id", ids.get(s));
                    pn.put("producer_epoch", (Integer) Compat.get(s, "producerEpoch"));
                    pn.put("last_sequence", (Integer) Compat.get(s, "lastSequence"));
                    pn.put("last_timestamp_ms", (Long) Compat.get(s, "lastTimestamp"));
                    pn.put("coordinator_epoch", ((java.util.OptionalInt) Compat.get(s, "coordinatorEpoch")).orElse(-1));
                    pn.put("current_txn_start_offset", ((java.util.OptionalLong) Compat.get(s, "currentTransactionStartOffset")).orElse(-1L));
                }
            } catch (TimeoutException e) {
                throw new OpError("DEADLINE_EXCEEDED", "describe_producers: no answer for " + tp + " before the deadline");
            } catch (java.util.concurrent.ExecutionException e) {
                n.set("error", Outcomes.error(e, null));
            }
        }
        ObjectNode data = empty();
        data.set("partitions", out);
        return data;
    }

    /**
     * Admin.fenceProducers (KIP-618, kafka-clients 3.2+), reached by name (Compat): succeeds when the
     * client reports every id fenced (its all()), with the producer id and epoch it fenced at; else
     * fails with the error the client raised.
     */
    private JsonNode fenceProducers(JsonNode a, Deadline d) throws Exception {
        java.lang.reflect.Method fence = Compat.method("fence_producers", Admin.class, "fenceProducers", Collection.class);
        List<String> ids = texts(a.get("ids"));
        Object result = Compat.invoke(fence, admin(), ids);
        java.lang.reflect.Method producerId = result.getClass().getMethod("producerId", String.class);
        java.lang.reflect.Method epoch = result.getClass().getMethod("epochId", String.class);
        try {
            ((org.apache.kafka.common.KafkaFuture<?>) Compat.get(result, "all")).get(d.remainingMs(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new OpError("DEADLINE_EXCEEDED", "fence_producers: no answer for " + ids + " before the deadline");
        }
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (String id : ids) {
            ObjectNode n = out.addObject();
            n.put("transactional_id", id);
            n.put("producer_id", (Long) ((org.apache.kafka.common.KafkaFuture<?>) Compat.invoke(producerId, result, id)).get());
            n.put("producer_epoch", ((Number) ((org.apache.kafka.common.KafkaFuture<?>) Compat.invoke(epoch, result, id)).get()).intValue());
        }
        ObjectNode data = empty();
        data.set("fenced", out);
        return data;
    }

    private JsonNode listOffsets(JsonNode a, Deadline d) throws Exception {
        String specName = a.path("spec").asText("latest");
        OffsetSpec spec;
        switch (specName) {
            case "earliest": spec = OffsetSpec.earliest(); break;
            case "latest": spec = OffsetSpec.latest(); break;
            case "timestamp": spec = OffsetSpec.forTimestamp(a.get("timestamp_ms").asLong()); break;
            default: throw new OpError("INVALID_ARGUMENT", "spec must be earliest|latest|timestamp, not " + specName);
        }
        IsolationLevel level = a.path("isolation_level").asText("read_uncommitted").equals("read_committed")
                ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED;
        Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
        for (JsonNode p : a.get("partitions")) request.put(tp(p), spec);
        ListOffsetsOptions options = new ListOffsetsOptions(level);
        options.timeoutMs((int) Math.max(1, d.remainingMs()));
        ListOffsetsResult result = admin().listOffsets(request, options);
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (TopicPartition t : request.keySet()) {
            ObjectNode n = out.addObject();
            n.put("topic", t.topic());
            n.put("partition", t.partition());
            try {
                ListOffsetsResult.ListOffsetsResultInfo info = result.partitionResult(t).get(d.remainingMs(), TimeUnit.MILLISECONDS);
                n.put("offset", info.offset());
                if (info.timestamp() >= 0) n.put("timestamp_ms", info.timestamp()); else n.putNull("timestamp_ms");
            } catch (TimeoutException e) {
                throw new OpError("DEADLINE_EXCEEDED", "list_offsets: no answer for " + t + " before the deadline");
            } catch (java.util.concurrent.ExecutionException e) {
                n.set("error", Outcomes.error(e, null));
            }
        }
        ObjectNode data = empty();
        data.set("offsets", out);
        return data;
    }

    private JsonNode createTopics(JsonNode a, Deadline d) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (JsonNode t : a.get("topics")) {
            NewTopic nt = new NewTopic(t.get("name").asText(), t.path("partitions").asInt(1),
                    (short) t.path("replication_factor").asInt(1));
            nt.configs(strings(t.path("config")));
            topics.add(nt);
        }
        CreateTopicsOptions options = new CreateTopicsOptions();
        options.timeoutMs((int) Math.max(1, d.remainingMs()));
        Map<String, org.apache.kafka.common.KafkaFuture<Void>> futures = admin().createTopics(topics, options).values();
        ArrayNode out = Outcomes.JSON.createArrayNode();
        for (NewTopic t : topics) {
            ObjectNode n = out.addObject();
            n.put("name", t.name());
            try {
                futures.get(t.name()).get(d.remainingMs(), TimeUnit.MILLISECONDS);
                n.putNull("error");
            } catch (TimeoutException e) {
                throw new OpError("DEADLINE_EXCEEDED", "create_topics: no answer for " + t.name() + " before the deadline");
            } catch (java.util.concurrent.ExecutionException e) {
                n.set("error", Outcomes.error(e, null));
            }
        }
        ObjectNode data = empty();
        data.set("topics", out);
        return data;
    }
}
