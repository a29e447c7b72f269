package rocketlake.peer;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.ConsumeQueue;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.StoreCheckpoint;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.config.StorePathConfigHelper;
import org.apache.rocketmq.store.index.IndexService;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * RocketMQ 4.9.8's own DefaultMessageStore, in-process: a benchmark peer and a test oracle.
 *
 * <pre>
 * write   STORE N QUEUES BODY_BYTES [TOPICS] [--halt] [sizes]
 *                                             put N messages, wait for dispatch, shut down (with
 *                                             --halt: halt the JVM instead, as a crash leaves the
 *                                             store: abort file, checkpoint as last flushed)
 * recover STORE [--phases] [sizes]            open (load + start), wait for dispatch, shut down;
 *                                             its phases timed, and the wall clock when ready;
 *                                             --phases: load()'s own steps, run one by one in its
 *                                             order and each timed, instead of load()
 * serve   STORE --out FILE [--query TOPIC KEY]... [sizes]
 *                                             open as recover, then write every queue and every
 *                                             message getMessage serves, and each queryMessage
 *                                             answer, to FILE as JSON Lines
 * sizes:  --commitlog-size B  --cq-size B  --index-slots S  --index-entries E  (default: RocketMQ's)
 * </pre>
 *
 * Every mode prints ONE JSON line on stdout (times in seconds, System.nanoTime inside the JVM);
 * everything else, RocketMQ's own logging included, goes to stderr.
 *
 * <p>write's messages: message i (from 0) goes to queue i % QUEUES of topic BenchTopic (TOPICS
 * 1, the default) or BenchTopic + ((i / QUEUES) % TOPICS), tag TagA, the one key "k" + i, born and store host 127.0.0.1, and its body is the ASCII text "m" + i
 * padded with '.' to BODY_BYTES bytes (cut to BODY_BYTES when longer).
 */
public final class RocketMQPeer {
    static final String TOPIC = "BenchTopic";
    static final String GROUP = "rocketlake-peer";
    static final PrintStream OUT = System.out;
    /** queryMessage answers at most maxMsgsNumBatch (64) messages; IndexService sizes a list by it. */
    static final int MAX_QUERY = 64;

    public static void main(String[] args) {
        System.setOut(System.err); // stdout carries the one result line only
        int status = 0;
        try {
            OUT.println(JSON.toJSONString(run(args)));
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        OUT.flush();
        System.exit(status); // RocketMQ leaves non-daemon threads behind, even after shutdown
    }

    static Map<String, Object> run(String[] args) throws Exception {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: write|recover|serve STORE ...");
        }
        Options o = new Options(args);
        switch (o.mode) {
            case "write": return write(o);
            case "recover": return recover(o);
            case "serve": return serve(o);
            default: throw new IllegalArgumentException("unknown mode " + o.mode);
        }
    }

    /** The command line: mode, store, positional numbers, then --options. */
    static final class Options {
        final String mode;
        final String store;
        final List<String> positional = new ArrayList<>();
        Integer commitlogSize; // null: MessageStoreConfig's default
        Integer cqSize;
        Integer indexSlots;
        Integer indexEntries;
        String out;
        boolean halt;
        boolean phases;
        final List<String[]> queries = new ArrayList<>();

        Options(String[] args) {
            mode = args[0];
            store = args[1];
            for (int i = 2; i < args.length; i++) {
                switch (args[i]) {
                    case "--commitlog-size": commitlogSize = Integer.parseInt(args[++i]); break;
                    case "--cq-size": cqSize = Integer.parseInt(args[++i]); break;
                    case "--index-slots": indexSlots = Integer.parseInt(args[++i]); break;
                    case "--index-entries": indexEntries = Integer.parseInt(args[++i]); break;
                    case "--out": out = args[++i]; break;
                    case "--halt": halt = true; break;
                    case "--phases": phases = true; break;
                    case "--query": queries.add(new String[] {args[++i], args[++i]}); break;
                    default:
                        if (args[i].startsWith("--")) {
                            throw new IllegalArgumentException("unknown option " + args[i]);
                        }
                        positional.add(args[i]);
                }
            }
        }

