// StrataClientCheck drives the Apache Kafka Java client against a Strata
// broker for broker's TestJavaClient: a producer with default settings
// (idempotence on, acks=all) sends N records, then a consumer group reads
// them and prints "partition offset value" per record on stdout.
//
//   java StrataClientCheck BOOTSTRAP TOPIC N GROUP
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class StrataClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[3];
        int n = Integer.parseInt(args[2]);

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, "k" + i, String.format("java-%06d", i))));
            }
            for (Future<RecordMetadata> f : fs) {
                f.get();
            }
        }
        System.err.println("produced " + n);

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        int got = 0;
        long deadline = System.currentTimeMillis() + 120_000;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            while (got < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : rs) {
                    System.out.println(r.partition() + " " + r.offset() + " " + r.value());
                    got++;
                }
                if (!rs.isEmpty()) {
                    c.commitSync();
                }
            }
        }
        System.err.println("consumed " + got);
    }
}
