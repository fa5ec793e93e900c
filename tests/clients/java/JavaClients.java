// The Java client (producer, consumer in a group, admin) through the gateway, for the client
// matrix (tests/clients/test_java_clients.py). One JVM run does the whole round, because a JVM
// start costs seconds of CPU on the test machine. Compiled against each kafka-clients line the
// suite pins (java/*/pom.xml), so it uses only APIs both lines have.
//
//   java JavaClients matrix BOOTSTRAP TOPIC PARTITIONS REPLICATION MESSAGES GROUP
//                           THROTTLED_CLIENT_ID THROTTLED_BYTES RECORD_BYTES
//
// Prints "throttled-start-N" and "throttled-end-N" on their own lines around each throttled run
// (N requests in flight per connection; the test watches the gateway's sockets meanwhile), then
// one JSON object with what came back.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public final class JavaClients {
    private static final Duration DEADLINE = Duration.ofSeconds(60);

    public static void main(String[] args) throws Exception {
        if (args.length == 10 && args[0].equals("matrix")) {
            matrix(args[1], args[2], Integer.parseInt(args[3]), Short.parseShort(args[4]),
                    Integer.parseInt(args[5]), args[6], args[7], Integer.parseInt(args[8]),
                    Integer.parseInt(args[9]));
        } else {
            System.err.println("usage: JavaClients matrix BOOTSTRAP TOPIC PARTITIONS REPLICATION "
                    + "MESSAGES GROUP THROTTLED_CLIENT_ID THROTTLED_BYTES RECORD_BYTES");
            System.exit(2);
        }
    }

    private static void matrix(String bootstrap, String topic, int partitions, short replication,
            int messages, String group, String throttledId, int throttledBytes, int recordBytes)
            throws Exception {
        Json out = new Json();
        out.put("version", AppInfoParser.getVersion());
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, replication))).all().get();
            List<String> nodes = new ArrayList<>();
            for (Node node : admin.describeCluster().nodes().get()) {
                nodes.add(node.host() + ":" + node.port());
            }
            out.put("nodes", nodes);

            out.put("produceErrors", produce(common, topic, messages));
            out.put("produced", messages);
            List<String> received = consume(common, topic, group, messages);
            out.put("consumed", received.size());
            out.put("distinct", new HashSet<>(received).size());
            Set<String> expected = new HashSet<>();
            for (int i = 0; i < messages; i++) {
                expected.add("message-" + i);
            }
            out.put("exactlyOnce", received.size() == messages && expected.equals(new HashSet<>(received)));

            // Once as the client comes (five requests in flight per connection), once with one:
            // how much of the pipeline waits in the gateway's muted socket.
            throttled(common, topic, throttledId, throttledBytes, recordBytes, 5, out);
            throttled(common, topic, throttledId + "-inflight-1", throttledBytes, recordBytes, 1, out);

            admin.deleteTopics(List.of(topic)).all().get();
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (admin.listTopics().names().get().contains(topic)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("topic " + topic + " still listed");
                }
                Thread.sleep(100);
            }
            out.put("deleted", true);
        }
        System.out.println(out);
    }

    /** Every value "message-I" (acks=all); how many sends failed. */
    private static int produce(Properties common, String topic, int messages) throws Exception {
        Properties config = (Properties) common.clone();
        config.put("acks", "all");
        config.put("linger.ms", "5");
        int errors = 0;
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(config, new StringSerializer(), new StringSerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < messages; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, "message-" + i)));
            }
            for (Future<RecordMetadata> future : sent) {
                try {
                    future.get();
                } catch (Exception e) {
                    errors++;
                }
            }
        }
        return errors;
    }

    /** Reads the topic in a consumer group until `messages` came back (or the deadline). */
    private static List<String> consume(Properties common, String topic, String group, int messages) {
        Properties config = (Properties) common.clone();
        config.put("group.id", group);
        config.put("auto.offset.reset", "earliest");
        config.put("session.timeout.ms", "6000");
        config.put("heartbeat.interval.ms", "1000");
        List<String> received = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            while (received.size() < messages && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    received.add(record.value());
                }
            }
            consumer.commitSync();
        }
        return received;
    }

    /** A greedy producer under its client id's quota: how long its bytes took, and what its own
     * metrics say of the throttle_time_ms the gateway sent it. */
    private static void throttled(Properties common, String topic, String clientId, int bytes,
            int recordBytes, int inFlight, Json out) throws Exception {
        Properties config = (Properties) common.clone();
        config.put("client.id", clientId);
        config.put("max.in.flight.requests.per.connection", String.valueOf(inFlight));
        config.put("acks", "1");
        config.put("batch.size", "20000");
        config.put("linger.ms", "0");
        byte[] value = new byte[recordBytes];
        Arrays.fill(value, (byte) 'v');
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
            // Metadata first, so the measure is of the produce requests alone.
            producer.partitionsFor(topic);
            System.out.println("throttled-start-" + inFlight);
            System.out.flush();
            long started = System.nanoTime();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            // Partition 0 only: one leader, one connection. Led by three brokers, each
            // connection's last throttle would go unwaited when the measure stops.
            for (int i = 0; i < bytes / recordBytes; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, value)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                future.get();
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.println("throttled-end-" + inFlight);
            System.out.flush();
            String prefix = "inFlight" + inFlight + ".";
            out.put(prefix + "bytes", (bytes / recordBytes) * recordBytes);
            out.put(prefix + "seconds", seconds);
            out.put(prefix + "throttleAvgMs", metric(producer.metrics(), "producer-metrics", "produce-throttle-time-avg"));
            out.put(prefix + "throttleMaxMs", metric(producer.metrics(), "producer-metrics", "produce-throttle-time-max"));
            out.put(prefix + "requests", metric(producer.metrics(), "producer-metrics", "request-total"));
        }
    }

    private static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName key = entry.getKey();
            if (key.group().equals(group) && key.name().equals(name)) {
                Object value = entry.getValue().metricValue();
                return value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
            }
        }
        return Double.NaN;
    }

    /** A flat JSON object, enough for what the driver reports (no JSON library on the 3.9
     * class path). */
    static final class Json {
        private final StringBuilder text = new StringBuilder();

        void put(String key, Object value) {
            text.append(text.length() == 0 ? "{" : ",").append(quote(key)).append(':').append(encode(value));
        }

        private static String encode(Object value) {
            if (value instanceof Collection) {
                List<String> items = new ArrayList<>();
                for (Object item : (Collection<?>) value) {
                    items.add(encode(item));
                }
                return "[" + String.join(",", items) + "]";
            }
            if (value instanceof Double && !Double.isFinite((Double) value)) {
                return "null";
            }
            if (value instanceof Number || value instanceof Boolean) {
                return value.toString();
            }
            return quote(String.valueOf(value));
        }

        private static String quote(String s) {
            return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }

        @Override
        public String toString() {
            return (text.length() == 0 ? "{" : text.toString()) + "}";
        }
    }
}
