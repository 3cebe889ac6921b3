// StrataSecurityCheck drives the Apache Kafka Java client over SASL_SSL
// for broker's TestJavaSASLSSL. Every mode prints one line on stdout:
//
//   java StrataSecurityCheck roundtrip BOOTSTRAP CAFILE MECHANISM USER PASSWORD TOPIC
//       produce 10 records, read them back: "roundtrip 10"
//   java StrataSecurityCheck auth BOOTSTRAP CAFILE MECHANISM USER PASSWORD
//       list topics: "listed" or "auth-error EXCEPTION"
//   java StrataSecurityCheck read BOOTSTRAP CAFILE MECHANISM USER PASSWORD TOPIC
//       read partition 0 from the start: "read N" or "read-error EXCEPTION records=N"
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class StrataSecurityCheck {
    static Properties props(String bootstrap, String ca, String mech, String user, String pass) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_SSL");
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", ca);
        p.put("sasl.mechanism", mech);
        String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                                             : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + pass + "\";");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        p.put("max.block.ms", "20000");
        return p;
    }

    static Throwable root(Throwable t) {
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Properties p = props(args[1], args[2], args[3], args[4], args[5]);
        switch (mode) {
        case "roundtrip": {
            String topic = args[6];
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                for (int i = 0; i < 10; i++) {
                    pr.send(new ProducerRecord<>(topic, "k", "v" + i)).get();
                }
            }
            System.out.println("roundtrip " + read(p, topic));
            break;
        }
        case "auth":
            try (Admin a = Admin.create(p)) {
                a.listTopics().names().get();
                System.out.println("listed");
            } catch (Exception e) {
                System.out.println("auth-error " + root(e).getClass().getSimpleName());
            }
            break;
        case "read":
            try {
                System.out.println("read " + read(p, args[6]));
            } catch (Exception e) {
                System.out.println("read-error " + root(e).getClass().getSimpleName() + " records=0");
            }
            break;
        default:
            throw new IllegalArgumentException(mode);
        }
    }

    // read returns the records of partition 0 of topic, polling until it
    // has 10 or for 20 s.
    static int read(Properties p, String topic) {
        int got = 0;
        long deadline = System.currentTimeMillis() + 20_000;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            while (got < 10 && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                got += rs.count();
            }
        }
        return got;
    }
}
