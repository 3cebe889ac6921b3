package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/internal/testcert"
)

// TestServeSecureListeners: `strata sasl-credential` prints a user entry;
// `strata serve` with it in the config serves the --listen address as
// before (plaintext) and a SASL_SSL listener next to it, where franz-go
// authenticates with SCRAM-SHA-512 over TLS, and a wrong password gets
// SASL_AUTHENTICATION_FAILED; Metadata there names the listener's own
// address. Neither the password nor the stored
// credentials appear in the debug log.
func TestServeSecureListeners(t *testing.T) {
	const password = "PASSWORDMARKER-do-not-print-4c2f"
	var cred, errb bytes.Buffer
	if code := runSASLCredential(context.Background(), []string{"--user", "alice"}, strings.NewReader(password+"\n"), &cred, &errb); code != 0 {
		t.Fatalf("strata sasl-credential exited %d: %s", code, errb.String())
	}
	if strings.Contains(cred.String(), password) || !strings.Contains(cred.String(), "SCRAM-SHA-512:") {
		t.Fatalf("strata sasl-credential printed:\n%s", cred.String())
	}
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	plainAddr, secAddr := freePort(t), freePort(t)
	users := strings.ReplaceAll(strings.TrimSpace(cred.String()), "\n", "\n    ")
	config := fmt.Sprintf(`log_level: debug
drivers: [{driver: memory, allow_non_durable: true}]
listeners:
  - name: external
    listen: %s
    security_protocol: SASL_SSL
    tls: {cert_file: %s, key_file: %s}
sasl:
  users:
    %s
`, secAddr, certFile, keyFile, users)
	path := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stderr, ok := serveArgsInProcess(t, ctx, "--config", path, "--listen", plainAddr)
	if !ok {
		t.Fatalf("serve exited %d:\n%s", <-done, stderr.String())
	}
	if err := produceOne(plainAddr, "plain"); err != nil {
		t.Fatalf("the --listen plaintext listener: %v", err)
	}
	dial := func(pass string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(secAddr), kgo.DialTLSConfig(ca.ClientTLS(nil)),
			kgo.SASL(scram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism()))
		if err != nil {
			return err
		}
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err == nil && (len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != secAddr) {
			return fmt.Errorf("metadata names brokers %+v", resp.Brokers)
		}
		return err
	}
	if err := dial(password); err != nil {
		t.Fatalf("SCRAM-SHA-512 over TLS with the right password: %v", err)
	}
	if err := dial("wrong"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	log := stderr.String()
	stored := 0
	for _, line := range strings.Split(cred.String(), "\n") {
		c := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
		if !strings.HasPrefix(c, "SCRAM-SHA-") {
			continue
		}
		stored++
		// The salt and keys, without the mechanism and iterations.
		if keys := c[strings.LastIndex(c, ":")-20:]; strings.Contains(log, keys) {
			t.Errorf("the log holds a stored credential")
		}
	}
	if stored != 2 {
		t.Fatalf("strata sasl-credential printed %d credentials, want 2:\n%s", stored, cred.String())
	}
	if strings.Contains(log, password) || !strings.Contains(log, "SASL authentication failed") {
		t.Errorf("the log holds the password or does not report the failed login:\n%s", log)
	}
}
