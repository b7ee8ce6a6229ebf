/*
 * A Delta log store whose commit of version N is a put-if-absent of N.json: S3's conditional
 * write (If-None-Match: *), which Hadoop's S3A sends when a create asks for
 * fs.option.create.conditional.overwrite (Hadoop 3.4.2 and later). Of two drivers committing the
 * same version, the store accepts one object and answers 412 to the other, which Delta receives as
 * FileAlreadyExistsException: it checks the winner's commit for conflicts and commits as the next
 * version. Reads and listings are Hadoop's, as in every log store of Delta's.
 */
package lakemerge.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
    /** The create option asking the store to refuse an object that exists. */
    public static final String CONDITIONAL = "fs.option.create.conditional.overwrite";

    public ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(overwrite);
        if (!overwrite) {
            builder.must(CONDITIONAL, true);
        }
        try (FSDataOutputStream out = builder.build()) {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            throw taken(path, e);
        } catch (IOException e) {
            if (!overwrite && refused(e)) {
                throw taken(path, e);
            }
            throw e;
        }
    }

    /** Whether the store refused the put because the object exists (HTTP 412). */
    private static boolean refused(Throwable e) {
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            String name = cause.getClass().getSimpleName();
            String text = String.valueOf(cause.getMessage());
            if (name.equals("RemoteFileChangedException") || text.contains("Status Code: 412")
                    || text.contains("PreconditionFailed")) {
                return true;
            }
        }
        return false;
    }

    private static java.nio.file.FileAlreadyExistsException taken(Path path, Throwable cause) {
        java.nio.file.FileAlreadyExistsException found = new java.nio.file.FileAlreadyExistsException(path.toString());
        found.initCause(cause);
        return found;
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // (an object appears whole when its PUT completes, or not at all)
    }
}
