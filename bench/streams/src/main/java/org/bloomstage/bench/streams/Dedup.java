/*
 * The Kafka Streams peer of bloomstage: deduplicates records by their key,
 * written the way Kafka Streams users write it, after Confluent's "finding
 * distinct events" tutorial.  A processor keeps every key it forwarded in a
 * persistent (RocksDB, changelogged) WindowStore<key, timestamp>; a record
 * whose key is in the store within the dedup window of its own timestamp is
 * dropped, any other is stored and forwarded.  As in the tutorial, a
 * dropped duplicate refreshes its key's entry (--refresh false turns that
 * off).  Keys and values are ByteArray serdes, passed through untouched; a
 * record without a key is forwarded unfiltered (bloomstage's default
 * dedup.on.missing.key=forward).  Everything else is Streams' defaults:
 * commit.interval.ms is 100 under exactly_once_v2 and 30000 under
 * at_least_once (--commit-interval-ms sets another: bench/txn's latency
 * at bloomstage's checkpoint intervals), the record cache 10 MiB,
 * RocksDB's own options.
 *
 * For the benchmark it prints on stdout `dedup started ...` (the
 * effective settings), `dedup running` each time Streams enters RUNNING
 * (its tasks assigned), and `dedup first_record_ms=T` when the first
 * record reaches the processor (after group join, assignment and store
 * opening), and on SIGTERM, after a clean close, `dedup stopped in=N
 * out=M dropped=D last_out_ms=T store_bytes=B store_bytes_max=X
 * store_keys=K`: the store's size from RocksDB's own properties as Streams
 * reports them (KIP-607 metrics, summed over tasks and segments:
 * size-all-mem-tables + total-sst-files-size, and estimate-num-keys), read
 * just before the close, and the largest of that sum sampled every second
 * while it ran.  After SIGTERM the JVM exits 143 (the signal's status)
 * once Streams is closed; it exits 1 if Streams fails.
 */
package org.bloomstage.bench.streams;

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

public final class Dedup {
    static final String PROGRAM = "Dedup";
    static final String STORE = "dedup-store";

    // Over all tasks and threads: for the benchmark's lines only.
    static final AtomicLong IN = new AtomicLong();
    static final AtomicLong OUT = new AtomicLong();
    static final AtomicLong DROPPED = new AtomicLong();
    static final AtomicBoolean FIRST = new AtomicBoolean();
    static volatile long lastOutMs; // when the last record was forwarded
    static final AtomicLong STORE_MAX = new AtomicLong(); // largest store size sampled

