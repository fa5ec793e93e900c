// Kafka's own quota classes driven by JSON lines: the judge of quotagate's quota engine.
//
// One request a line on stdin, one answer a line on stdout, in one long-lived JVM:
//   {"kind": K, "setup": {...}, "ops": [[name, args...], ...]}
//   -> {"results": [one value per op]}  or  {"error": "...", "at": op index}
// Every sequence runs on fresh objects over Kafka's MockTime, which moves only on "advance".
// Doubles travel as their IEEE-754 bits (Double.doubleToLongBits: one NaN) so that the comparison
// on the Python side is exact, NaN and infinities included.
//
// Kinds: "client" (ClientQuotaManager, setup.type produce|fetch), "request"
// (ClientRequestQuotaManager), "controller" (ControllerMutationQuotaManager), "metrics" (a
// Sensor of Metrics with stats of org.apache.kafka.common.metrics.stats) and "backoff"
// (ExponentialBackoff). tests/kafka/differential/ drives the same operations through quotagate.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.DelayQueue;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MeasurableStat;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.metrics.QuotaViolationException;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Avg;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.common.metrics.stats.Max;
import org.apache.kafka.common.metrics.stats.Min;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.metrics.stats.SimpleRate;
import org.apache.kafka.common.metrics.stats.TokenBucket;
import org.apache.kafka.common.metrics.stats.WindowedCount;
import org.apache.kafka.common.metrics.stats.WindowedSum;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.ExponentialBackoff;
import org.apache.kafka.common.utils.MockTime;
import org.apache.kafka.common.utils.Sanitizer;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;
import org.apache.kafka.server.quota.ClientQuotaCallback;
import org.apache.kafka.server.quota.ClientQuotaEntity;
import org.apache.kafka.server.quota.ClientQuotaManager;
import org.apache.kafka.server.quota.ClientQuotaType;
import org.apache.kafka.server.quota.ControllerMutationQuota;
import org.apache.kafka.server.quota.ControllerMutationQuotaManager;
import org.apache.kafka.server.quota.QuotaType;
import org.apache.kafka.server.quota.ThrottleCallback;
import org.apache.kafka.server.quota.ThrottledChannel;

import kafka.server.ClientRequestQuotaManager;

public final class Harness {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;
    private static final String DEFAULT = "<default>";
    private static final InetAddress ADDRESS = InetAddress.getLoopbackAddress();

