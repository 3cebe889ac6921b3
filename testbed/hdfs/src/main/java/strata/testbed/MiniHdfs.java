package strata.testbed;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.CountDownLatch;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.SafeModeAction;

/**
 * Runs a real HDFS (one NameNode, one DataNode) with Hadoop's MiniDFSCluster
 * for Strata's tests, until it gets SIGTERM.
 *
 * <p>Usage: {@code MiniHdfs BASE_DIR PORT PORT_FILE format|keep CONTROL_DIR
 * [DATANODE_PORT DATANODE_HOSTNAME]}.
 * PORT 0 picks a free port; "keep" restarts on the existing metadata and
 * blocks of BASE_DIR (same PORT) instead of formatting it. The NameNode port
 * is written to PORT_FILE (atomically) once the cluster is up.
 *
 * <p>Without the last two arguments the DataNode listens on free loopback
 * ports and registers as 127.0.0.1, MiniDFSCluster's default. With them its
 * data transfer port is 127.0.0.1:DATANODE_PORT and it registers with the
 * NameNode under the name DATANODE_HOSTNAME (dfs.datanode.hostname), which
 * is what a client that connects to DataNodes by hostname dials, on
 * DATANODE_PORT: a network fault test puts a proxy there (e.g. on
 * 127.0.0.2:DATANODE_PORT) so that both the NameNode and the DataNode
 * traffic go through it.
 *
 * <p>CONTROL_DIR is polled for a file named "command" holding
 * "stop-datanode", "start-datanode", "enter-safemode" or "leave-safemode";
 * the result is written to "done"
 * (the command, then "ok" or the error), and "command" is removed.
 */
public final class MiniHdfs {
  private MiniHdfs() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 5 && args.length != 7) {
      System.err.println(
          "usage: MiniHdfs BASE_DIR PORT PORT_FILE format|keep CONTROL_DIR [DATANODE_PORT DATANODE_HOSTNAME]");
      System.exit(2);
    }
    File base = new File(args[0]);
    int port = Integer.parseInt(args[1]);
    Path portFile = Path.of(args[2]);
    boolean format = args[3].equals("format");
    Path control = Path.of(args[4]);
    Files.createDirectories(control);

    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getAbsolutePath());
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, 1);
    // Leave safe mode as soon as the blocks are reported after a restart.
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_SAFEMODE_EXTENSION_KEY, 0);
    // Let tests use small block sizes to exercise multi-block files.
    conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, 0);
    // Notice a stopped or restarted DataNode quickly.
    conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_HEARTBEAT_RECHECK_INTERVAL_KEY, 5000);
    conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, true);
    boolean fixedDataNode = args.length == 7;
    if (fixedDataNode) {
      conf.set(DFSConfigKeys.DFS_DATANODE_ADDRESS_KEY, "127.0.0.1:" + Integer.parseInt(args[5]));
      conf.set(DFSConfigKeys.DFS_DATANODE_HOST_NAME_KEY, args[6]);
      // checkDataNodeAddrConfig keeps these too: free loopback ports, as
      // MiniDFSCluster would pick (the defaults are fixed 0.0.0.0 ports).
      conf.set(DFSConfigKeys.DFS_DATANODE_HTTP_ADDRESS_KEY, "127.0.0.1:0");
      conf.set(DFSConfigKeys.DFS_DATANODE_IPC_ADDRESS_KEY, "127.0.0.1:0");
    }

    long t0 = System.nanoTime();
    MiniDFSCluster cluster;
    try {
      cluster = new MiniDFSCluster.Builder(conf, base)
          .numDataNodes(1)
          .nameNodePort(port)
          .format(format)
          .manageNameDfsDirs(true)
          .manageDataDfsDirs(true)
          .checkDataNodeAddrConfig(fixedDataNode)
          .checkDataNodeHostConfig(fixedDataNode)
          .startupOption(format ? null : org.apache.hadoop.hdfs.server.common.HdfsServerConstants.StartupOption.REGULAR)
          .build();
      cluster.waitActive();
      cluster.waitClusterUp();
      // Ready means writable: out of safe mode (after a restart the NameNode
      // stays in it until the DataNode has reported its blocks).
      while (cluster.getNamesystem().isInSafeMode()) {
        Thread.sleep(100);
      }
    } catch (IOException | RuntimeException e) {
      // A half-started cluster keeps the JVM alive: exit, so that up
      // fails at once instead of waiting for a port that never comes.
      System.err.println("minihdfs: start failed");
      e.printStackTrace();
      System.exit(1);
      return;
    }
    int nnPort = cluster.getNameNodePort();
    System.err.printf("minihdfs: up on 127.0.0.1:%d in %d ms (format=%b)%n",
        nnPort, (System.nanoTime() - t0) / 1_000_000, format);
    if (fixedDataNode) {
      System.err.printf("minihdfs: DataNode transfer port 127.0.0.1:%d, registered as %s%n",
          cluster.getDataNodes().get(0).getXferPort(), cluster.getDataNodes().get(0).getDatanodeId().getHostName());
    }

    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      System.err.println("minihdfs: shutting down");
      cluster.shutdown(false);
      stopped.countDown();
    }));

    Path tmp = portFile.resolveSibling(portFile.getFileName() + ".tmp");
    Files.writeString(tmp, Integer.toString(nnPort) + "\n", StandardCharsets.UTF_8);
    Files.move(tmp, portFile, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);

    MiniDFSCluster.DataNodeProperties stoppedDn = null;
    Path command = control.resolve("command");
    while (stopped.getCount() > 0) {
      if (Files.exists(command)) {
        String cmd = Files.readString(command, StandardCharsets.UTF_8).trim();
        Files.delete(command);
        String result;
        try {
          if (cmd.equals("stop-datanode")) {
            if (stoppedDn == null) {
              stoppedDn = cluster.stopDataNode(0);
            }
            result = "ok";
          } else if (cmd.equals("start-datanode")) {
            if (stoppedDn != null) {
              cluster.restartDataNode(stoppedDn, true);
              cluster.waitActive();
              while (cluster.getNamesystem().isInSafeMode()) {
                Thread.sleep(100);
              }
              stoppedDn = null;
            }
            result = "ok";
          } else if (cmd.equals("enter-safemode")) {
            cluster.getNameNodeRpc().setSafeMode(SafeModeAction.SAFEMODE_ENTER, false);
            result = "ok";
          } else if (cmd.equals("leave-safemode")) {
            cluster.getNameNodeRpc().setSafeMode(SafeModeAction.SAFEMODE_LEAVE, false);
            result = "ok";
          } else {
            result = "unknown command";
          }
        } catch (IOException | InterruptedException | RuntimeException e) {
          result = "error: " + e;
        }
        System.err.printf("minihdfs: %s: %s%n", cmd, result);
        Path doneTmp = control.resolve("done.tmp");
        Files.writeString(doneTmp, cmd + "\n" + result + "\n", StandardCharsets.UTF_8);
        Files.move(doneTmp, control.resolve("done"), StandardCopyOption.ATOMIC_MOVE,
            StandardCopyOption.REPLACE_EXISTING);
      }
      Thread.sleep(100);
    }
  }
}
