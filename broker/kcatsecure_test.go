package broker

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/internal/testcert"
)

// kcatRun runs kcat with args and returns its stdout, stderr and error.
func kcatRun(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestKcatSASLSSL: kcat (librdkafka) with security.protocol=SASL_SSL and
// each mechanism produces and consumes; a wrong password fails with the
// broker's authentication error; a principal without Read on the topic
// gets "Topic authorization failed" and no records.
func TestKcatSASLSSL(t *testing.T) {
	requireTool(t, "kcat", "apt-get install -y kcat")
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	sec := Security{SASL: SASLConfig{Users: testUsers(t)}, ACL: ACLConfig{Enabled: true, SuperUsers: []string{"User:alice"}}}
	_, addr := secureBroker(t, sec, Listener{SASL: true, TLS: &TLSConfig{CertFile: certFile, KeyFile: keyFile}})
	as := func(mech, user, pass string) []string {
		return []string{"-b", addr, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + ca.File,
			"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
	}
	for _, mech := range []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
		topic := "kc-" + strings.ToLower(mech)
		kcat(t, "one\ntwo\n", append(as(mech, "alice", "alice-secret"), "-P", "-t", topic)...)
		got := kcat(t, "", append(as(mech, "alice", "alice-secret"), "-C", "-t", topic, "-o", "beginning", "-e", "-q")...)
		if strings.TrimSpace(got) != "one\ntwo" {
			t.Fatalf("kcat %s consumed %q, want one and two", mech, got)
		}
		_, stderr, err := kcatRun(t, "", append(as(mech, "alice", "wrong"), "-L", "-m", "5")...)
		if err == nil || !strings.Contains(stderr, "Authentication failed") {
			t.Fatalf("kcat %s with a wrong password: %v, stderr:\n%s", mech, err, stderr)
		}
	}
	// bob may Describe the topic (so librdkafka learns its partitions)
	// but not Read it.
	admin := saslClient(t, addr, "alice", kgoTLS(ca))
	createACL(t, admin, kmsg.CreateACLsRequestCreation{ResourceType: rTopic, ResourceName: "kc-plain", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:bob", Host: "*", Operation: opDescribe, PermissionType: kmsg.ACLPermissionTypeAllow})
	out, stderr, _ := kcatRun(t, "", append(as(MechanismSCRAMSHA256, "bob", "bob-secret"), "-C", "-t", "kc-plain", "-o", "beginning", "-e", "-q")...)
	if strings.TrimSpace(out) != "" || !strings.Contains(stderr, "Topic authorization failed") {
		t.Fatalf("kcat as bob without Read: stdout %q, stderr:\n%s", out, stderr)
	}
}
