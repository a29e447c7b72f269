package rocketlake.broker;

import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * A real RocketMQ name server and broker in one JVM on loopback (Loopback), serving the store
 * STORE, and a real client that pulls every message of every queue of the given topics from
 * offset 0.
 *
 * <pre>
 * ServeStore STORE TOPIC... [--commitlog-size B] [--cq-size B] [--index-slots S] [--index-entries E]
 * </pre>
 *
 * The queues pulled are those the name server's route lists (readQueueNums of config/topics.json).
 *
 * <p>stdout: one JSON line per message ({"kind": "message", ...}, in topic, queue, offset order),
 * then {"kind": "done", ...} with the message count and times in seconds (startup: from main()
 * until the name server routes the broker's topics; pull; shutdown). Exit status 1 on any failure
 * (a topic the broker does not serve included), with the reason on stderr.
 */
public final class ServeStore {
    static final String GROUP = "rocketlake_serve_store";
    static final int BATCH = 32;

    public static void main(String[] args) {
        Loopback.main(args, ServeStore::run);
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
        Loopback loop = new Loopback(store, sc, new Properties());
        loop.start();
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(GROUP);
        consumer.setNamesrvAddr(loop.nsAddr);
        consumer.setInstanceName("serve-store-" + ProcessHandle.current().pid());
        consumer.start();
        long served = 0;
        double startup = 0;
        long t1 = System.nanoTime();
        double pull;
        long t2;
        try {
            Loopback.awaitRegistration(() -> consumer.fetchSubscribeMessageQueues(Loopback.SELF_TEST_TOPIC));
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
            loop.shutdown();
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("kind", "done");
        done.put("version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        done.put("messages", served);
        done.put("startup_seconds", startup);
        done.put("pull_seconds", pull);
        done.put("shutdown_seconds", (System.nanoTime() - t2) / 1e9);
        Loopback.OUT.println(Json.write(done));
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
                Loopback.OUT.println(Json.write(message(m)));
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
        j.put("born_host", Loopback.host(m.getBornHost()));
        j.put("store_timestamp", m.getStoreTimestamp());
        j.put("store_host", Loopback.host(m.getStoreHost()));
        j.put("body_b64", Base64.getEncoder().encodeToString(m.getBody()));
        j.put("tags", m.getTags());
        j.put("keys", m.getKeys());
        j.put("properties", new TreeMap<>(m.getProperties()));
        j.put("msg_id", m.getMsgId());
        j.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        return j;
    }
}
