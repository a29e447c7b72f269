package rocketlake.broker;

import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * A real RocketMQ name server and broker (the version this jar is built against: 4.9.7 or 5.3.3)
 * in one JVM on loopback, serving the store STORE, and a real client that pulls every message of
 * every queue of the given topics from offset 0.
 *
 * <pre>
 * ServeStore STORE TOPIC... [--commitlog-size B] [--cq-size B] [--index-slots S] [--index-entries E]
 * </pre>
 *
 * The broker opens STORE as its own (storePathRootDir; the CommitLog in STORE/commitlog), runs
 * its own recovery, and changes it as a broker does (its config files, abort, checkpoint). The
 * queues pulled are those the name server's route lists (readQueueNums of config/topics.json).
 *
 * <p>stdout: one JSON line per message ({"kind": "message", ...}, in topic, queue, offset order),
 * then {"kind": "done", ...} with the message count and times in seconds (startup: from main()
 * until the name server routes the broker's topics; pull; shutdown); everything else, the
 * broker's logging included, goes to stderr. Exit status 1 on any failure (a topic the broker
 * does not serve included), with the reason on stderr.
 */
public final class ServeStore {
    static final PrintStream OUT = System.out;
    static final String CLUSTER = "rocketlake-cluster";
    static final String BROKER = "rocketlake-broker";
    static final String GROUP = "rocketlake_serve_store";
    static final int BATCH = 32;
    static final String SELF_TEST_TOPIC = "SELF_TEST_TOPIC"; // TopicValidator.RMQ_SYS_SELF_TEST_TOPIC
    static final long REGISTRATION_TIMEOUT_NANOS = 60_000_000_000L;

