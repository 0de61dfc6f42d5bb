package kconform.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TransactionAbortedException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.protocol.Errors;

/**
 * Turns what kafka-clients throws into the driver protocol's normalised outcome, and converts payloads.
 *
 * <p>Why this shape: Kafka's {@link Errors#forException} is the reference mapping from exception to
 * error name/code, so the Java client defines the vocabulary the other drivers map onto. The client's
 * own classification is read, never recomputed: exception types (RetriableException,
 * TransactionAbortableException, ProducerFencedException, and KIP-1050's ApplicationRecoverableException
 * as {@code category}) plus the producer's TransactionManager error state right after the failure
 * (abortable / fatal), which is what decides whether the client will still accept abortTransaction().
 * The TransactionManager is internal, so it is read by reflection; if that fails the state flags fall
 * back to the exception types and {@code state_read: false} says so.
 */
final class Outcomes {
    static final ObjectMapper JSON = new ObjectMapper();
    /** Exception families younger than the oldest kafka-clients driven, tested by name (Compat). */
    private static final String ERRORS = "org.apache.kafka.common.errors.";
    private static final String TRANSACTION_ABORTABLE = ERRORS + "TransactionAbortableException";

    private Outcomes() {}

    /** Unwraps the future/executor wrappers that carry no meaning of their own. */
    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** The most specific Kafka error in a cause chain: KafkaException wrapping an ApiException gives the latter. */
    static Throwable basis(Throwable top) {
        Throwable t = top;
        for (int depth = 0; t != null && depth < 8; depth++, t = t.getCause()) {
            if (t instanceof ApiException) {
                return t;
            }
        }
        return top;
    }

    static ObjectNode error(Throwable thrown, KafkaProducer<?, ?> producer) {
        Throwable top = unwrap(thrown);
        Throwable basis = basis(top);
        String name;
        Integer code = null;
        if (basis instanceof ApiException) {
            Errors e = Errors.forException(basis);
            if (e != Errors.UNKNOWN_SERVER_ERROR || basis instanceof UnknownServerException) {
                name = e.name();
                code = (int) e.code();
            } else {
                name = localName(basis);
            }
        } else {
            name = localName(top);
        }
        ObjectNode err = JSON.createObjectNode();
        err.put("name", name);
        if (code == null) {
            err.putNull("code");
        } else {
            err.put("code", code);
        }
        boolean retriable = top instanceof RetriableException || basis instanceof RetriableException;
        boolean abortable = Compat.isA(basis, TRANSACTION_ABORTABLE);
        boolean fatal = false;
        Boolean[] state = transactionState(producer);
        if (state != null) {
            abortable = abortable || state[0];
            fatal = state[1];
        }
        err.put("retriable", retriable);
        err.put("abortable", abortable);
        err.put("fatal", fatal);
        err.put("fenced", basis instanceof ProducerFencedException);
        err.put("message", String.valueOf(top.getMessage()));
        err.put("client_class", top.getClass().getSimpleName());
        if (basis != top) {
            err.put("cause_class", basis.getClass().getSimpleName());
        }
        err.put("origin", "client");
        err.put("category", category(basis));
        if (producer != null) {
            err.put("state_read", state != null);
        }
        return err;
    }

    /** Non-Kafka names shared with the other drivers (conformance/clients/errors.py LOCAL_NAMES). */
    private static String localName(Throwable t) {
        if (t instanceof TransactionAbortedException) return "TRANSACTION_ABORTED";
        if (t instanceof CommitFailedException) return "COMMIT_FAILED";
        if (t instanceof IllegalStateException) return "ILLEGAL_STATE";
        if (t instanceof IllegalArgumentException || t instanceof ConfigException) return "INVALID_ARGUMENT";
        return "CLIENT_ERROR";
    }

