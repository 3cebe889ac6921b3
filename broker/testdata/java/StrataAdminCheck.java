// StrataAdminCheck drives the Apache Kafka Java client's Admin and a
// transactional producer against a Strata broker for broker's
// TestJavaAdmin and TestJavaTransactionsRefused. It prints one line per step
// on stdout and exits non-zero on the first failure.
//
//   java StrataAdminCheck admin BOOTSTRAP PREFIX
//   java StrataAdminCheck txn BOOTSTRAP TOPIC
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringSerializer;

public class StrataAdminCheck {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin" -> admin(args[1], args[2]);
            case "txn" -> txn(args[1], args[2]);
            default -> throw new IllegalArgumentException("mode " + args[0]);
        }
    }

    static void admin(String bootstrap, String prefix) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        String a = prefix + "-a", b = prefix + "-b";
        try (Admin admin = Admin.create(p)) {
            NewTopic ta = new NewTopic(a, 3, (short) 1);
            NewTopic tb = new NewTopic(b, Optional.empty(), Optional.empty())
                .configs(Map.of("retention.ms", "3600000"));
            CreateTopicsResult cr = admin.createTopics(List.of(ta, tb));
            cr.all().get();
            System.out.println("created " + a + " " + cr.numPartitions(a).get() + " " + b + " " + cr.numPartitions(b).get());
            Config cb = cr.config(b).get();
            System.out.println("created-config " + b + " retention.ms=" + cb.get("retention.ms").value());

            TreeSet<String> names = new TreeSet<>(admin.listTopics().names().get());
            names.removeIf(n -> !n.startsWith(prefix));
            System.out.println("listed " + String.join(",", names));

            Map<String, TopicDescription> ds = admin.describeTopics(List.of(a, b)).allTopicNames().get();
            for (String n : new TreeSet<>(ds.keySet())) {
                TopicDescription d = ds.get(n);
                List<String> ps = new ArrayList<>();
                for (TopicPartitionInfo pi : d.partitions()) {
                    ps.add(pi.partition() + ":" + (pi.leader() == null ? "none" : pi.leader().id()));
                }
                System.out.println("described " + n + " " + d.partitions().size() + " " + String.join(",", ps));
            }

            admin.deleteTopics(List.of(a)).all().get();
            names = new TreeSet<>(admin.listTopics().names().get());
            names.removeIf(n -> !n.startsWith(prefix));
            System.out.println("deleted " + a + " listed " + String.join(",", names));

            try {
                admin.createTopics(List.of(new NewTopic(b, 1, (short) 1))).all().get();
                System.out.println("recreated " + b + " without an error");
            } catch (ExecutionException e) {
                System.out.println("create-existing " + e.getCause().getClass().getSimpleName());
            }
        }
    }

    // txn: a transactional producer's initTransactions must fail at once
    // (the broker has no transaction coordinator), not after max.block.ms.
    static void txn(String bootstrap, String topic) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", "strata-java-txn");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long start = System.nanoTime();
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            pr.initTransactions();
            pr.beginTransaction();
            pr.send(new ProducerRecord<>(topic, "k", "v"));
            pr.commitTransaction();
            System.out.println("txn-committed");
        } catch (Exception e) {
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.println("txn-error " + e.getClass().getSimpleName() + " " + ms + "ms " + e.getMessage());
        }
    }
}