    /**
     * The dedup store's size over all tasks, from the RocksDB properties
     * metrics (group stream-state-metrics; segmented stores report the sum
     * of their segments): [memtables + SST files in bytes, estimated keys].
     */
    static long[] storeSize(KafkaStreams streams) {
        long bytes = 0, keys = 0;
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (!n.group().equals("stream-state-metrics") || !STORE.equals(n.tags().get("rocksdb-window-state-id"))) {
                continue;
            }
            Object v = e.getValue().metricValue();
            if (!(v instanceof Number)) {
                continue;
            }
            long x = ((Number) v).longValue();
            switch (n.name()) {
                case "size-all-mem-tables", "total-sst-files-size" -> bytes += x;
                case "estimate-num-keys" -> keys += x;
                default -> { }
            }
        }
        return new long[] {bytes, keys};
    }

    /**
     * One per task (input partition).  The store holds key -> the timestamp
     * of the record that put it, in a window starting at that timestamp.
     */
    static final class DedupProcessor implements FixedKeyProcessor<byte[], byte[], byte[]> {
        private final long windowMs;
        private final boolean refresh;
        private FixedKeyProcessorContext<byte[], byte[]> context;
        private WindowStore<byte[], Long> seen;

        DedupProcessor(long windowMs, boolean refresh) {
            this.windowMs = windowMs;
            this.refresh = refresh;
        }

        @Override
        public void init(FixedKeyProcessorContext<byte[], byte[]> context) {
            this.context = context;
            this.seen = context.getStateStore(STORE);
        }

        @Override
        public void process(FixedKeyRecord<byte[], byte[]> record) {
            if (!FIRST.getAndSet(true)) {
                System.out.println("dedup first_record_ms=" + System.currentTimeMillis());
            }
            IN.incrementAndGet();
            byte[] key = record.key();
            if (key == null) {
                OUT.incrementAndGet();
                context.forward(record);
                lastOutMs = System.currentTimeMillis();
                return;
            }
            long ts = record.timestamp();
            boolean duplicate;
            try (WindowStoreIterator<Long> it = seen.fetch(key, ts - windowMs, ts + windowMs)) {
                duplicate = it.hasNext();
            }
            if (duplicate) {
                DROPPED.incrementAndGet();
                if (refresh) {
                    seen.put(key, ts, ts); // the tutorial: keep a recurring key from expiring
                }
                return;
            }
            seen.put(key, ts, ts);
            OUT.incrementAndGet();
            context.forward(record);
            lastOutMs = System.currentTimeMillis();
        }
    }

    static Topology topology(String input, String output, long windowMs, boolean refresh) {
        StreamsBuilder builder = new StreamsBuilder();
        // retention = window size = the dedup window, as the tutorial has it;
        // no duplicates retained (one entry per key and window start).
        builder.addStateStore(Stores.windowStoreBuilder(
                Stores.persistentWindowStore(STORE, Duration.ofMillis(windowMs),
                        Duration.ofMillis(windowMs), false),
                Serdes.ByteArray(), Serdes.Long()));
        builder.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
                .processValues(() -> new DedupProcessor(windowMs, refresh), STORE)
                .to(output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        return builder.build();
    }

    public static void main(String[] args) {
        Opts.main(PROGRAM, () -> run(args));
    }

    static void run(String[] args) throws Exception {
        Opts o = new Opts(PROGRAM)
                .opt("bootstrap", null, "bootstrap servers, host:port[,...]")
                .opt("input", null, "input topic")
                .opt("output", null, "output topic (must exist)")
                .opt("application-id", null, "application.id (the consumer group, the internal topics' prefix)")
                .opt("guarantee", "exactly_once_v2", "processing.guarantee: exactly_once_v2 or at_least_once")
                .opt("state-dir", null, "state.dir (RocksDB stores live here)")
                .opt("threads", "1", "num.stream.threads")
                .opt("window-ms", String.valueOf(Duration.ofDays(7).toMillis()),
                        "dedup window and store retention, ms (7 days: longer than any run)")
                .opt("refresh", "true", "a duplicate refreshes its key's entry, as in the tutorial")
                .opt("commit-interval-ms", "0", "commit.interval.ms; 0: Streams' default for the guarantee")
                .parse(args);
        String guarantee = o.str("guarantee");
        if (!guarantee.equals(StreamsConfig.EXACTLY_ONCE_V2) && !guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
            throw new Opts.UsageException("--guarantee: '" + guarantee + "' is not exactly_once_v2 or at_least_once");
        }
        long threads = o.num("threads", 1, 64);
        long windowMs = o.num("window-ms", 60_000, Duration.ofDays(3650).toMillis());
        boolean refresh = o.bool("refresh");
        long commitMs = o.num("commit-interval-ms", 0, 86_400_000);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, o.str("application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, o.str("bootstrap"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATE_DIR_CONFIG, o.str("state-dir"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, (int) threads);
        if (commitMs > 0) {
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        }
        // The effective settings, defaults resolved (commit.interval.ms
        // depends on the guarantee).
        StreamsConfig config = new StreamsConfig(props);

        Topology topology = topology(o.str("input"), o.str("output"), windowMs, refresh);
        KafkaStreams streams = new KafkaStreams(topology, config);
        CountDownLatch done = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean();
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println(PROGRAM + ": stream thread failed: " + e);
            failed.set(true);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                // Its tasks assigned and restored: bench/txn starts feeding.
                System.out.println("dedup running");
                System.out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        AtomicBoolean stopping = new AtomicBoolean();
        Thread sampler = new Thread(() -> {
            while (!stopping.get()) {
                try {
                    STORE_MAX.accumulateAndGet(storeSize(streams)[0], Math::max);
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    // a store closing under a rebalance: the next sample
                }
            }
        }, "dedup-store-sampler");
        sampler.setDaemon(true);
        Thread hook = new Thread(() -> {
            stopping.set(true);
            long[] size = storeSize(streams);
            STORE_MAX.accumulateAndGet(size[0], Math::max);
            streams.close(Duration.ofSeconds(60));
            done.countDown();
            System.out.printf("dedup stopped in=%d out=%d dropped=%d last_out_ms=%d store_bytes=%d"
                            + " store_bytes_max=%d store_keys=%d%n",
                    IN.get(), OUT.get(), DROPPED.get(), lastOutMs, size[0], STORE_MAX.get(), size[1]);
            System.out.flush();
        }, "dedup-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);

        System.out.printf("dedup started guarantee=%s commit.interval.ms=%d num.stream.threads=%d"
                        + " statestore.cache.max.bytes=%d window.ms=%d refresh=%b state.dir=%s%n",
                guarantee, config.getLong(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG),
                config.getInt(StreamsConfig.NUM_STREAM_THREADS_CONFIG),
                config.getLong(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG), windowMs, refresh,
                config.getString(StreamsConfig.STATE_DIR_CONFIG));
        System.out.flush();
        streams.start();
        sampler.start();
        done.await();
        if (!stopping.get()) {
            // Streams stopped by itself: a failure (a SIGTERM would have set stopping).
            System.err.println(PROGRAM + ": Kafka Streams stopped on its own in state " + streams.state()
                    + (failed.get() ? " after a stream thread failed" : ""));
            Runtime.getRuntime().halt(1);
        }
        // A SIGTERM: the hook closes Streams; the JVM exits when it returns.
        hook.join();
    }
}