        long number(int i, String name) {
            if (positional.size() <= i) {
                throw new IllegalArgumentException(mode + ": missing " + name);
            }
            return Long.parseLong(positional.get(i));
        }
    }

    /** A store at o.store with o's file sizes (else RocketMQ's defaults), ASYNC_FLUSH, no HA
     * port, nothing ever expired. */
    static DefaultMessageStore create(Options o) throws IOException {
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(o.store);
        cfg.setStorePathCommitLog(o.store + File.separator + "commitlog");
        if (o.commitlogSize != null) {
            cfg.setMappedFileSizeCommitLog(o.commitlogSize);
        }
        if (o.cqSize != null) {
            cfg.setMappedFileSizeConsumeQueue(o.cqSize);
        }
        if (o.indexSlots != null) {
            cfg.setMaxHashSlotNum(o.indexSlots);
        }
        if (o.indexEntries != null) {
            cfg.setMaxIndexNum(o.indexEntries);
        }
        cfg.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        cfg.setHaListenPort(0);
        cfg.setDiskMaxUsedSpaceRatio(95);
        cfg.setFileReservedTime(1_000_000); // hours: the peer never deletes a file it did not write
        return new DefaultMessageStore(cfg, new BrokerStatsManager("rocketlake-peer", false), null,
                new BrokerConfig());
    }

    static void open(DefaultMessageStore ms, String store) throws Exception {
        if (!ms.load()) {
            throw new IllegalStateException(store + ": DefaultMessageStore.load() failed (see log)");
        }
        ms.start();
    }

    /** Wait until the reput service has dispatched every CommitLog byte (ConsumeQueue + index). */
    static void awaitDispatch(DefaultMessageStore ms) throws InterruptedException {
        while (ms.dispatchBehindBytes() != 0) {
            Thread.sleep(1);
        }
    }

    static byte[] body(long i, int bytes) {
        byte[] b = new byte[bytes];
        java.util.Arrays.fill(b, (byte) '.');
        byte[] text = ("m" + i).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(text, 0, b, 0, Math.min(text.length, bytes));
        return b;
    }

    static Map<String, Object> write(Options o) throws Exception {
        long n = o.number(0, "N");
        int queues = (int) o.number(1, "QUEUES");
        int bodyBytes = (int) o.number(2, "BODY_BYTES");
        long topics = o.positional.size() > 3 ? o.number(3, "TOPICS") : 1;
        DefaultMessageStore ms = create(o);
        open(ms, o.store);
        InetSocketAddress host = new InetSocketAddress("127.0.0.1", 0);
        InetSocketAddress storeHost = new InetSocketAddress("127.0.0.1", 10911);
        long tagsCode = MessageExtBrokerInner.tagsString2tagsCode("TagA");
        long t0 = System.nanoTime();
        for (long i = 0; i < n; i++) {
            MessageExtBrokerInner m = new MessageExtBrokerInner();
            m.setTopic(topics == 1 ? TOPIC : TOPIC + ((i / queues) % topics));
            m.setQueueId((int) (i % queues));
            m.setBody(body(i, bodyBytes));
            m.setTags("TagA");
            m.setKeys("k" + i);
            m.setTagsCode(tagsCode);
            m.setPropertiesString(MessageDecoder.messageProperties2String(m.getProperties()));
            m.setBornHost(host);
            m.setStoreHost(storeHost);
            m.setBornTimestamp(System.currentTimeMillis());
            m.setSysFlag(0);
            PutMessageResult r = ms.putMessage(m);
            if (r == null || !r.isOk()) {
                throw new IllegalStateException("put " + i + " refused: " + r);
            }
        }
        awaitDispatch(ms);
        double seconds = (System.nanoTime() - t0) / 1e9;
        long maxPhy = ms.getMaxPhyOffset();
        Map<String, Object> r = result("write", seconds, maxPhy, o.halt ? 0 : shutdown(ms));
        r.put("messages", n);
        r.put("topics", topics);
        r.put("msgs_per_s", n / seconds);
        if (o.halt) { // a crash: no shutdown, no flush, the abort file stays
            OUT.println(JSON.toJSONString(r));
            OUT.flush();
            Runtime.getRuntime().halt(0);
        }
        return r;
    }

