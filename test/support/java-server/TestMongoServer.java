import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;

import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.Collection;
import java.util.List;

/**
 * In-memory MongoDB wire server for the test harness (run with the JDK's single-file launcher).
 *
 * - Reports wire version 21 ("7.0.0"): the Node driver 7 refuses the library default (8).
 * - One boss and ONE worker netty thread: every command of every connection runs sequentially,
 *   which is what makes findAndModify atomic across connections.
 * - Looks a query up by its `_id` index when it names `_id` beside other fields (`IdLookupCollection`).
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

    /**
     * mongo-java-server uses an index only when a query names exactly that index's fields, so an owner-fenced update
     * (`{ _id, lockedBy, status }`) scanned the whole collection: O(rows) per update, where a real mongod does a point
     * lookup on `_id` and filters the one row. That cost, not round trips, bounded every throughput figure measured
     * here (77% of the server's CPU samples in a batched run). This looks such a query up by `_id` first and matches
     * the whole query on what it finds, as mongod does, but only for the shapes the library sends: `_id` equal to an
     * ObjectId or a string, or `$in` of those, and no `$natural` sort. Anything else (a regex inside `$in`, numbers,
     * documents) takes the scan as before, since the index's own lookup is not a superset of the matches there.
     * Without a sort, rows come back in `_id` order (as from mongod's `_id` index), not in insertion order.
     */
    private static final class IdLookupCollection extends MemoryCollection {
        IdLookupCollection(MongoDatabase database, String name, CollectionOptions options, CursorRegistry cursors) {
            super(database, name, options, cursors);
        }

        @Override
        protected QueryResult queryDocuments(
                Document query, Document orderBy, int skip, int limit, int batchSize, Document projection) {
            if (query.size() > 1 && isPointLookup(query.get("_id")) && !hasNaturalOrder(orderBy)) {
                Document byId = new Document("_id", query.get("_id"));
                for (Index<Integer> index : getIndexes()) {
                    boolean idIndex = index.getKeys().size() == 1 && "_id".equals(index.getKeys().get(0).getKey());
                    if (idIndex && index.canHandle(byId)) {
                        return matchDocuments(query, index.getPositions(byId), orderBy, skip, limit, batchSize, projection);
                    }
                }
            }
            return super.queryDocuments(query, orderBy, skip, limit, batchSize, projection);
        }

        /** An ObjectId or a string, or `{ $in: [...] }` of only those. */
        private static boolean isPointLookup(Object id) {
            if (isPlainId(id)) return true;
            if (!(id instanceof Document)) return false;
            Document operators = (Document) id;
            Object in = operators.get("$in");
            return operators.size() == 1
                    && in instanceof Collection
                    && ((Collection<?>) in).stream().allMatch(IdLookupCollection::isPlainId);
        }

        private static boolean isPlainId(Object id) {
            return id instanceof ObjectId || id instanceof String;
        }

        private static boolean hasNaturalOrder(Document orderBy) {
            return orderBy != null && orderBy.containsKey("$natural");
        }
    }

    private static final class IdLookupDatabase extends MemoryDatabase {
        IdLookupDatabase(String name, CursorRegistry cursors) {
            super(name, cursors);
        }

        @Override
        protected MemoryCollection openOrCreateCollection(String name, CollectionOptions options) {
            return new IdLookupCollection(this, name, options, cursorRegistry);
        }
    }

    private static final class IdLookupBackend extends MemoryBackend {
        @Override
        public MemoryDatabase openOrCreateDatabase(String name) {
            return new IdLookupDatabase(name, getCursorRegistry());
        }
    }

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        MongoServer server = new MongoServer(new IdLookupBackend().version(new Version7()));
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
