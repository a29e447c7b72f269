package rocketlake.broker;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.store.MessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * A real RocketMQ name server and broker in one JVM on loopback (Loopback) on the store STORE
 * (empty or existing), and real clients that write to it: what a broker of this version writes,
 * for rocketlake to read.
 *
 * <pre>
 * ProduceStore STORE [--set NAME=VALUE]... STEP...
 *   --set NAME=VALUE          a MessageStoreConfig setting, as broker.conf names it (storeType,
 *                             timerWheelEnable, enabledAppendPropCRC, storePathCommitLog with
 *                             directories separated by ',', readOnlyCommitLogStorePaths, sizes)
 *   --topic NAME QUEUES ATTRS declare a topic (before the broker starts); ATTRS "-" for none, or
 *                             5.x attributes as mqadmin takes them: +queue.type=BatchCQ,+cleanup.policy=COMPACTION
 * steps, run in order once the broker serves:
 *   --send TOPIC N            N single messages, message i to queue i % queues
 *   --batch TOPIC N           one batch of N messages to queue 0
 *   --delay TOPIC LEVEL       one message with delay level LEVEL (waited for: use a short level)
 *   --timer TOPIC DELTA_MS    one timer message delivered at now + DELTA_MS (5.x); past ones are
 *                             waited for, future ones stay pending in the timer wheel
 *   --transaction TOPIC commit|rollback
 *                             one transaction message; the local transaction commits or rolls back
 *   --keyed TOPIC KEY N       N messages with key KEY (a compaction topic keeps the last)
 *   --consume GROUP TOPIC     a push consumer of GROUP consumes all TOPIC holds now and commits
 * </pre>
 *
 * Message i of a step has tags "tag" + i % 3, keys "key-TOPIC-S-i" (S: the step's number; --keyed:
 * KEY) and body "TOPIC step S message i".
 *
 * <p>stdout, JSON lines: {"kind": "sent", ...} per message sent (topic, queue_id, queue_offset
 * where the send result tells it: null for delay, timer and transaction messages, which the broker
 * stores elsewhere first; msg_id, keys, tags, body_b64, delay_level, deliver_ms, transaction);
 * then, read in-process once every expected message reached its topic, {"kind": "queue", ...} per
 * queue of each declared topic (min and max offset in the store), {"kind": "progress", ...} per
 * group/topic/queue of the broker's ConsumerOffsetManager (committed, and the queue's max offset);
 * then {"kind": "done", ...} with counts and times; the broker is shut down cleanly.
 */
public final class ProduceStore {
    static final String PRODUCER_GROUP = "rocketlake_produce";
    static final String TX_PRODUCER_GROUP = "rocketlake_produce_tx";
    static final long SETTLE_TIMEOUT_NANOS = 40_000_000_000L;

    final Loopback loop;
    final Map<String, Integer> queues = new LinkedHashMap<>();
    /** messages each topic must hold before the store is read (what was sent and not pending) */
    final Map<String, Long> expected = new LinkedHashMap<>();
    DefaultMQProducer producer;
    TransactionMQProducer txProducer;
    long sent;

    ProduceStore(Loopback loop) {
        this.loop = loop;
    }

    public static void main(String[] args) {
        Loopback.main(args, ProduceStore::run);
    }

