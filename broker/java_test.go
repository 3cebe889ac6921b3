package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/internal/testcert"
)

// TestJavaClient runs the Apache Kafka Java client (kafka-clients 4.3.1
// from Maven Central, see testdata/java) against the broker: a producer
// with default settings (idempotent, acks=all) and a consumer group.
// It needs java, javac and mvn; the jars are cached in ~/.m2.
func TestJavaClient(t *testing.T) {
	java := javaClient(t)
	st := nfsStore(t, "")
	_, addr := startBroker(t, st, nil)
	cl := newClient(t, addr)
	createTopic(t, cl, "java", 3, nil)
	const n = 2000
	out := java("StrataClientCheck", addr, "java", fmt.Sprint(n), "java-group")
	checkJavaConsumed(t, out, n)
	// The group committed the end of every partition.
	if total := committedSum(t, cl, "java-group"); total != n {
		t.Fatalf("java-group committed offsets sum to %d, want %d", total, n)
	}
}

// checkJavaConsumed checks StrataClientCheck's output: each of the n
// records java-NNNNNN consumed once, at consecutive offsets per partition.
func checkJavaConsumed(t *testing.T, out string, n int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var p, v string
		var off int64
		if _, err := fmt.Sscanf(line, "%s %d %s", &p, &off, &v); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		if seen[v] {
			t.Fatalf("%s consumed twice", v)
		}
		seen[v] = true
		if l, ok := last[p]; ok && off != l+1 {
			t.Fatalf("partition %s: offset %d after %d", p, off, l)
		}
		last[p] = off
	}
	for i := 0; i < n; i++ {
		if v := fmt.Sprintf("java-%06d", i); !seen[v] {
			t.Fatalf("%s produced and acked but not consumed", v)
		}
	}
}

// TestJavaAdmin runs the Java client's Admin: createTopics (one topic with
// a config, whose effective configs the response carries), listTopics,
// describeTopics, deleteTopics, and createTopics of an existing topic.
func TestJavaAdmin(t *testing.T) {
	java := javaClient(t)
	_, addr := startBroker(t, nfsStore(t, ""), nil)
	out := java("StrataAdminCheck", "admin", addr, "jadm")
	want := []string{
		"created jadm-a 3 jadm-b 1",
		"created-config jadm-b retention.ms=3600000",
		"listed jadm-a,jadm-b",
		"described jadm-a 3 0:1,1:1,2:1",
		"described jadm-b 1 0:1",
		"deleted jadm-a listed jadm-b",
		"create-existing TopicExistsException",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, want) {
		t.Fatalf("StrataAdminCheck admin printed\n%s\nwant\n%s", out, strings.Join(want, "\n"))
	}
}

// TestJavaTransactionsRefused: a transactional Java producer's
// initTransactions fails at once with TransactionalIdAuthorizationException
// (the broker has no transaction coordinator), not after max.block.ms (60 s)
// of COORDINATOR_NOT_AVAILABLE retries.
func TestJavaTransactionsRefused(t *testing.T) {
	java := javaClient(t)
	_, addr := startBroker(t, nfsStore(t, ""), nil)
	out := strings.TrimSpace(java("StrataAdminCheck", "txn", addr, "jtxn"))
	var name, took string
	if _, err := fmt.Sscanf(out, "txn-error %s %s", &name, &took); err != nil {
		t.Fatalf("StrataAdminCheck txn printed %q: want a txn-error line", out)
	}
	ms, err := strconv.Atoi(strings.TrimSuffix(took, "ms"))
	if err != nil {
		t.Fatalf("StrataAdminCheck txn printed %q", out)
	}
	if name != "TransactionalIdAuthorizationException" || ms > 20000 {
		t.Fatalf("initTransactions: %s after %d ms (%q); want TransactionalIdAuthorizationException within 20 s", name, ms, out)
	}
	t.Logf("%s", out)
}

// javaClient compiles the Java programs of testdata/java against the Kafka
// client jars (Maven Central, cached in ~/.m2) once per test and returns a
// function that runs one of them with args and returns its stdout. It
// needs java, javac and mvn.
func javaClient(t *testing.T) func(class string, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("Java client: not in -short")
	}
	for _, tool := range []string{"java", "javac", "mvn"} {
		requireTool(t, tool, "JDK 17 and Maven")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	work := t.TempDir()
	files, err := filepath.Glob(filepath.Join("testdata", "java", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, ".java") {
			sources = append(sources, filepath.Base(f))
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = work
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	run("mvn", "-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=lib")
	run("javac", append([]string{"-cp", "lib/*"}, sources...)...)
	return func(class string, args ...string) string {
		t.Helper()
		return run("java", append([]string{"-cp", "lib/*:.", class}, args...)...)
	}
}

// requireTool skips t when tool is not on $PATH, except under the full test
// command (scripts/test-all sets STRATA_FULL_TESTS=1 and installs the
// tools), where a missing tool fails the test: no silent skips in CI.
func requireTool(t *testing.T, tool, install string) {
	t.Helper()
	testbed.SkipShort(t, tool)
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("STRATA_FULL_TESTS") != "" {
			t.Fatalf("%s is not installed (%s) and STRATA_FULL_TESTS is set", tool, install)
		}
		t.Skipf("%s is not installed (%s)", tool, install)
	}
}

// TestJavaSASLSSL runs the Java client over SASL_SSL (PEM truststore):
// with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 it produces and reads back;
// a wrong password fails with SaslAuthenticationException; a principal
// without Read on the topic gets TopicAuthorizationException and no
// records.
func TestJavaSASLSSL(t *testing.T) {
	java := javaClient(t)
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	sec := Security{SASL: SASLConfig{Users: testUsers(t)}, ACL: ACLConfig{Enabled: true, SuperUsers: []string{"User:alice"}}}
	_, addr := secureBroker(t, sec, Listener{SASL: true, TLS: &TLSConfig{CertFile: certFile, KeyFile: keyFile}})
	check := func(want string, args ...string) {
		t.Helper()
		if got := strings.TrimSpace(java("StrataSecurityCheck", args...)); got != want {
			t.Fatalf("StrataSecurityCheck %s printed %q, want %q", strings.Join(args, " "), got, want)
		}
	}
	for _, mech := range []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
		check("roundtrip 10", "roundtrip", addr, ca.File, mech, "alice", "alice-secret", "java-"+strings.ToLower(mech))
		check("auth-error SaslAuthenticationException", "auth", addr, ca.File, mech, "alice", "wrong")
	}
	admin := saslClient(t, addr, "alice", kgoTLS(ca))
	createACL(t, admin, kmsg.CreateACLsRequestCreation{ResourceType: rTopic, ResourceName: "java-plain", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:bob", Host: "*", Operation: opDescribe, PermissionType: kmsg.ACLPermissionTypeAllow})
	check("read-error TopicAuthorizationException records=0", "read", addr, ca.File, MechanismSCRAMSHA512, "bob", "bob-secret", "java-plain")
}
