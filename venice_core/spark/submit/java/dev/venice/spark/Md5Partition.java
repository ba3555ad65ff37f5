package dev.venice.spark;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Venice's default partitioner (venice_core/protocol/partitioner.py) as a Spark SQL function: the MD5 digest of the
 * serialised key, a big-endian unsigned 128-bit integer, modulo the partition count. Taken 32 bits at a time
 * (Horner's rule), so each step stays below 2^63. The push job partitions its records with it in the JVM, before
 * the shuffle, where SQL's own functions (md5 as hex, conv, four casts) cost several microseconds a row.
 */
public final class Md5Partition implements UDF2<byte[], Integer, Integer> {
  private static final ThreadLocal<MessageDigest> MD5 =
      ThreadLocal.withInitial(
          () -> {
            try {
              return MessageDigest.getInstance("MD5");
            } catch (NoSuchAlgorithmException e) {
              throw new IllegalStateException(e);
            }
          });

  @Override
  public Integer call(byte[] key, Integer partitions) {
    if (key == null || partitions == null) {
      return null;
    }
    byte[] digest = MD5.get().digest(key);
    long count = partitions;
    long remainder = 0;
    for (int i = 0; i < 16; i += 4) {
      long word =
          ((digest[i] & 0xffL) << 24)
              | ((digest[i + 1] & 0xffL) << 16)
              | ((digest[i + 2] & 0xffL) << 8)
              | (digest[i + 3] & 0xffL);
      remainder = ((remainder << 32) + word) % count;
    }
    return (int) remainder;
  }
}