    public static void main(String[] args) throws Exception {
        // Protocol on the real stdout; anything Kafka's logging prints goes to stderr.
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        ObjectMapper mapper = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            ObjectNode answer = JSON.objectNode();
            Run run = null;
            int at = -1;
            try {
                JsonNode request = mapper.readTree(line);
                run = new Run(request.path("kind").asText(), request.path("setup"));
                ArrayNode results = answer.putArray("results");
                for (JsonNode op : request.path("ops")) {
                    at++;
                    results.add(run.apply(op));
                }
            } catch (Throwable e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                answer.removeAll();
                answer.put("error", trace.toString());
                answer.put("at", at);
            } finally {
                if (run != null) run.close();
            }
            out.println(mapper.writeValueAsString(answer));
            out.flush();
        }
    }

    static JsonNode bits(double value) {
        return JSON.numberNode(Double.doubleToLongBits(value));
    }

    /** One sequence: fresh MockTime, Metrics and the object under test. */
    static final class Run {
        final String kind;
        final MockTime time;
        final Metrics metrics;
        ClientQuotaManager manager;
        ClientQuotaCallback callback;
        DelayQueue<ThrottledChannel> delayQueue;
        String group;
        List<String> metricNames = List.of();
        Sensor sensor;
        List<KafkaMetric> sensorMetrics = new ArrayList<>();
        ExponentialBackoff backoff;
        final Map<String, Session> sessions = new HashMap<>();
        final Map<Integer, ControllerMutationQuota> quotas = new HashMap<>();
        final List<Integer> released = new ArrayList<>();

        Run(String kind, JsonNode setup) throws Exception {
            this.kind = kind;
            time = new MockTime(0, setup.path("start_ms").asLong(1_700_000_000_000L), 0);
            // The broker's metrics defaults (metrics.num.samples 2, metrics.sample.window.ms
            // 30000) and no expiry thread: sensors expire only on the "expire" op.
            metrics = new Metrics(new MetricConfig(), new ArrayList<>(), time, false);
            int samples = setup.path("samples").asInt(11);
            int windowS = setup.path("window_s").asInt(1);
            ClientQuotaManagerConfig config = new ClientQuotaManagerConfig(samples, windowS);
            switch (kind) {
                case "client": {
                    QuotaType type = setup.path("type").asText().equals("fetch") ? QuotaType.FETCH : QuotaType.PRODUCE;
                    manager = new ClientQuotaManager(config, metrics, type, time, "");
                    group = type.toString();
                    metricNames = List.of("byte-rate", "throttle-time");
                    break;
                }
                case "request":
                    manager = new ClientRequestQuotaManager(config, metrics, time, "", Optional.empty());
                    group = QuotaType.REQUEST.toString();
                    metricNames = List.of("request-time", "throttle-time");
                    break;
                case "controller":
                    manager = new ControllerMutationQuotaManager(config, metrics, time, "", Optional.empty());
                    group = QuotaType.CONTROLLER_MUTATION.toString();
                    metricNames = List.of("tokens", "mutation-rate", "throttle-time");
                    break;
                case "metrics":
                    sensor = metrics.sensor("s");
                    int index = 0;
                    for (JsonNode stat : setup.path("stats")) {
                        KafkaMetric metric = addStat(sensor, stat, index++);
                        sensorMetrics.add(metric);
                    }
                    break;
                case "backoff":
                    backoff = new ExponentialBackoff(setup.path("initial_ms").asLong(),
                        setup.path("multiplier").asInt(), setup.path("max_ms").asLong(),
                        setup.path("jitter").asDouble());
                    break;
                default:
                    throw new IllegalArgumentException("unknown kind " + kind);
            }
            if (manager != null) {
                stopReaper(manager);
                callback = (ClientQuotaCallback) field(manager, "quotaCallback");
                @SuppressWarnings("unchecked")
                DelayQueue<ThrottledChannel> queue = (DelayQueue<ThrottledChannel>) field(manager, "delayQueue");
                delayQueue = queue;
            }
        }

        /** The manager's reaper thread polls its delay queue on the wall clock; this harness
         * runs the reaper's step itself (op "reap"), so the thread is stopped before any
         * channel is queued. It is made non-interruptible, hence the interrupt. */
        static void stopReaper(ClientQuotaManager manager) throws Exception {
            Thread reaper = (Thread) field(manager, "throttledChannelReaper");
            reaper.getClass().getMethod("initiateShutdown").invoke(reaper);
            reaper.interrupt();
            reaper.join();
        }

        static Object field(Object target, String name) throws Exception {
            Class<?> type = target.getClass();
            while (type != null) {
                try {
                    Field field = type.getDeclaredField(name);
                    field.setAccessible(true);
                    return field.get(target);
                } catch (NoSuchFieldException e) {
                    type = type.getSuperclass();
                }
            }
            throw new NoSuchFieldException(name);
        }

        KafkaMetric addStat(Sensor sensor, JsonNode stat, int index) {
            String name = stat.path("stat").asText();
            MeasurableStat measurable;
            switch (name) {
                case "rate": measurable = new Rate(); break;
                case "simple_rate": measurable = new SimpleRate(); break;
                case "token_bucket": measurable = new TokenBucket(); break;
                case "avg": measurable = new Avg(); break;
                case "max": measurable = new Max(); break;
                case "min": measurable = new Min(); break;
                case "windowed_sum": measurable = new WindowedSum(); break;
                case "windowed_count": measurable = new WindowedCount(); break;
                case "cumulative_sum": measurable = new CumulativeSum(); break;
                default: throw new IllegalArgumentException("unknown stat " + name);
            }
            MetricName metricName = metrics.metricName("m" + index, "g");
            sensor.add(metricName, measurable, metricConfig(stat));
            return metrics.metric(metricName);
        }

        static MetricConfig metricConfig(JsonNode stat) {
            MetricConfig config = new MetricConfig()
                .samples(stat.path("samples").asInt(2))
                .timeWindow(stat.path("window_ms").asLong(30000), java.util.concurrent.TimeUnit.MILLISECONDS);
            if (!stat.path("quota").isNull() && !stat.path("quota").isMissingNode())
                config.quota(new Quota(stat.path("quota").asDouble(), stat.path("upper").asBoolean(true)));
            return config;
        }

        Session session(String user) {
            return sessions.computeIfAbsent(user, u -> new Session(new KafkaPrincipal(KafkaPrincipal.USER_TYPE, u), ADDRESS));
        }

        static Optional<ClientQuotaEntity.ConfigEntity> userEntity(JsonNode user) {
            if (user.isNull()) return Optional.empty();
            if (user.asText().equals(DEFAULT)) return Optional.of(ClientQuotaManager.DEFAULT_USER_ENTITY);
            // As the broker's ClientQuotaMetadataManager: the user entity is sanitized.
            return Optional.of(new ClientQuotaManager.UserEntity(Sanitizer.sanitize(user.asText())));
        }

        static Optional<ClientQuotaEntity.ConfigEntity> clientEntity(JsonNode client) {
            if (client.isNull()) return Optional.empty();
            if (client.asText().equals(DEFAULT)) return Optional.of(ClientQuotaManager.DEFAULT_USER_CLIENT_ID);
            return Optional.of(new ClientQuotaManager.ClientIdEntity(client.asText()));
        }

        JsonNode apply(JsonNode op) throws Exception {
            String name = op.get(0).asText();
            switch (name) {
                case "advance":
                    time.sleep(op.get(1).asLong());
                    return JSON.nullNode();
                // -- the quota managers ----------------------------------------------------
                case "update": {
                    JsonNode value = op.get(3);
                    Optional<Quota> quota = value.isNull() ? Optional.empty() : Optional.of(Quota.upperBound(value.asDouble()));
                    manager.updateQuota(userEntity(op.get(1)), clientEntity(op.get(2)), quota);
                    return JSON.nullNode();
                }
                case "record":
                    return JSON.numberNode(manager.maybeRecordAndGetThrottleTimeMs(
                        session(op.get(1).asText()), op.get(2).asText(), op.get(3).asDouble(), time.milliseconds()));
                case "record_no_throttle":
                    manager.recordNoThrottle(session(op.get(1).asText()), op.get(2).asText(), op.get(3).asDouble());
                    return JSON.nullNode();
                case "unrecord":
                    manager.unrecordQuotaSensor(session(op.get(1).asText()), op.get(2).asText(), op.get(3).asDouble(), time.milliseconds());
                    return JSON.nullNode();
                case "enabled":
                    return JSON.booleanNode(manager.quotasEnabled());
                case "quota":
                    return bits(manager.quota(op.get(1).asText(), op.get(2).asText()).bound());
                case "max_value":
                    return bits(manager.maxValueInQuotaWindow(session(op.get(1).asText()), op.get(2).asText()));
                case "throttle": {
                    int channel = op.get(4).asInt();
                    ThrottleCallback callback = new ThrottleCallback() {
                        @Override public void startThrottling() { }
                        @Override public void endThrottling() { released.add(channel); }
                    };
                    manager.throttle(op.get(2).asText(), session(op.get(1).asText()), callback, op.get(3).asInt());
                    return JSON.nullNode();
                }
                case "reap": {
                    // The reaper thread's step, run while a channel is due (it never blocks then).
                    released.clear();
                    while (delayQueue.peek() != null && delayQueue.peek().getDelay(java.util.concurrent.TimeUnit.MILLISECONDS) <= 0)
                        manager.processThrottledChannelReaperDoWork();
                    // Channels due together leave in the order of the queue's heap: sorted here.
                    Collections.sort(released);
                    ArrayNode ids = JSON.arrayNode();
                    released.forEach(ids::add);
                    return ids;
                }
                case "queue_size":
                    return bits((double) metrics.metric(metrics.metricName("queue-size", group)).metricValue());
                case "measure":
                    return measure(op.get(1).asText(), op.get(2).asText());
                case "expire":
                    return expire();
                // -- ClientRequestQuotaManager ---------------------------------------------
                case "record_nanos":
                    return JSON.numberNode(manager.maybeRecordAndGetThrottleTimeMs(
                        session(op.get(1).asText()), op.get(2).asText(), percentage(op.get(3).asLong()), time.milliseconds()));
                case "record_network":
                    // The request's network-thread callback: recordNoThrottle of the percentage.
                    manager.recordNoThrottle(session(op.get(1).asText()), op.get(2).asText(), percentage(op.get(3).asLong()));
                    return JSON.nullNode();
                case "exempt":
                    // maybeRecordExempt: only while quotas are enabled.
                    if (manager.quotasEnabled())
                        ((ClientRequestQuotaManager) manager).exemptSensor().record(percentage(op.get(1).asLong()));
                    return JSON.nullNode();
                case "measure_exempt": {
                    KafkaMetric metric = metrics.metric(metrics.metricName("exempt-request-time", group));
                    return metric == null ? JSON.nullNode() : bits((double) metric.metricValue());
                }
                // -- ControllerMutationQuotaManager ----------------------------------------
                case "new_quota": {
                    ControllerMutationQuotaManager controller = (ControllerMutationQuotaManager) manager;
                    Session session = session(op.get(3).asText());
                    String clientId = op.get(4).asText();
                    quotas.put(op.get(1).asInt(), op.get(2).asText().equals("strict")
                        ? controller.newStrictQuotaFor(session, clientId)
                        : controller.newPermissiveQuotaFor(session, clientId));
                    return JSON.nullNode();
                }
                case "qrecord":
                    try {
                        quotas.get(op.get(1).asInt()).record(op.get(2).asDouble());
                        return JSON.nullNode();
                    } catch (ThrottlingQuotaExceededException e) {
                        ArrayNode error = JSON.arrayNode();
                        error.add(Errors.forException(e).code());
                        error.add(e.throttleTimeMs());
                        return error;
                    }
                case "qthrottle":
                    return JSON.numberNode(quotas.get(op.get(1).asInt()).throttleTime());
                case "qexceeded":
                    return JSON.booleanNode(quotas.get(op.get(1).asInt()).isExceeded());
                case "record_mutation":
                    return JSON.numberNode(manager.recordAndGetThrottleTimeMs(
                        session(op.get(1).asText()), op.get(2).asText(), op.get(3).asDouble(), time.milliseconds()));
                // -- a Sensor of the metrics library ---------------------------------------
                case "srecord":
                    try {
                        sensor.record(op.get(1).asDouble(), time.milliseconds(), op.get(2).asBoolean());
                        return JSON.nullNode();
                    } catch (QuotaViolationException e) {
                        return violation(e);
                    }
                case "scheck":
                    try {
                        sensor.checkQuotas(time.milliseconds());
                        return JSON.nullNode();
                    } catch (QuotaViolationException e) {
                        return violation(e);
                    }
                case "smeasure":
                    return bits((double) sensorMetrics.get(op.get(1).asInt()).metricValue());
                case "sconfig":
                    sensorMetrics.get(op.get(1).asInt()).config(metricConfig(op.get(2)));
                    return JSON.nullNode();
                case "sexpired":
                    return JSON.booleanNode(sensor.hasExpired());
                // -- ExponentialBackoff --------------------------------------------------
                case "backoff":
                    return JSON.numberNode(backoff.backoff(op.get(1).asLong()));
                default:
                    throw new IllegalArgumentException("unknown op " + name);
            }
        }

        double percentage(long nanos) throws Exception {
            Field field = ClientRequestQuotaManager.class.getDeclaredField("NANOS_TO_PERCENTAGE_PER_SECOND");
            field.setAccessible(true);
            return nanos * field.getDouble(null);
        }

        JsonNode violation(QuotaViolationException e) {
            ArrayNode node = JSON.arrayNode();
            node.add(sensorMetrics.indexOf(e.metric()));
            node.add(bits(e.value()));
            node.add(bits(e.bound()));
            return node;
        }

        /** The sharing key the default callback gives this client, and the value of each of
         * the key's metrics (null while its sensor does not exist). Reading a metric measures
         * it, as a JMX read does: it purges samples and refills buckets. */
        JsonNode measure(String user, String clientId) {
            KafkaPrincipal principal = new KafkaPrincipal(KafkaPrincipal.USER_TYPE, user);
            Map<String, String> tags = callback.quotaMetricTags(clientQuotaType(), principal, clientId);
            ArrayNode node = JSON.arrayNode();
            node.add(tags.get("user"));
            node.add(tags.get("client-id"));
            for (String name : metricNames) {
                KafkaMetric metric = metrics.metric(metrics.metricName(name, group, tags));
                node.add(metric == null ? JSON.nullNode() : bits((double) metric.metricValue()));
            }
            return node;
        }

        ClientQuotaType clientQuotaType() {
            switch (kind) {
                case "request": return ClientQuotaType.REQUEST;
                case "controller": return ClientQuotaType.CONTROLLER_MUTATION;
                default: return group.equals("Fetch") ? ClientQuotaType.FETCH : ClientQuotaType.PRODUCE;
            }
        }

        /** Metrics' ExpireSensorTask, run once now; answers the quota sensors left. */
        JsonNode expire() throws Exception {
            Class<?> task = Class.forName("org.apache.kafka.common.metrics.Metrics$ExpireSensorTask");
            Constructor<?> constructor = task.getDeclaredConstructor(Metrics.class);
            constructor.setAccessible(true);
            ((Runnable) constructor.newInstance(metrics)).run();
            TreeSet<String> names = new TreeSet<>();
            for (MetricName name : metrics.metrics().keySet()) {
                if (name.group().equals(group) && name.tags().containsKey("user"))
                    names.add(name.name() + "|" + name.tags().get("user") + "|" + name.tags().get("client-id"));
            }
            ArrayNode node = JSON.arrayNode();
            names.forEach(node::add);
            return node;
        }

        void close() {
            if (manager != null) manager.shutdown();
            metrics.close();
        }
    }
}
