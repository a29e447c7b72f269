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
import java.util.Properties;
import java.util.concurrent.Callable;
import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * A real RocketMQ name server and broker (the version this jar is built against: 4.9.7 or 5.3.3)
 * in one JVM on loopback, on one store directory; what ServeStore and ProduceStore share.
 *
 * <p>The broker opens STORE as its own (storePathRootDir; the CommitLog in STORE/commitlog unless
 * the settings name other directories), runs its own recovery, and changes it as a broker does.
 * Topics come from its config only (autoCreateTopicEnable false).
 */
final class Loopback {
    static final PrintStream OUT = System.out;
    static final String CLUSTER = "rocketlake-cluster";
    static final String BROKER = "rocketlake-broker";
    static final String SELF_TEST_TOPIC = "SELF_TEST_TOPIC"; // TopicValidator.RMQ_SYS_SELF_TEST_TOPIC
    static final long REGISTRATION_TIMEOUT_NANOS = 60_000_000_000L;

    final NamesrvController namesrv;
    final BrokerController broker;
    final String nsAddr;

    /** Start the name server and initialize (load, not start) a broker on ``store``:
     * ``storeSettings`` are MessageStoreConfig properties (as a broker.conf names them), applied
     * after the harness's defaults. */
    Loopback(String store, MessageStoreConfig sc, Properties storeSettings) throws Exception {
        // the broker's startup class sets it; without it routes are served only after ~10 s
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        NettyServerConfig nsNet = new NettyServerConfig();
        nsNet.setListenPort(freePort(0));
        namesrv = new NamesrvController(new NamesrvConfig(), nsNet);
        check(namesrv.initialize(), "name server initialize() failed");
        namesrv.start();
        nsAddr = "127.0.0.1:" + nsNet.getListenPort();

        int port = freePort(2); // the broker also listens on port - 2 (its VIP channel)
        BrokerConfig bc = new BrokerConfig();
        bc.setBrokerClusterName(CLUSTER);
        bc.setBrokerName(BROKER);
        bc.setBrokerIP1("127.0.0.1");
        bc.setNamesrvAddr(nsAddr);
        bc.setAutoCreateTopicEnable(false); // topics come from the broker's config only
        setIfPresent(bc, "setListenPort", port); // 5.x keeps the port in BrokerConfig too
        NettyServerConfig brokerNet = new NettyServerConfig();
        brokerNet.setListenPort(port);
        sc.setStorePathRootDir(store);
        sc.setStorePathCommitLog(store + File.separator + "commitlog");
        sc.setHaListenPort(0);           // no fixed HA port: any free one
        sc.setDiskMaxUsedSpaceRatio(95);
        sc.setFileReservedTime(1_000_000); // hours: never deletes a file it did not write
        MixAll.properties2Object(storeSettings, sc);
        for (String name : storeSettings.stringPropertyNames()) {
            check(hasSetter(sc, name), "MessageStoreConfig of this version has no setting " + name);
        }
        broker = new BrokerController(bc, brokerNet, new NettyClientConfig(), sc);
        check(broker.initialize(), store + ": broker initialize() failed (its store did not load; see log)");
    }

    void start() throws Exception {
        broker.start();
    }

    /** Shut the broker down cleanly (flush, checkpoint, abort removed) and the name server. */
    void shutdown() throws InterruptedException {
        // side by side: each waits ~3 s per Netty event thread it stops
        Thread ns = new Thread(namesrv::shutdown, "namesrv-shutdown");
        ns.start();
        broker.shutdown();
        ns.join();
    }

    /** Run ``body`` as a harness main: stdout carries the JSON lines only (everything else goes
     * to stderr); exit status 0, or 1 with the reason on stderr. */
    static void main(String[] args, MainBody body) {
        System.setOut(System.err);
        // before any RocketMQ class reads them
        System.setProperty("tls.server.mode", "disabled"); // no self-signed certificate (~2 s)
        System.setProperty("rocketmq.client.logUseSlf4j", "true"); // client log to stderr too
        // the store refuses puts and cleans forcibly on a disk fuller than 0.90 / 0.85
        System.setProperty("rocketmq.broker.diskSpaceWarningLevelRatio", "0.99");
        System.setProperty("rocketmq.broker.diskSpaceCleanForciblyRatio", "0.99");
        int status = 0;
        try {
            body.run(args);
        } catch (Throwable e) {
            e.printStackTrace();
            status = 1;
        }
        OUT.flush();
        System.exit(status); // RocketMQ leaves non-daemon threads behind, even after shutdown
    }

    interface MainBody {
        void run(String[] args) throws Exception;
    }

    /** Wait until ``routeOfSelfTestTopic`` answers: the name server routes SELF_TEST_TOPIC, which
     * every broker declares itself, so the broker has registered its topics (5.x registers after
     * start() returns). */
    static void awaitRegistration(Callable<?> routeOfSelfTestTopic) throws Exception {
        long deadline = System.nanoTime() + REGISTRATION_TIMEOUT_NANOS;
        while (true) {
            try {
                routeOfSelfTestTopic.call();
                return;
            } catch (MQClientException notYet) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the broker did not register with the name server", notYet);
                }
                Thread.sleep(50);
            }
        }
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

    /** True when ``target`` has a one-argument setter for property ``name`` (properties2Object
     * skips unknown names silently; a setting this version lacks must not pass unnoticed). */
    static boolean hasSetter(Object target, String name) {
        String setter = "set" + Character.toUpperCase(name.charAt(0)) + name.substring(1);
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(setter) && m.getParameterCount() == 1) {
                return true;
            }
        }
        return false;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }
}
