import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;

import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.List;

/**
 * In-memory MongoDB wire server for the test harness (run with the JDK's single-file launcher).
 *
 * - Reports wire version 21 ("7.0.0"): the Node driver 7 refuses the library default (8).
 * - One boss and ONE worker netty thread: every command of every connection runs sequentially,
 *   which is what makes findAndModify atomic across connections.
 * - Prints "READY <port>" once listening; exits when stdin closes so the JVM never outlives its parent.
 */
public final class TestMongoServer {
    private static final class Version7 implements MongoVersion {
        @Override
        public List<Integer> getVersionArray() {
            return List.of(7, 0, 0);
        }

        @Override
        public int getWireVersion() {
            return 21;
        }
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        MongoServer server = new MongoServer(new MemoryBackend().version(new Version7()));
        server.bind(new InetSocketAddress("127.0.0.1", port), 1, 1);
        System.out.println("READY " + server.getLocalAddress().getPort());
        System.out.flush();

        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // Drain until the parent closes our stdin (or dies).
        }
        server.shutdownNow();
        System.exit(0);
    }
}