    static void run(String[] args) throws Exception {
        long t0 = System.nanoTime();
        String store = null;
        Properties settings = new Properties();
        List<String[]> topics = new ArrayList<>();
        List<String[]> steps = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--set": {
                    String[] kv = args[++i].split("=", 2);
                    Loopback.check(kv.length == 2, "--set takes NAME=VALUE, not " + args[i]);
                    settings.setProperty(kv[0], kv[1]);
                    break;
                }
                case "--topic": topics.add(new String[] {args[++i], args[++i], args[++i]}); break;
                case "--send": case "--batch": case "--delay": case "--timer": case "--transaction":
                case "--consume":
                    steps.add(new String[] {a, args[++i], args[++i]});
                    break;
                case "--keyed": steps.add(new String[] {a, args[++i], args[++i], args[++i]}); break;
                default:
                    Loopback.check(!a.startsWith("--") && store == null, "unexpected argument " + a);
                    store = a;
            }
        }
        Loopback.check(store != null, "usage: ProduceStore STORE [--set NAME=VALUE]... STEP...");
        ProduceStore p = new ProduceStore(new Loopback(store, new MessageStoreConfig(), settings));
        for (String[] t : topics) {
            p.declare(t[0], Integer.parseInt(t[1]), t[2]);
        }
        p.loop.start();
        double startup = 0;
        double produce = 0;
        long t2;
        try {
            p.startClients();
            startup = (System.nanoTime() - t0) / 1e9;
            long t1 = System.nanoTime();
            for (int s = 0; s < steps.size(); s++) {
                p.step(s, steps.get(s));
            }
            p.settle();
            produce = (System.nanoTime() - t1) / 1e9;
            p.printQueues();
            p.printProgress();
        } finally {
            t2 = System.nanoTime();
            p.stopClients();
            p.loop.shutdown();
        }
        Map<String, Object> done = new LinkedHashMap<>();
        done.put("kind", "done");
        done.put("version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        done.put("sent", p.sent);
        done.put("startup_seconds", startup);
        done.put("produce_seconds", produce);
        done.put("shutdown_seconds", (System.nanoTime() - t2) / 1e9);
        Loopback.OUT.println(Json.write(done));
    }

    /** Declare ``topic`` in the broker's config as the admin command does (5.x validates the
     * attributes against TopicAttributes). */
    void declare(String topic, int queueNums, String attributes) throws Exception {
        TopicConfig tc = new TopicConfig(topic, queueNums, queueNums, PermName.PERM_READ | PermName.PERM_WRITE);
        if (!attributes.equals("-")) {
            Class<?> parser;
            try {
                parser = Class.forName("org.apache.rocketmq.common.attribute.AttributeParser");
            } catch (ClassNotFoundException e) {
                throw new IllegalArgumentException("topic attributes need a 5.x broker: " + attributes, e);
            }
            Object map = parser.getMethod("parseToMap", String.class).invoke(null, attributes);
            tc.getClass().getMethod("setAttributes", Map.class).invoke(tc, map);
        }
        loop.broker.getTopicConfigManager().updateTopicConfig(tc);
        queues.put(topic, queueNums);
        expected.put(topic, 0L);
    }

    void startClients() throws Exception {
        String instance = "produce-store-" + ProcessHandle.current().pid();
        producer = new DefaultMQProducer(PRODUCER_GROUP);
        producer.setNamesrvAddr(loop.nsAddr);
        producer.setInstanceName(instance);
        producer.start();
        txProducer = new TransactionMQProducer(TX_PRODUCER_GROUP);
        txProducer.setNamesrvAddr(loop.nsAddr);
        txProducer.setInstanceName(instance + "-tx");
        txProducer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "commit".equals(arg) ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return "commit".equals(msg.getUserProperty("outcome"))
                        ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        txProducer.start();
        Loopback.awaitRegistration(() -> producer.fetchPublishMessageQueues(Loopback.SELF_TEST_TOPIC));
    }

    void stopClients() {
        if (producer != null) {
            producer.shutdown();
        }
        if (txProducer != null) {
            txProducer.shutdown();
        }
    }

    void step(int s, String[] step) throws Exception {
        String topic = step[0].equals("--consume") ? step[2] : step[1];
        Loopback.check(queues.containsKey(topic), step[0] + ": topic " + topic + " is not declared (--topic)");
        switch (step[0]) {
            case "--send": {
                List<MessageQueue> mqs = publishQueues(topic);
                int n = Integer.parseInt(step[2]);
                for (int i = 0; i < n; i++) {
                    Message m = message(topic, s, i, null);
                    SendResult r = producer.send(m, mqs.get(i % mqs.size()));
                    sent(m, r, r.getQueueOffset(), r.getMsgId(), null);
                }
                arrive(topic, n);
                break;
            }
            case "--batch": {
                int n = Integer.parseInt(step[2]);
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    batch.add(message(topic, s, i, null));
                }
                SendResult r = producer.send(batch, publishQueues(topic).get(0));
                String[] ids = r.getMsgId().split(",");
                for (int i = 0; i < n; i++) {
                    // one id per member; 5.x answers a BatchCQ topic's inner batch with the batch's one id
                    sent(batch.get(i), r, r.getQueueOffset() + i, ids.length == n ? ids[i] : r.getMsgId(), null);
                }
                arrive(topic, n);
                break;
            }
            case "--delay": {
                Message m = message(topic, s, 0, null);
                m.setDelayTimeLevel(Integer.parseInt(step[2]));
                sent(m, check(producer.send(m)), null, null, null);
                arrive(topic, 1);
                break;
            }
            case "--timer": {
                long delta = Long.parseLong(step[2]);
                Message m = message(topic, s, 0, null);
                Method setter;
                try {
                    setter = Message.class.getMethod("setDeliverTimeMs", long.class);
                } catch (NoSuchMethodException e) {
                    throw new IllegalArgumentException("timer messages need a 5.x client and broker", e);
                }
                setter.invoke(m, System.currentTimeMillis() + delta);
                sent(m, check(producer.send(m)), null, null, null);
                arrive(topic, delta <= 0 ? 1 : 0);
                break;
            }
            case "--transaction": {
                String outcome = step[2];
                Loopback.check(outcome.equals("commit") || outcome.equals("rollback"),
                        "--transaction takes commit or rollback, not " + outcome);
                Message m = message(topic, s, 0, null);
                m.putUserProperty("outcome", outcome);
                SendResult r = check(txProducer.sendMessageInTransaction(m, outcome));
                sent(m, r, null, null, outcome);
                arrive(topic, outcome.equals("commit") ? 1 : 0);
                break;
            }
            case "--keyed": {
                List<MessageQueue> mqs = publishQueues(topic);
                int n = Integer.parseInt(step[3]);
                for (int i = 0; i < n; i++) {
                    Message m = message(topic, s, i, step[2]);
                    SendResult r = producer.send(m, mqs.get(0));
                    sent(m, r, r.getQueueOffset(), r.getMsgId(), null);
                }
                arrive(topic, n);
                break;
            }
            case "--consume":
                consume(step[1], topic);
                break;
            default:
                throw new IllegalArgumentException("unknown step " + step[0]);
        }
    }

    List<MessageQueue> publishQueues(String topic) throws Exception {
        List<MessageQueue> mqs = new ArrayList<>(producer.fetchPublishMessageQueues(topic));
        mqs.sort(Comparator.comparingInt(MessageQueue::getQueueId));
        return mqs;
    }

    static Message message(String topic, int step, int i, String key) {
        String body = topic + " step " + step + " message " + i;
        return new Message(topic, "tag" + i % 3, key != null ? key : "key-" + topic + "-" + step + "-" + i,
                body.getBytes(StandardCharsets.UTF_8));
    }

    static SendResult check(SendResult r) {
        Loopback.check(r.getSendStatus() == SendStatus.SEND_OK, "send failed: " + r);
        return r;
    }

    void sent(Message m, SendResult r, Long queueOffset, String msgId, String transaction) {
        check(r);
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("kind", "sent");
        j.put("topic", m.getTopic());
        j.put("queue_id", r.getMessageQueue().getQueueId());
        j.put("queue_offset", queueOffset);
        j.put("msg_id", msgId != null ? msgId : r.getMsgId());
        j.put("offset_msg_id", r.getOffsetMsgId());
        j.put("keys", m.getKeys());
        j.put("tags", m.getTags());
        j.put("body_b64", Base64.getEncoder().encodeToString(m.getBody()));
        j.put("properties", new TreeMap<>(m.getProperties()));
        j.put("delay_level", m.getDelayTimeLevel() > 0 ? m.getDelayTimeLevel() : null);
        String deliver = m.getProperty("TIMER_DELIVER_MS"); // MessageConst.PROPERTY_TIMER_DELIVER_MS (5.x)
        j.put("deliver_ms", deliver != null ? Long.parseLong(deliver) : null);
        j.put("transaction", transaction);
        Loopback.OUT.println(Json.write(j));
        sent++;
    }

    void arrive(String topic, long n) {
        expected.merge(topic, n, Long::sum);
    }

    /** The messages ``topic`` holds now: the sum over its queues of max - min offset. */
    long held(String topic) throws Exception {
        MessageStore ms = loop.broker.getMessageStore();
        long n = 0;
        for (int q = 0; q < queues.get(topic); q++) {
            n += ms.getMaxOffsetInQueue(topic, q) - ms.getMinOffsetInQueue(topic, q);
        }
        return n;
    }

    /** Wait until every declared topic holds what it is expected to (delay messages and past
     * timers delivered, commits applied) and the store has dispatched every record. */
    void settle() throws Exception {
        long deadline = System.nanoTime() + SETTLE_TIMEOUT_NANOS;
        while (true) {
            List<String> short_ = new ArrayList<>();
            for (Map.Entry<String, Long> e : expected.entrySet()) {
                if (held(e.getKey()) < e.getValue()) {
                    short_.add(e.getKey() + " holds " + held(e.getKey()) + " of " + e.getValue());
                }
            }
            if (short_.isEmpty() && loop.broker.getMessageStore().dispatchBehindBytes() == 0) {
                return;
            }
            Loopback.check(System.nanoTime() < deadline, "messages did not arrive: " + short_);
            Thread.sleep(50);
        }
    }

    /** A push consumer of ``group`` consumes all ``topic`` holds now; returns once the broker
     * has its committed offsets (each queue's max offset). */
    void consume(String group, String topic) throws Exception {
        settle();
        long want = held(topic);
        AtomicLong consumed = new AtomicLong();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(loop.nsAddr);
        consumer.setInstanceName("produce-store-" + group + "-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(100);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        MessageStore ms = loop.broker.getMessageStore();
        long deadline = System.nanoTime() + SETTLE_TIMEOUT_NANOS;
        try {
            while (true) {
                boolean committed = consumed.get() >= want;
                for (int q = 0; q < queues.get(topic) && committed; q++) {
                    long c = loop.broker.getConsumerOffsetManager().queryOffset(group, topic, q);
                    committed = c == ms.getMaxOffsetInQueue(topic, q);
                }
                if (committed) {
                    return;
                }
                Loopback.check(System.nanoTime() < deadline,
                        group + " consumed " + consumed.get() + " of " + want + " messages of " + topic
                        + " or did not commit them");
                Thread.sleep(50);
            }
        } finally {
            consumer.shutdown();
        }
    }

    void printQueues() throws Exception {
        MessageStore ms = loop.broker.getMessageStore();
        for (Map.Entry<String, Integer> t : queues.entrySet()) {
            for (int q = 0; q < t.getValue(); q++) {
                Map<String, Object> j = new LinkedHashMap<>();
                j.put("kind", "queue");
                j.put("topic", t.getKey());
                j.put("queue_id", q);
                j.put("min_offset", ms.getMinOffsetInQueue(t.getKey(), q));
                j.put("max_offset", ms.getMaxOffsetInQueue(t.getKey(), q));
                Loopback.OUT.println(Json.write(j));
            }
        }
    }

    /** The broker's own consumer progress: every group/topic/queue its ConsumerOffsetManager
     * holds, with the queue's max offset in the store. */
    void printProgress() throws Exception {
        MessageStore ms = loop.broker.getMessageStore();
        Map<String, ? extends Map<Integer, Long>> table = new TreeMap<>(loop.broker.getConsumerOffsetManager().getOffsetTable());
        for (Map.Entry<String, ? extends Map<Integer, Long>> e : table.entrySet()) {
            String[] topicAtGroup = e.getKey().split("@", 2); // ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR
            for (Map.Entry<Integer, Long> q : new TreeMap<>(e.getValue()).entrySet()) {
                Map<String, Object> j = new LinkedHashMap<>();
                j.put("kind", "progress");
                j.put("group", topicAtGroup[1]);
                j.put("topic", topicAtGroup[0]);
                j.put("queue_id", q.getKey());
                j.put("committed", q.getValue());
                j.put("max_offset", ms.getMaxOffsetInQueue(topicAtGroup[0], q.getKey()));
                Loopback.OUT.println(Json.write(j));
            }
        }
    }
}
