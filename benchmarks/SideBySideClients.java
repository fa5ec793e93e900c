// The Java client's rows of benchmarks/kafka_side_by_side.py: N producers (or consumers) of one
// client id in one JVM, each its own instance and so its own connection, as greedy as they are
// let; wire bytes from the clients' own metrics over the measure. Compiled by the benchmark with
// javac against the `kafka` jar set (tools/jars.py, kafka-clients 4.3.1).
//
//   java SideBySideClients produce|consume BOOTSTRAP TOPIC CLIENT_ID N WARM_UP_S MEASURE_S [FETCH_BYTES]
//
// produce: the producer's defaults (batch.size 16384, linger.ms as the client line sets it,
// acks=all, idempotent), 1 KiB records to partition 0, buffer.memory 4 MiB (what waits for the
// quota anyway; 20 x the default 32 MiB would not fit the heap). consume: partition 0 assigned
// from the beginning, no group, max.partition.fetch.bytes FETCH_BYTES if given. Prints one JSON object: bytes (producer-metrics
// outgoing-byte-total or consumer-metrics incoming-byte-total, summed over instances, end of the
// measure minus start), seconds, requests (request-total, likewise), throttleMs (the client's
// produce- or fetch-throttle-time-avg at the end times the throttled API's responses in the
// measure: an estimate), ackedBytes (producers: records acknowledged in the measure times the wire
// bytes per record sent, which leaves out what a relay has read but not let through yet),
// recordBytes (consumers: bytes-consumed-total, which leaves out the empty answers of throttled
// fetches), and the batching defaults in force.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class SideBySideClients {
    public static void main(String[] args) throws Exception {
        if (args.length < 7 || args.length > 8 || !(args[0].equals("produce") || args[0].equals("consume"))) {
            System.err.println("usage: SideBySideClients produce|consume BOOTSTRAP TOPIC CLIENT_ID N WARM_UP_S MEASURE_S [FETCH_BYTES]");
            System.exit(2);
        }
        boolean produce = args[0].equals("produce");
        String bootstrap = args[1];
        String topic = args[2];
        String clientId = args[3];
        int n = Integer.parseInt(args[4]);
        long warmUpMs = (long) (Double.parseDouble(args[5]) * 1000);
        long measureMs = (long) (Double.parseDouble(args[6]) * 1000);

        Properties config = new Properties();
        config.put("bootstrap.servers", bootstrap);
        config.put("client.id", clientId);
        if (!produce && args.length == 8) {
            config.put("max.partition.fetch.bytes", args[7]);
        }
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong acked = new AtomicLong();
        List<Supplier<Map<MetricName, ? extends Metric>>> metrics = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        String group = produce ? "producer-metrics" : "consumer-metrics";
        String bytesName = produce ? "outgoing-byte-total" : "incoming-byte-total";
        String throttleGroup = produce ? "producer-metrics" : "consumer-fetch-manager-metrics";
        String throttleName = produce ? "produce-throttle-time-avg" : "fetch-throttle-time-avg";
        for (int i = 0; i < n; i++) {
            if (produce) {
                config.put("buffer.memory", String.valueOf(4 << 20));
                config.put("max.block.ms", "1000");
                KafkaProducer<byte[], byte[]> producer =
                        new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
                metrics.add(producer::metrics);
                threads.add(new Thread(() -> produceUntil(producer, topic, stop, acked)));
            } else {
                KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                metrics.add(consumer::metrics);
                threads.add(new Thread(() -> consumeUntil(consumer, topic, stop)));
            }
        }
        long started = System.nanoTime();
        threads.forEach(Thread::start);
        sleepUntil(started + warmUpMs * 1_000_000L);
        long t0 = System.nanoTime();
        double[] start = sample(metrics, group, bytesName, throttleGroup);
        long ackedStart = acked.get();
        sleepUntil(t0 + measureMs * 1_000_000L);
        long t1 = System.nanoTime();
        double[] end = sample(metrics, group, bytesName, throttleGroup);
        long ackedEnd = acked.get();
        double throttleAvg = 0;
        for (Supplier<Map<MetricName, ? extends Metric>> each : metrics) {
            double value = metric(each.get(), throttleGroup, throttleName);
            throttleAvg += Double.isFinite(value) ? value / n : 0;
        }
        stop.set(true);
        for (Thread thread : threads) {
            thread.join(30_000);
        }
        Map<String, Object> defaults = ProducerConfig.configDef().defaultValues();
        // Records acknowledged in the measure times the wire bytes per record sent.
        double perRecord = end[3] > start[3] ? (end[0] - start[0]) / (end[3] - start[3]) : 0;
        System.out.println("{\"bytes\":" + (end[0] - start[0])
                + ",\"seconds\":" + (t1 - t0) / 1e9
                + ",\"ackedBytes\":" + (ackedEnd - ackedStart) * perRecord
                + ",\"recordBytes\":" + (end[4] - start[4])
                + ",\"requests\":" + (end[1] - start[1])
                + ",\"throttleMs\":" + throttleAvg * (end[2] - start[2])
                + ",\"lingerMs\":" + defaults.get("linger.ms")
                + ",\"batchSize\":" + defaults.get("batch.size") + "}");
    }

    private static void produceUntil(KafkaProducer<byte[], byte[]> producer, String topic, AtomicBoolean stop,
            AtomicLong acked) {
        byte[] value = new byte[1024];
        Arrays.fill(value, (byte) 'q');
        while (!stop.get()) {
            try {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (metadata, error) -> {
                    if (error == null) {
                        acked.incrementAndGet();
                    }
                });
            } catch (Exception e) {
                // buffer full for max.block.ms: the quota holds it, go on
            }
        }
        producer.close(Duration.ZERO);
    }

    private static void consumeUntil(KafkaConsumer<byte[], byte[]> consumer, String topic, AtomicBoolean stop) {
        TopicPartition partition = new TopicPartition(topic, 0);
        consumer.assign(List.of(partition));
        consumer.seekToBeginning(List.of(partition));
        while (!stop.get()) {
            consumer.poll(Duration.ofMillis(200));
        }
        consumer.close(Duration.ZERO);
    }

    /**
     * Per instance summed: bytes, requests, responses of the throttled API, records sent, record
     * bytes consumed (without the empty answers of throttled fetches).
     */
    private static double[] sample(List<Supplier<Map<MetricName, ? extends Metric>>> metrics,
            String group, String bytesName, String throttleGroup) {
        double[] sums = new double[5];
        for (Supplier<Map<MetricName, ? extends Metric>> each : metrics) {
            Map<MetricName, ? extends Metric> all = each.get();
            sums[0] += metric(all, group, bytesName);
            sums[1] += metric(all, group, "request-total");
            // produce: record batches' requests are not counted apart; fetch: fetch-total
            double throttled = throttleGroup.equals("producer-metrics")
                    ? metric(all, "producer-metrics", "request-total")
                    : metric(all, "consumer-fetch-manager-metrics", "fetch-total");
            sums[2] += Double.isFinite(throttled) ? throttled : 0;
            double records = metric(all, "producer-metrics", "record-send-total");
            sums[3] += Double.isFinite(records) ? records : 0;
            double consumed = metric(all, "consumer-fetch-manager-metrics", "bytes-consumed-total");
            sums[4] += Double.isFinite(consumed) ? consumed : 0;
        }
        return sums;
    }

    private static void sleepUntil(long nanos) throws InterruptedException {
        long left;
        while ((left = nanos - System.nanoTime()) > 0) {
            Thread.sleep(Math.max(1, left / 1_000_000L), 0);
        }
    }

    private static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName key = entry.getKey();
            if (key.group().equals(group) && key.name().equals(name) && !key.tags().containsKey("node-id")
                    && !key.tags().containsKey("topic")) {
                Object value = entry.getValue().metricValue();
                return value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
            }
        }
        return Double.NaN;
    }
}