    static Map<String, Object> recover(Options o) throws Exception {
        boolean abort = new File(o.store, "abort").exists();
        double cpu0 = processCpuSeconds();
        long t0 = System.nanoTime();
        DefaultMessageStore ms = create(o);
        long created = System.nanoTime();
        Map<String, Object> steps = o.phases ? loadInSteps(ms, !abort) : null;
        if (steps == null && !ms.load()) {
            throw new IllegalStateException(o.store + ": DefaultMessageStore.load() failed (see log)");
        }
        long loaded = System.nanoTime();
        ms.start();
        long started = System.nanoTime();
        awaitDispatch(ms);
        long t1 = System.nanoTime();
        long ready = System.currentTimeMillis(); // serving from here: a restart waits until now
        double cpuReady = processCpuSeconds();
        long maxPhy = ms.getMaxPhyOffset();
        double shutdown = shutdown(ms);
        Map<String, Object> r = result("recover", (t1 - t0) / 1e9, maxPhy, shutdown);
        r.put("abort_file", abort); // true: load() recovered abnormally
        r.put("load_seconds", (loaded - t0) / 1e9); // recovery (abnormal: its dispatch) included
        r.put("create_seconds", (created - t0) / 1e9); // the DefaultMessageStore object, in load_seconds
        r.put("start_seconds", (started - loaded) / 1e9); // start() waits for the reput itself
        r.put("await_seconds", (t1 - started) / 1e9);
        r.put("ready_epoch_ms", ready);
        r.put("cpu_start_seconds", cpu0); // the JVM's CPU before the store is created
        r.put("cpu_ready_seconds", cpuReady); // the JVM's CPU (all threads) when ready
        if (steps != null) {
            r.put("load_steps", steps);
        }
        return r;
    }

    /**
     * What DefaultMessageStore.load() of 4.9.8 does, step by step in its order, each step timed
     * (seconds, by step name): CommitLog.load (maps the CommitLog files), loadConsumeQueue (maps
     * every ConsumeQueue file), the StoreCheckpoint, IndexService.load, then recover:
     * recoverConsumeQueue, CommitLog.recoverNormally / recoverAbnormally (the walk from the first
     * file to check, dispatching every record), recoverTopicQueueTable, then
     * ScheduleMessageService.load. The private steps are called by reflection.
     */
    static Map<String, Object> loadInSteps(DefaultMessageStore ms, boolean lastExitOK) throws Exception {
        Map<String, Object> steps = new LinkedHashMap<>();
        long t = System.nanoTime();
        check(ms.getCommitLog().load(), "CommitLog.load");
        t = lap(steps, "commitlog_load", t);
        check((Boolean) call(ms, "loadConsumeQueue"), "loadConsumeQueue");
        t = lap(steps, "load_consume_queues", t);
        Field checkpoint = DefaultMessageStore.class.getDeclaredField("storeCheckpoint");
        checkpoint.setAccessible(true);
        checkpoint.set(ms, new StoreCheckpoint(StorePathConfigHelper.getStoreCheckpoint(
                ms.getMessageStoreConfig().getStorePathRootDir())));
        t = lap(steps, "checkpoint", t);
        Field index = DefaultMessageStore.class.getDeclaredField("indexService");
        index.setAccessible(true);
        ((IndexService) index.get(ms)).load(lastExitOK);
        t = lap(steps, "index_load", t);
        long maxPhyOffsetOfConsumeQueue = (Long) call(ms, "recoverConsumeQueue");
        t = lap(steps, "recover_consume_queues", t);
        if (lastExitOK) {
            ms.getCommitLog().recoverNormally(maxPhyOffsetOfConsumeQueue);
        } else {
            ms.getCommitLog().recoverAbnormally(maxPhyOffsetOfConsumeQueue);
        }
        t = lap(steps, lastExitOK ? "commitlog_recover_normally" : "commitlog_recover_abnormally", t);
        call(ms, "recoverTopicQueueTable");
        t = lap(steps, "recover_topic_queue_table", t);
        if (ms.getScheduleMessageService() != null) {
            check(ms.getScheduleMessageService().load(), "ScheduleMessageService.load");
        }
        lap(steps, "schedule_load", t);
        return steps;
    }

