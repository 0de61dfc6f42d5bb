package kconform.flink;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * One Flink job in Flink's own MiniCluster: KafkaSource (read_committed, bounded by the input's end
 * when the job starts) -> a map that can fail once -> KafkaSink with DeliveryGuarantee.EXACTLY_ONCE
 * (Flink's two-phase commit over Kafka transactions: pre-commit at each checkpoint, commit when the
 * checkpoint completes). Checkpoints every second are retained on cancellation, so that a job killed
 * with its JVM can be started again from the last one (the harness finds it, the restore path
 * argument names it).
 *
 * Arguments: bootstrap input-topic output-topic group transactional-id-prefix checkpoint-dir
 * fail-after-records (0: never) fail-marker-file per-record-delay-ms [restore-path].
 *
 * The failure: the map throws once, after fail-after-records records, if the marker file does not
 * exist yet (it creates it first) -- a task failure that Flink's restart strategy recovers from the
 * last checkpoint within the same job; a restarted job finds the marker and does not fail again.
 * Every line the harness reads on stdout is one JSON object.
 */
public final class ExactlyOnceCopy {

    private ExactlyOnceCopy() {
    }

    /** Fails the task once (see the class comment), and paces the copy so that faults land mid-job. */
    static final class FailOnce extends RichMapFunction<String, String> {
        private final long failAfter;
        private final String marker;
        private final long delayMs;
        private long seen;

        FailOnce(long failAfter, String marker, long delayMs) {
            this.failAfter = failAfter;
            this.marker = marker;
            this.delayMs = delayMs;
        }

        @Override
        public String map(String value) throws Exception {
            seen++;
            if (delayMs > 0) {
                Thread.sleep(delayMs);
            }
            if (failAfter > 0 && seen >= failAfter) {
                Path path = Path.of(marker);
                if (!Files.exists(path)) {
                    Files.writeString(path, "failed at " + seen + "\n");
                    System.out.println("{\"event\":\"task_failure\",\"after\":" + seen + "}");
                    System.out.flush();
                    throw new IllegalStateException("kconform: the task fails once, after " + seen + " records");
                }
            }
            return value;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 9) {
            System.err.println("usage: ExactlyOnceCopy bootstrap input output group txn-prefix checkpoint-dir "
                    + "fail-after fail-marker delay-ms [restore-path]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String prefix = args[4];
        String checkpoints = args[5];
        long failAfter = Long.parseLong(args[6]);
        String marker = args[7];
        long delayMs = Long.parseLong(args[8]);
        String restore = args.length > 9 ? args[9] : null;

        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.interval", "1 s");
        conf.put("execution.checkpointing.dir", Path.of(checkpoints).toUri().toString());
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("execution.checkpointing.num-retained", "3");
        conf.put("restart-strategy.type", "fixed-delay");
        conf.put("restart-strategy.fixed-delay.attempts", "3");
        conf.put("restart-strategy.fixed-delay.delay", "1 s");
        conf.put("rest.bind-address", "127.0.0.1");
        conf.put("rest.address", "127.0.0.1");
        conf.put("taskmanager.host", "127.0.0.1");
        conf.put("jobmanager.rpc.address", "127.0.0.1");
        if (restore != null) {
            conf.put("execution.state-recovery.path", restore);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(conf));
        env.setParallelism(1);

        KafkaSource<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(input)
                .setGroupId(group)
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setValueOnlyDeserializer(new SimpleStringSchema())
                .setProperty("isolation.level", "read_committed")
                .build();
        KafkaSink<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(output)
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .setTransactionalIdPrefix(prefix)
                // below the brokers' transaction.max.timeout.ms (15 min); Flink's default is 1 h
                .setProperty("transaction.timeout.ms", "60000")
                .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "input")
                .map(new FailOnce(failAfter, marker, delayMs)).name("fail-once")
                .sinkTo(sink).name("output");
        System.out.println("{\"event\":\"job_started\",\"restore\":" + (restore == null ? "null" : "\"" + restore + "\"") + "}");
        System.out.flush();
        env.execute("kconform-exactly-once-copy");
        System.out.println("{\"event\":\"job_finished\"}");
        System.out.flush();
    }
}