    public static void main(String[] args) {
        System.setOut(System.err); // stdout carries the JSON lines only
        // before any RocketMQ class reads them
        System.setProperty("tls.server.mode", "disabled"); // no self-signed certificate (~2 s)
        System.setProperty("rocketmq.client.logUseSlf4j", "true"); // client log to stderr too
        // the store refuses puts and cleans forcibly on a disk fuller than 0.90 / 0.85
        System.setProperty("rocketmq.broker.diskSpaceWarningLevelRatio", "0.99");
        System.setProperty("rocketmq.broker.diskSpaceCleanForciblyRatio", "0.99");
        int status = 0;
        try {
            run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        OUT.flush();
        System.exit(status); // RocketMQ leaves non-daemon threads behind, even after shutdown
    }

    static void run(String[] args) throws Exception {
        long t0 = System.nanoTime();
        String store = null;
        List<String> topics = new ArrayList<>();
        MessageStoreConfig sc = new MessageStoreConfig();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--commitlog-size": sc.setMappedFileSizeCommitLog(Integer.parseInt(args[++i])); break;
                case "--cq-size": sc.setMappedFileSizeConsumeQueue(Integer.parseInt(args[++i])); break;
                case "--index-slots": sc.setMaxHashSlotNum(Integer.parseInt(args[++i])); break;
                case "--index-entries": sc.setMaxIndexNum(Integer.parseInt(args[++i])); break;
                default:
                    if (args[i].startsWith("--")) {
                        throw new IllegalArgumentException("unknown option " + args[i]);
                    }
                    if (store == null) {
                        store = args[i];
                    } else {
                        topics.add(args[i]);
                    }
            }
        }
        if (store == null || topics.isEmpty()) {
            throw new IllegalArgumentException("usage: ServeStore STORE TOPIC... [sizes]");
        }
        // the broker's startup class sets it; without it routes are served only after ~10 s
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));

        NettyServerConfig nsNet = new NettyServerConfig();
        nsNet.setListenPort(freePort(0));
        NamesrvController namesrv = new NamesrvController(new NamesrvConfig(), nsNet);
        check(namesrv.initialize(), "name server initialize() failed");
        namesrv.start();
        String nsAddr = "127.0.0.1:" + nsNet.getListenPort();

        int port = freePort(2); // the broker also listens on port - 2 (its VIP channel)
        BrokerConfig bc = new BrokerConfig();
        bc.setBrokerClusterName(CLUSTER);
        bc.setBrokerName(BROKER);
        bc.setBrokerIP1("127.0.0.1");
        bc.setNamesrvAddr(nsAddr);
        bc.setAutoCreateTopicEnable(false); // topics come from config/topics.json only
        setIfPresent(bc, "setListenPort", port); // 5.x keeps the port in BrokerConfig too
        NettyServerConfig brokerNet = new NettyServerConfig();
        brokerNet.setListenPort(port);
        sc.setStorePathRootDir(store);
        sc.setStorePathCommitLog(store + File.separator + "commitlog");
        sc.setHaListenPort(0);           // no fixed HA port: any free one
        sc.setDiskMaxUsedSpaceRatio(95);
        sc.setFileReservedTime(1_000_000); // hours: never deletes a file it did not write
        BrokerController broker = new BrokerController(bc, brokerNet, new NettyClientConfig(), sc);
        check(broker.initialize(), store + ": broker initialize() failed (its store did not load; see log)");
        broker.start();
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(GROUP);
        consumer.setNamesrvAddr(nsAddr);
        consumer.setInstanceName("serve-store-" + ProcessHandle.current().pid());
        consumer.start();
        long served = 0;
        double startup = 0;
        long t1 = System.nanoTime();
        double pull;
        long t2;
        try {
            awaitRegistration(consumer);
            startup = (System.nanoTime() - t0) / 1e9;
            t1 = System.nanoTime();
            for (String topic : topics) {
                List<MessageQueue> queues = new ArrayList<>(consumer.fetchSubscribeMessageQueues(topic));
                queues.sort(Comparator.comparingInt(MessageQueue::getQueueId));
                for (MessageQueue mq : queues) {
                    served += pullAll(consumer, mq);
                }
            }
        } finally {
            pull = (System.nanoTime() - t1) / 1e9;
            t2 = System.nanoTime();
            consumer.shutdown();
            // side by side: each waits ~3 s per Netty event thread it stops
            Thread ns = new Thread(namesrv::shutdown, "namesrv-shutdown");
            ns.start();
            broker.shutdown(); // flushes, checkpoint, removes abort: the store closed cleanly
            ns.join();
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("kind", "done");
        done.put("version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        done.put("messages", served);
        done.put("startup_seconds", startup);
        done.put("pull_seconds", pull);
        done.put("shutdown_seconds", (System.nanoTime() - t2) / 1e9);
        OUT.println(Json.write(done));
    }

    /** Wait until the name server routes SELF_TEST_TOPIC, which every broker declares itself:
     * the broker has registered its topics (5.x registers after start() returns). */
    static void awaitRegistration(DefaultMQPullConsumer consumer) throws Exception {
        long deadline = System.nanoTime() + REGISTRATION_TIMEOUT_NANOS;
        while (true) {
            try {
                consumer.fetchSubscribeMessageQueues(SELF_TEST_TOPIC);
                return;
            } catch (MQClientException notYet) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the broker did not register with the name server", notYet);
                }
                Thread.sleep(50);
            }
        }
    }

    /** Pull ``mq`` from offset 0 to its end, printing each message; the count. */
    static long pullAll(DefaultMQPullConsumer consumer, MessageQueue mq) throws Exception {
        long offset = 0;
        long n = 0;
        while (true) {
            PullResult r = consumer.pull(mq, "*", offset, BATCH);
            if (r.getPullStatus() == PullStatus.NO_NEW_MSG) {
                return n;
            }
            if (r.getPullStatus() != PullStatus.FOUND) {
                throw new IllegalStateException(mq + " at offset " + offset + ": " + r.getPullStatus()
                        + " (next " + r.getNextBeginOffset() + ", min " + r.getMinOffset()
                        + ", max " + r.getMaxOffset() + ")");
            }
            for (MessageExt m : r.getMsgFoundList()) {
                OUT.println(Json.write(message(m)));
                n++;
            }
            offset = r.getNextBeginOffset();
        }
    }

    static Map<String, Object> message(MessageExt m) {
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("kind", "message");
        j.put("topic", m.getTopic());
        j.put("queue_id", m.getQueueId());
        j.put("queue_offset", m.getQueueOffset());
        j.put("commitlog_offset", m.getCommitLogOffset());
        j.put("sys_flag", m.getSysFlag());
        j.put("flag", m.getFlag());
        j.put("born_timestamp", m.getBornTimestamp());
        j.put("born_host", host(m.getBornHost()));
        j.put("store_timestamp", m.getStoreTimestamp());
        j.put("store_host", host(m.getStoreHost()));
        j.put("body_b64", Base64.getEncoder().encodeToString(m.getBody()));
        j.put("tags", m.getTags());
        j.put("keys", m.getKeys());
        j.put("properties", new TreeMap<>(m.getProperties()));
        j.put("msg_id", m.getMsgId());
        j.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        return j;
    }

    /** "a.b.c.d:port", or "[v6 address]:port" (Java's uncompressed IPv6 text). */
    static String host(SocketAddress a) {
        InetSocketAddress s = (InetSocketAddress) a;
        InetAddress ip = s.getAddress();
        String text = ip.getHostAddress();
        return (ip instanceof Inet6Address ? "[" + text + "]" : text) + ":" + s.getPort();
    }

    /** A free loopback port p such that p - below is free too (0: just p). */
    static int freePort(int below) throws IOException {
        for (int attempt = 0; attempt < 100; attempt++) {
            int p;
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                p = s.getLocalPort();
            }
            if (below == 0) {
                return p;
            }
            try (ServerSocket s = new ServerSocket(p - below, 1, InetAddress.getLoopbackAddress())) {
                return p;
            } catch (IOException taken) {
                // try another
            }
        }
        throw new IOException("no free port pair found");
    }

    static void setIfPresent(Object target, String setter, int value) throws Exception {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(setter) && m.getParameterCount() == 1 && m.getParameterTypes()[0] == int.class) {
                m.invoke(target, value);
            }
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    /** The JSON this program prints: maps, strings, numbers, booleans and null. */
    static final class Json {
        static String write(Object o) {
            StringBuilder b = new StringBuilder();
            write(b, o);
            return b.toString();
        }

        static void write(StringBuilder b, Object o) {
            if (o == null) {
                b.append("null");
            } else if (o instanceof Map) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    string(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (o instanceof Number || o instanceof Boolean) {
                b.append(o);
            } else {
                string(b, o.toString());
            }
        }

        static void string(StringBuilder b, String s) {
            b.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                if (c == '"' || c == '\\') {
                    b.append('\\').append(c);
                } else if (c < 0x20 || c == 0x7f) {
                    b.append(String.format("\\u%04x", (int) c));
                } else {
                    b.append(c);
                }
            }
            b.append('"');
        }
    }
}
