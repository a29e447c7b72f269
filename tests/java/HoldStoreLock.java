// Takes the lock a RocketMQ broker takes on its store (DefaultMessageStore.start:
// FileChannel.tryLock(0, 1, false) on <store>/lock), prints LOCKED, holds it until stdin closes.
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;

public class HoldStoreLock {
    public static void main(String[] args) throws Exception {
        try (RandomAccessFile file = new RandomAccessFile(args[0], "rw");
             FileChannel channel = file.getChannel()) {
            FileLock lock = channel.tryLock(0, 1, false);
            System.out.println(lock != null ? "LOCKED" : "BUSY");
            System.out.flush();
            System.in.read();
        }
    }
}