    static Object call(DefaultMessageStore ms, String method) throws Exception {
        Method m = DefaultMessageStore.class.getDeclaredMethod(method);
        m.setAccessible(true);
        return m.invoke(ms);
    }

    static void check(boolean ok, String step) {
        if (!ok) {
            throw new IllegalStateException(step + " failed (see log)");
        }
    }

    static long lap(Map<String, Object> steps, String name, long since) {
        long now = System.nanoTime();
        steps.put(name, (now - since) / 1e9);
        return now;
    }

    static Map<String, Object> serve(Options o) throws Exception {
        if (o.out == null) {
            throw new IllegalArgumentException("serve: --out FILE is required");
        }
        boolean abort = new File(o.store, "abort").exists();
        double cpu0 = processCpuSeconds();
        long t0 = System.nanoTime();
        DefaultMessageStore ms = create(o);
        open(ms, o.store);
        awaitDispatch(ms);
        double seconds = (System.nanoTime() - t0) / 1e9;
        long messages = 0;
        int queues = 0;
        try (BufferedWriter w = Files.newBufferedWriter(Path.of(o.out), StandardCharsets.UTF_8)) {
            Map<String, Map<Integer, ConsumeQueue>> table = new TreeMap<>();
            for (Map.Entry<String, ConcurrentMap<Integer, ConsumeQueue>> e
                    : ms.getConsumeQueueTable().entrySet()) {
                table.put(e.getKey(), new TreeMap<>(e.getValue()));
            }
            for (Map.Entry<String, Map<Integer, ConsumeQueue>> t : table.entrySet()) {
                for (int qid : t.getValue().keySet()) {
                    messages += serveQueue(ms, t.getKey(), qid, w);
                    queues++;
                }
            }
            for (String[] q : o.queries) {
                QueryMessageResult qr = ms.queryMessage(q[0], q[1], MAX_QUERY, 0, Long.MAX_VALUE);
                List<Object> found = new ArrayList<>();
                for (ByteBuffer b : qr.getMessageBufferList()) {
                    found.add(message(MessageDecoder.decode(b, true, false)));
                }
                qr.release();
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("kind", "query");
                line.put("topic", q[0]);
                line.put("key", q[1]);
                line.put("messages", found);
                writeLine(w, line);
            }
        }
        long maxPhy = ms.getMaxPhyOffset();
        double shutdown = shutdown(ms);
        Map<String, Object> r = result("serve", seconds, maxPhy, shutdown);
        r.put("abort_file", abort);
        r.put("queues", queues);
        r.put("messages", messages);
        r.put("out", o.out);
        return r;
    }

