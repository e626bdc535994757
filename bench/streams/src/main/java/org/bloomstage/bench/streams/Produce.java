/*
 * The benchmark's input: N keyed records with exactly K distinct keys,
 * produced to an existing topic (kafka-producer-perf-test cannot set keys).
 * Keys are `user-NNNNNNNNNN` (10 digits, 0 .. K-1): every key occurs at
 * least once, the N-K other records repeat keys drawn at random, and the
 * whole sequence is shuffled (seeded, so the same arguments give the same
 * stream).  Values are ~40-byte JSON, `{"user":"user-NNNNNNNNNN","seq":I}`.
 * The default partitioner puts a key's copies in one partition (murmur2 of
 * the key), as Kafka Streams needs for a per-task store.  acks=all,
 * idempotent; any failed send is an error (exit 1).  Prints `produce
 * records=N keys=K partitions=P seconds=S rate=R` on stdout.
 */
package org.bloomstage.bench.streams;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Produce {
    static final String PROGRAM = "Produce";

    public static void main(String[] args) {
        Opts.main(PROGRAM, () -> run(args));
    }

    /** Key number of each record: 0 .. keys-1 each at least once, shuffled. */
    static int[] sequence(int records, int keys, long seed) {
        Random rnd = new Random(seed);
        int[] seq = new int[records];
        for (int i = 0; i < records; i++) {
            seq[i] = i < keys ? i : rnd.nextInt(keys);
        }
        for (int i = records - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            int t = seq[i];
            seq[i] = seq[j];
            seq[j] = t;
        }
        return seq;
    }

    static void run(String[] args) throws Exception {
        Opts o = new Opts(PROGRAM)
                .opt("bootstrap", null, "bootstrap servers, host:port[,...]")
                .opt("topic", null, "topic to produce to (must exist)")
                .opt("records", null, "number of records N")
                .opt("keys", null, "number of distinct keys K (1..N)")
                .opt("partitions", "0", "if > 0: fail unless the topic has this many partitions")
                .opt("seed", "1", "seed of the key sequence")
                .opt("compression", "none", "compression.type")
                .parse(args);
        int records = (int) o.num("records", 1, Integer.MAX_VALUE - 8);
        int keys = (int) o.num("keys", 1, records);
        long partitions = o.num("partitions", 0, 100_000);
        String topic = o.str("topic");

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.str("bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 10);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, 128 * 1024);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, o.str("compression"));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 60_000);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "bench-streams-produce");

        int[] seq = sequence(records, keys, Long.parseLong(o.str("seed")));
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> error = new AtomicReference<>();
        long t0 = System.nanoTime();
        int got;
        try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            got = producer.partitionsFor(topic).size();
            if (partitions > 0 && got != partitions) {
                throw new IllegalStateException("topic " + topic + " has " + got + " partitions, not " + partitions);
            }
            for (int i = 0; i < records && error.get() == null; i++) {
                String user = String.format("user-%010d", seq[i]);
                byte[] key = user.getBytes(StandardCharsets.US_ASCII);
                byte[] value = ("{\"user\":\"" + user + "\",\"seq\":" + i + "}").getBytes(StandardCharsets.US_ASCII);
                producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e != null) {
                        error.compareAndSet(null, e);
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        double s = (System.nanoTime() - t0) / 1e9;
        if (error.get() != null) {
            throw new IllegalStateException("a send to " + topic + " failed", error.get());
        }
        if (acked.get() != records) {
            throw new IllegalStateException(acked.get() + " of " + records + " records acknowledged");
        }
        System.out.printf("produce records=%d keys=%d partitions=%d seconds=%.3f rate=%.0f%n",
                records, keys, got, s, records / s);
    }
}
