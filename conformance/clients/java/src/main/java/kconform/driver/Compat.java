package kconform.driver;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.io.InputStream;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * What lets one driver source build against every kafka-clients release kconform drives
 * ({@code java} and {@code java@VERSION}, conformance/clients/java_build.py): the few APIs younger
 * than the oldest release are reached by name, never linked, so the driver compiles against any
 * release and an op whose API the release lacks answers {@code UNSUPPORTED_BY_CLIENT} naming the
 * release -- instead of the build failing for every op, or a fork of the driver per release.
 *
 * <p>Reached by name: Admin.describeTransactions and Admin.describeProducers (KIP-664, 3.0),
 * Admin.fenceProducers (KIP-618, 3.2), and the
 * exception families TransactionAbortableException, ApplicationRecoverableException and
 * RefreshRetriableException (3.x/4.x, absent from 2.8), which only classify errors: a release
 * without the class throws no exception of that family, so the test is simply false there.
 */
final class Compat {
    private Compat() {}

    private static volatile String version;

    /** The kafka-clients release on the classpath, from the kafka-version.properties every release carries. */
    static String clientsVersion() {
        if (version == null) {
            Properties p = new Properties();
            try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
                if (in != null) p.load(in);
            } catch (java.io.IOException e) {
                // unknown below
            }
            version = p.getProperty("version", "unknown");
        }
        return version;
    }

    /** Whether t is an instance of the class named {@code className}, walking the superclasses by name. */
    static boolean isA(Throwable t, String className) {
        for (Class<?> c = t == null ? null : t.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getName().equals(className)) return true;
        }
        return false;
    }

    /** The public method {@code name(types)} of {@code owner}, or an UNSUPPORTED_BY_CLIENT error for op. */
    static Method method(String op, Class<?> owner, String name, Class<?>... types) {
        try {
            return owner.getMethod(name, types);
        } catch (NoSuchMethodException e) {
            throw new Driver.OpError("UNSUPPORTED_BY_CLIENT", op + ": unsupported by kafka-clients " + clientsVersion()
                    + " (it has no " + owner.getSimpleName() + "." + name + ")");
        }
    }

    /** Calls a method found by {@link #method}, rethrowing what the method threw. */
    static Object invoke(Method m, Object target, Object... args) throws Exception {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) throw (Exception) cause;
            throw e;
        }
    }

    /** The no-argument public getter {@code name} of o (a result object of a by-name API). */
    static Object get(Object o, String name) throws Exception {
        return invoke(o.getClass().getMethod(name), o);
    }
}