    /** KIP-1050's exception families, the Java client's own coarse classification. */
    private static String category(Throwable t) {
        if (Compat.isA(t, ERRORS + "ApplicationRecoverableException")) return "ApplicationRecoverable";
        if (Compat.isA(t, TRANSACTION_ABORTABLE)) return "TransactionAbortable";
        if (Compat.isA(t, ERRORS + "RefreshRetriableException")) return "RefreshRetriable";
        if (t instanceof RetriableException) return "Retriable";
        if (t instanceof InvalidConfigurationException) return "InvalidConfiguration";
        if (t instanceof KafkaException) return "KafkaException";
        return t.getClass().getSimpleName();
    }

    /** {hasAbortableError, hasFatalError} of the producer's TransactionManager, or null. */
    static Boolean[] transactionState(KafkaProducer<?, ?> producer) {
        if (producer == null) return null;
        try {
            Object tm = null;
            for (Field f : KafkaProducer.class.getDeclaredFields()) {
                if (f.getType().getSimpleName().equals("TransactionManager")) {
                    f.setAccessible(true);
                    tm = f.get(producer);
                    break;
                }
            }
            if (tm == null) return null; // not idempotent/transactional: no state to read
            Method abortable = tm.getClass().getDeclaredMethod("hasAbortableError");
            Method fatal = tm.getClass().getDeclaredMethod("hasFatalError");
            abortable.setAccessible(true);
            fatal.setAccessible(true);
            return new Boolean[] {(Boolean) abortable.invoke(tm), (Boolean) fatal.invoke(tm)};
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Waits, at most {@code maxMs}, until a transactional producer's TransactionManager is in an
     * error state (abortable or fatal); returns at once for a producer that is not transactional.
     *
     * <p>Why: kafka-clients' {@code Sender.failBatch} completes the batch's future first and only then
     * calls {@code TransactionManager.handleFailedBatch}, which moves a transactional producer to
     * its abortable or fatal error state. A thread woken by the future's failure can therefore read
     * the state before or after that transition (measured: {@code abortable} flipped between runs of
     * zombie/fence_on_send). Waiting for the transition the client is about to make gives the
     * client's settled classification; the bound only matters where the client skips the transition
     * (e.g. while already aborting), and then the state read is what the client holds.
     */
    static void awaitTransactionErrorState(KafkaProducer<?, ?> producer, long maxMs) {
        if (producer == null) return;
        Object tm;
        Method transactional;
        try {
            tm = null;
            for (Field f : KafkaProducer.class.getDeclaredFields()) {
                if (f.getType().getSimpleName().equals("TransactionManager")) {
                    f.setAccessible(true);
                    tm = f.get(producer);
                    break;
                }
            }
            if (tm == null) return;
            transactional = tm.getClass().getDeclaredMethod("isTransactional");
            transactional.setAccessible(true);
            if (!(Boolean) transactional.invoke(tm)) return;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return;
        }
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxMs);
        while (System.nanoTime() < end) {
            Boolean[] state = transactionState(producer);
            if (state == null || state[0] || state[1]) return;
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    static ObjectNode driverError(String name, String message) {
        ObjectNode err = JSON.createObjectNode();
        err.put("name", name);
        err.putNull("code");
        err.put("retriable", false);
        err.put("abortable", false);
        err.put("fatal", false);
        err.put("fenced", false);
        err.put("message", message);
        err.put("client_class", "");
        err.put("origin", "driver");
        return err;
    }

    /** Protocol payload (null, UTF-8 string, or {"base64": ...}) to bytes. */
    static byte[] bytes(JsonNode node) {
        if (node == null || node.isNull()) return null;
        if (node.isTextual()) return node.asText().getBytes(StandardCharsets.UTF_8);
        if (node.isObject() && node.has("base64")) return Base64.getDecoder().decode(node.get("base64").asText());
        throw new IllegalArgumentException("payload must be null, a string or {\"base64\": ...}: " + node);
    }

    /** Bytes to protocol payload: a string when valid UTF-8, else {"base64": ...}. */
    static JsonNode payload(byte[] raw) {
        if (raw == null) return JSON.nullNode();
        try {
            String s = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(raw)).toString();
            return JSON.getNodeFactory().textNode(s);
        } catch (CharacterCodingException e) {
            ObjectNode b = JSON.createObjectNode();
            b.put("base64", Base64.getEncoder().encodeToString(raw));
            return b;
        }
    }
}
