// A Kafka Streams word count with processing.guarantee=exactly_once_v2 through the gateway, so
// transactions (InitProducerId, AddPartitionsToTxn, TxnOffsetCommit, EndTxn) pass it
// (tests/clients/test_kafka_streams.py). Kafka 4.3.1 only: the kafka-3.9 set has no Streams.
//
//   java JavaStreams wordcount BOOTSTRAP INPUT OUTPUT PARTITIONS REPLICATION APP_ID CLIENT_ID
//                              LINES STATE_DIR
//
// Creates both topics, writes LINES lines to INPUT, runs the application until OUTPUT, read
// with isolation.level=read_committed, holds every word's exact count, then prints one JSON
// object. Caching is off, so every word of input is one record to OUTPUT and one to the store's
// changelog: enough produce traffic for a quota to bite.

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

public final class JavaStreams {
    private static final Duration DEADLINE = Duration.ofSeconds(120);
    private static final String[] WORDS = {"quota", "gate", "kafka", "stream", "window", "throttle"};

    public static void main(String[] args) throws Exception {
        if (args.length != 10 || !args[0].equals("wordcount")) {
            System.err.println("usage: JavaStreams wordcount BOOTSTRAP INPUT OUTPUT PARTITIONS "
                    + "REPLICATION APP_ID CLIENT_ID LINES STATE_DIR");
            System.exit(2);
        }
        String bootstrap = args[1], input = args[2], output = args[3];
        int partitions = Integer.parseInt(args[4]);
        short replication = Short.parseShort(args[5]);
        String appId = args[6], clientId = args[7];
        int lines = Integer.parseInt(args[8]);
        String stateDir = args[9];
        JavaClients.Json out = new JavaClients.Json();

        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(input, partitions, replication),
                    new NewTopic(output, partitions, replication))).all().get();
        }
        Map<String, Long> expected = writeInput(common, input, lines);

        Properties config = new Properties();
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        config.put(StreamsConfig.CLIENT_ID_CONFIG, clientId);
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) replication);
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        config.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        config.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        config.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        config.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> List.of(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        long started = System.nanoTime();
        Map<String, Long> counted;
        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        try {
            streams.start();
            counted = readCounts(common, output, expected, streams);
            double seconds = (System.nanoTime() - started) / 1e9;
            out.put("seconds", seconds);
            out.put("state", streams.state().toString());
            List<String> producers = new ArrayList<>();
            for (MetricName name : streams.metrics().keySet()) {
                String id = name.tags().get("client-id");
                if (name.group().equals("producer-metrics") && id != null && !producers.contains(id)) {
                    producers.add(id);
                }
            }
            out.put("producers", producers);
            String producer = clientId + "-StreamThread-1-producer";
            out.put("producerClientId", producer);
            out.put("producerBytes", metric(streams.metrics(), "producer-metrics", producer, "outgoing-byte-total"));
            out.put("produceThrottleTimeMax", metric(streams.metrics(), "producer-metrics", producer, "produce-throttle-time-max"));
            out.put("transactions", metric(streams.metrics(), "producer-metrics", producer, "txn-commit-time-ns-total"));
        } finally {
            streams.close(Duration.ofSeconds(30));
            streams.cleanUp();
        }
        out.put("words", expected.size());
        out.put("exact", counted.equals(expected));
        long inputWords = 0;
        for (long count : expected.values()) {
            inputWords += count;
        }
        out.put("inputWords", inputWords);
        System.out.println(out);
    }

    private static Map<String, Long> writeInput(Properties common, String input, int lines) throws Exception {
        Map<String, Long> expected = new HashMap<>();
        Properties config = (Properties) common.clone();
        config.put("acks", "all");
        try (KafkaProducer<String, String> producer =
                new KafkaProducer<>(config, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < lines; i++) {
                List<String> words = new ArrayList<>();
                for (int w = 0; w < 4; w++) {
                    words.add(WORDS[(i + w * w) % WORDS.length]);
                }
                for (String word : words) {
                    expected.merge(word, 1L, Long::sum);
                }
                producer.send(new ProducerRecord<>(input, String.join(" ", words)));
            }
            producer.flush();
        }
        return expected;
    }

    /** The latest committed count of every word, read until it is `expected`, the application
     * failed or the deadline passed. */
    private static Map<String, Long> readCounts(Properties common, String output, Map<String, Long> expected,
            KafkaStreams streams) {
        Properties config = (Properties) common.clone();
        config.put("isolation.level", "read_committed");
        Map<String, Long> latest = new HashMap<>();
        try (KafkaConsumer<String, Long> consumer =
                new KafkaConsumer<>(config, new StringDeserializer(), new LongDeserializer())) {
            List<TopicPartition> partitions = new ArrayList<>();
            consumer.partitionsFor(output).forEach(p -> partitions.add(new TopicPartition(output, p.partition())));
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            long deadline = System.nanoTime() + DEADLINE.toNanos();
            // An application that failed (state ERROR) counts nothing more: no use waiting.
            while (!latest.equals(expected) && System.nanoTime() < deadline
                    && streams.state() != KafkaStreams.State.ERROR) {
                for (ConsumerRecord<String, Long> record : consumer.poll(Duration.ofMillis(500))) {
                    latest.put(record.key(), record.value());
                }
            }
        }
        return latest;
    }

    private static double metric(Map<MetricName, ? extends Metric> metrics, String group, String clientId, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
            MetricName key = entry.getKey();
            if (key.group().equals(group) && key.name().equals(name)
                    && clientId.equals(key.tags().get("client-id"))) {
                Object value = entry.getValue().metricValue();
                return value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
            }
        }
        return Double.NaN;
    }
}
