/*
 * The benchmark's observer of the Streams peer: counts the output topic's
 * records as a downstream consumer sees them (isolation.level=
 * read_committed, every partition from the beginning, no group) and says
 * when the run is over:
 *   - reason=expected: the count reached --expect; the end time is the
 *     moment the poll that delivered the last expected record returned.
 *     It then keeps reading for --grace-ms, so extra records are counted;
 *   - reason=lag0 (no --expect, or the output stays short): the consumer
 *     group --group has committed the end offset of every partition of
 *     --input (lag 0) and kept it, and no output record came, for
 *     --settle-s seconds; the end time is the arrival of the last output
 *     record (0 if none came).
 * Prints `watch ready partitions=P` once the output partitions are assigned
 * and positioned (start the application after it), then `watch done
 * reason=R out=N end_ms=T first_ms=F lag=L`.  After --timeout-s seconds it
 * prints `watch timeout out=N lag=L` and exits 3.  Times are
 * System.currentTimeMillis(), comparable with Dedup's first_record_ms.
 */
package org.bloomstage.bench.streams;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class Watch {
    static final String PROGRAM = "Watch";

    public static void main(String[] args) {
        Opts.main(PROGRAM, () -> run(args));
    }

    static List<TopicPartition> partitions(KafkaConsumer<?, ?> c, String topic, long deadline) throws InterruptedException {
        while (true) {
            List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofSeconds(10));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo i : infos) {
                    tps.add(new TopicPartition(topic, i.partition()));
                }
                return tps;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("topic " + topic + " not found");
            }
            Thread.sleep(500);
        }
    }

    /** The group's lag on the input: end offsets minus committed offsets. */
    static long lag(Admin admin, String group, List<TopicPartition> input) throws Exception {
        Map<TopicPartition, OffsetSpec> spec = new HashMap<>();
        for (TopicPartition tp : input) {
            spec.put(tp, OffsetSpec.latest());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> end =
                admin.listOffsets(spec).all().get(10, TimeUnit.SECONDS);
        Map<TopicPartition, OffsetAndMetadata> committed =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
        long lag = 0;
        for (TopicPartition tp : input) {
            OffsetAndMetadata c = committed.get(tp);
            lag += end.get(tp).offset() - (c == null ? 0 : c.offset());
        }
        return lag;
    }

    static void run(String[] args) throws Exception {
        Opts o = new Opts(PROGRAM)
                .opt("bootstrap", null, "bootstrap servers, host:port[,...]")
                .opt("topic", null, "output topic to count")
                .opt("expect", "0", "records expected in the output; 0: unknown, end on lag 0")
                .opt("group", null, "the application's consumer group (application.id)")
                .opt("input", null, "the application's input topic (for the group's lag)")
                .opt("timeout-s", "600", "give up after this long")
                .opt("settle-s", "5", "lag 0 and no output for this long ends the run")
                .opt("grace-ms", "1000", "keep counting this long after --expect is reached")
                .parse(args);
        long expect = o.num("expect", 0, Long.MAX_VALUE);
        long deadline = System.currentTimeMillis() + 1000 * o.num("timeout-s", 1, 86_400);
        long settleMs = 1000 * o.num("settle-s", 1, 3600);
        long graceMs = o.num("grace-ms", 0, 600_000);
        String group = o.str("group");

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.str("bootstrap"));
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "bench-streams-watch");
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.str("bootstrap"));
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, "bench-streams-watch-admin");

        try (KafkaConsumer<byte[], byte[]> c =
                     new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             Admin admin = Admin.create(ap)) {
            List<TopicPartition> out = partitions(c, o.str("topic"), deadline);
            List<TopicPartition> in = partitions(c, o.str("input"), deadline);
            c.assign(out);
            c.seekToBeginning(out);
            for (TopicPartition tp : out) {
                c.position(tp, Duration.ofSeconds(30));
            }
            System.out.println("watch ready partitions=" + out.size());
            System.out.flush();

            long count = 0, firstMs = 0, lastMs = 0, reachedMs = 0, nextLagCheck = 0, lag = -1, lagZeroMs = 0;
            while (true) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
                long now = System.currentTimeMillis();
                if (!recs.isEmpty()) {
                    count += recs.count();
                    lastMs = now;
                    if (firstMs == 0) {
                        firstMs = now;
                    }
                }
                if (expect > 0 && reachedMs == 0 && count >= expect) {
                    reachedMs = now;
                }
                if (reachedMs > 0 && now - reachedMs >= graceMs) {
                    System.out.printf("watch done reason=expected out=%d end_ms=%d first_ms=%d lag=%d%n",
                            count, reachedMs, firstMs, lag);
                    return;
                }
                if (now >= nextLagCheck) {
                    nextLagCheck = now + 1000;
                    try {
                        lag = lag(admin, group, in);
                    } catch (Exception e) {
                        lag = -1;
                    }
                    if (lag != 0) {
                        lagZeroMs = 0;
                    } else if (lagZeroMs == 0) {
                        lagZeroMs = now;
                    }
                    if (reachedMs == 0 && lag == 0 && now - lagZeroMs >= settleMs && now - lastMs >= settleMs) {
                        System.out.printf("watch done reason=lag0 out=%d end_ms=%d first_ms=%d lag=0%n",
                                count, lastMs, firstMs);
                        return;
                    }
                }
                if (now > deadline) {
                    System.out.printf("watch timeout out=%d lag=%d%n", count, lag);
                    System.out.flush();
                    System.exit(3);
                }
            }
        }
    }
}