    /** One "queue" line (min/max offsets), then one "message" line per message served from min
     * to max; a status other than FOUND is written as a "gap" line. Returns the messages served. */
    static long serveQueue(DefaultMessageStore ms, String topic, int qid, BufferedWriter w)
            throws IOException {
        long min = ms.getMinOffsetInQueue(topic, qid);
        long max = ms.getMaxOffsetInQueue(topic, qid);
        Map<String, Object> q = new LinkedHashMap<>();
        q.put("kind", "queue");
        q.put("topic", topic);
        q.put("queue_id", qid);
        q.put("min_offset", min);
        q.put("max_offset", max);
        writeLine(w, q);
        long served = 0;
        long offset = min;
        while (offset < max) {
            GetMessageResult r = ms.getMessage(GROUP, topic, qid, offset, 32, null);
            try {
                if (r.getStatus() != GetMessageStatus.FOUND) {
                    Map<String, Object> gap = new LinkedHashMap<>();
                    gap.put("kind", "gap");
                    gap.put("topic", topic);
                    gap.put("queue_id", qid);
                    gap.put("offset", offset);
                    gap.put("status", r.getStatus().name());
                    gap.put("next_begin_offset", r.getNextBeginOffset());
                    writeLine(w, gap);
                }
                for (SelectMappedBufferResult b : r.getMessageMapedList()) {
                    Map<String, Object> m = message(MessageDecoder.decode(b.getByteBuffer(), true, false));
                    m.put("served_offset", b.getStartOffset());
                    writeLine(w, m);
                    served++;
                }
            } finally {
                r.release();
            }
            if (r.getNextBeginOffset() <= offset) {
                break; // no progress: the gap line says why
            }
            offset = r.getNextBeginOffset();
        }
        return served;
    }

    static Map<String, Object> message(MessageExt m) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("kind", "message");
        j.put("topic", m.getTopic());
        j.put("queue_id", m.getQueueId());
        j.put("queue_offset", m.getQueueOffset());
        j.put("commitlog_offset", m.getCommitLogOffset());
        j.put("size", m.getStoreSize());
        j.put("body_crc", m.getBodyCRC());
        j.put("flag", m.getFlag());
        j.put("sys_flag", m.getSysFlag());
        j.put("born_timestamp", m.getBornTimestamp());
        j.put("born_host", host(m.getBornHost()));
        j.put("store_timestamp", m.getStoreTimestamp());
        j.put("store_host", host(m.getStoreHost()));
        j.put("reconsume_times", m.getReconsumeTimes());
        j.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
        // RocketMQ decodes an empty body as null (MessageDecoder.decode): shown as ""
        j.put("body_b64", m.getBody() == null ? "" : Base64.getEncoder().encodeToString(m.getBody()));
        j.put("tags", m.getTags());
        j.put("keys", m.getKeys());
        j.put("properties", new TreeMap<>(m.getProperties()));
        j.put("msg_id", m.getMsgId());
        return j;
    }

    /** "a.b.c.d:port", or "[v6 address]:port" (Java's uncompressed IPv6 text). */
    static String host(SocketAddress a) {
        InetSocketAddress s = (InetSocketAddress) a;
        String ip = s.getAddress().getHostAddress();
        return (s.getAddress() instanceof Inet6Address ? "[" + ip + "]" : ip) + ":" + s.getPort();
    }

    static void writeLine(BufferedWriter w, Object o) throws IOException {
        w.write(JSON.toJSONString(o, SerializerFeature.WriteMapNullValue)); // "tags": null, not absent
        w.write('\n');
    }

    /** Shut down cleanly (flush, checkpoint, remove abort); never destroy(): it deletes files. */
    static double shutdown(DefaultMessageStore ms) {
        long t0 = System.nanoTime();
        ms.shutdown();
        return (System.nanoTime() - t0) / 1e9;
    }

    /**
     * CPU seconds (user + system, all threads) this process has used so far, from
     * /proc/self/stat in clock ticks of 1/100 s (Linux); -1 where there is no such file. Read
     * without JMX, whose classes would load into the span measured.
     */
    static double processCpuSeconds() {
        try {
            String stat = new String(Files.readAllBytes(new File("/proc/self/stat").toPath()),
                                     StandardCharsets.US_ASCII);
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0; // utime, stime
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    static Map<String, Object> result(String mode, double seconds, long maxPhy, double shutdown) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("mode", mode);
        r.put("seconds", seconds);
        r.put("max_phy_offset", maxPhy);
        r.put("shutdown_seconds", shutdown);
        return r;
    }
}
