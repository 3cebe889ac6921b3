package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/testbed"
	"github.com/stratastream/strata/stream/plugin"
)

// Marker secrets: no output, log line or error may ever contain them.
const (
	s3SecretMarker    = "S3SECRETMARKERdo-not-print-7f3a9c"
	s3TokenMarker     = "S3TOKENMARKERdo-not-print-2b8e1d"
	azureMarkerPlain  = "AZUREKEYMARKER-do-not-print-5c1e"
	azureMarkerSASTok = "sv=2030&sig=AZURESASMARKERdonotprint"
	urlPasswordMarker = "URLPASSWORDMARKER-do-not-print-9d4a"
)

// azureKeyMarker is the marker account key (an account key is base64).
var azureKeyMarker = base64.StdEncoding.EncodeToString([]byte(azureMarkerPlain))

// secretMarkers are the strings TestSecretsNeverPrinted looks for.
func secretMarkers() []string {
	return []string{s3SecretMarker, s3TokenMarker, azureKeyMarker, azureMarkerPlain, azureMarkerSASTok, urlPasswordMarker}
}

// closedEndpoint returns an address nothing listens on.
func closedEndpoint(t *testing.T) string {
	return freePort(t)
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// secretConfigs are driver configs holding the marker secrets: against a
// closed port, against the real testbed with wrong credentials, and
// malformed ones whose parse errors must not echo the secret.
type secretConfig struct {
	name, driver, config, mustMention string
}

func secretConfigs(t *testing.T) []secretConfig {
	t.Helper()
	dead := closedEndpoint(t)
	cfgs := []secretConfig{
		{"s3 closed port", "s3", fmt.Sprintf(`bucket: strata-secret-test
endpoint: http://%s
region: us-east-1
path_style: true
credentials:
  access_key_id: AKIDSECRETTEST
  secret_access_key: %s
  session_token: %s
timeouts: {connect: 1s, request: 2s, operation: 3s}
retry: {max_attempts: 1}
`, dead, s3SecretMarker, s3TokenMarker), dead},
		{"s3 endpoint with a password closed port", "s3", fmt.Sprintf(`bucket: strata-secret-test
endpoint: http://AKIDSECRETTEST:%s@%s
region: us-east-1
path_style: true
timeouts: {connect: 1s, request: 2s, operation: 3s}
retry: {max_attempts: 1}
`, urlPasswordMarker, dead), dead},
		{"s3 endpoint with a password not http", "s3", fmt.Sprintf(`bucket: strata-secret-test
endpoint: ftp://AKIDSECRETTEST:%s@%s
`, urlPasswordMarker, dead), "endpoint"},
		{"s3 malformed", "s3", fmt.Sprintf(`bucket: strata-secret-test
endpoint: http://%s
credentials: "AKIDSECRETTEST:%s"
`, dead, s3SecretMarker), "s3 config"},
		{"azure closed port", "azure", fmt.Sprintf(`account_url: http://%s/devstoreaccount1
container: strata-secret-test
credentials:
  account_name: devstoreaccount1
  account_key: %s
timeouts: {connect: 1s, request: 2s, operation: 3s}
retry: {max_attempts: 1}
`, dead, azureKeyMarker), dead},
		{"azure sas closed port", "azure", fmt.Sprintf(`account_url: http://%s/devstoreaccount1
container: strata-secret-test
credentials:
  sas_token: %q
timeouts: {connect: 1s, request: 2s, operation: 3s}
retry: {max_attempts: 1}
`, dead, azureMarkerSASTok), dead},
		{"azure key not base64", "azure", fmt.Sprintf(`account_url: http://%s/devstoreaccount1
container: strata-secret-test
credentials:
  account_name: devstoreaccount1
  account_key: "%s!"
`, dead, azureMarkerPlain), "account_key"},
		{"azure connection string with SAS closed port", "azure", fmt.Sprintf(`container: strata-secret-test
credentials:
  connection_string: "BlobEndpoint=http://%s/devstoreaccount1;SharedAccessSignature=%s"
timeouts: {connect: 1s, request: 2s, operation: 3s}
retry: {max_attempts: 1}
`, dead, azureMarkerSASTok), dead},
	}
	// The real backends with the right endpoint and a wrong secret: the
	// backend's own authentication error comes back through the driver.
	if testing.Short() {
		t.Log("under -short: without the MinIO and Azurite cases (they need the testbeds)")
		return cfgs
	}
	s3env, err := testbed.Env("minio", "STRATA_S3_CONFIG")
	if err != nil {
		t.Fatalf("minio testbed: %v", err)
	}
	var s3cfg struct {
		Endpoint string `yaml:"endpoint"`
		Bucket   string `yaml:"bucket"`
	}
	readYAML(t, s3env["STRATA_S3_CONFIG"], &s3cfg)
	cfgs = append(cfgs, secretConfig{"s3 wrong secret on MinIO", "s3", fmt.Sprintf(`bucket: %s
endpoint: %s
region: us-east-1
path_style: true
credentials:
  access_key_id: strata-secret-test
  secret_access_key: %s
timeouts: {connect: 2s, request: 5s, operation: 10s}
retry: {max_attempts: 1}
`, s3cfg.Bucket, s3cfg.Endpoint, s3SecretMarker), hostOf(t, s3cfg.Endpoint)})
	azenv, err := testbed.Env("azurite", "STRATA_AZURE_CONFIG")
	if err != nil {
		t.Fatalf("azurite testbed: %v", err)
	}
	var azcfg struct {
		AccountURL string `yaml:"account_url"`
		Container  string `yaml:"container"`
	}
	readYAML(t, azenv["STRATA_AZURE_CONFIG"], &azcfg)
	cfgs = append(cfgs, secretConfig{"azure wrong key on Azurite", "azure", fmt.Sprintf(`account_url: %s
container: %s
credentials:
  account_name: devstoreaccount1
  account_key: %s
timeouts: {connect: 2s, request: 5s, operation: 10s}
retry: {max_attempts: 1}
`, azcfg.AccountURL, azcfg.Container, azureKeyMarker), hostOf(t, azcfg.AccountURL)})
	return cfgs
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// lockedBuffer is a bytes.Buffer safe for a logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// checkNoSecret fails if out holds any marker secret.
func checkNoSecret(t *testing.T, what, out string) {
	t.Helper()
	for _, m := range secretMarkers() {
		if strings.Contains(out, m) {
			t.Errorf("%s prints the secret %q:\n%s", what, m, out)
		}
	}
}

// TestSecretsNeverPrinted: driver configs holding secrets (s3 secret key
// and session token, azure account key and SAS token) that fail — closed
// port, wrong secret on the real backend, malformed — never show the
// secret in `strata drivers --json` (which holds every error in full) and its stderr, in
// `strata serve` (debug logging), or in the error and the debug-level
// driver log of plugin.Open. Each output must name the config's endpoint
// or bad field, so the check reads the real failure, not an empty output.
func TestSecretsNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	bin := buildBinary(t, dir, "strata", "github.com/stratastream/strata/cmd/strata")
	ctx := context.Background()
	for i, c := range secretConfigs(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfgPath := writeFile(t, dir, fmt.Sprintf("cfg%d.yaml", i), c.config)
			env := append(os.Environ(), "STRATA_"+strings.ToUpper(c.driver)+"_CONFIG="+cfgPath)
			for _, args := range [][]string{{"drivers", "--json"}} {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				cmd := exec.CommandContext(cctx, bin, args...)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				what := "strata " + strings.Join(args, " ")
				checkNoSecret(t, what, string(out))
				if !strings.Contains(string(out), c.mustMention) {
					t.Errorf("%s does not report the failure (no %q):\n%s", what, c.mustMention, out)
				}
			}

			// strata serve at debug level with the same driver config.
			var node yaml.Node
			if err := yaml.Unmarshal([]byte(c.config), &node); err != nil {
				t.Fatal(err)
			}
			serveCfg, err := yaml.Marshal(map[string]any{
				"listen":    "127.0.0.1:0",
				"log_level": "debug",
				"drivers":   []map[string]any{{"name": "d", "driver": c.driver, "config": node.Content[0]}},
			})
			if err != nil {
				t.Fatal(err)
			}
			servePath := writeFile(t, dir, fmt.Sprintf("serve%d.yaml", i), string(serveCfg))
			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			cmd := exec.CommandContext(cctx, bin, "serve", "--config", servePath)
			out, err := cmd.CombinedOutput()
			cancel()
			if err == nil {
				t.Fatalf("strata serve with a failing driver config exited 0:\n%s", out)
			}
			checkNoSecret(t, "strata serve", string(out))

			// plugin.Open with a debug-level host logger.
			drv, err := resolveDriver(c.driver)
			if err != nil {
				t.Fatal(err)
			}
			var logs lockedBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			octx, ocancel := context.WithTimeout(ctx, time.Minute)
			st, err := plugin.Open(octx, drv.Path, []byte(c.config), append(drv.options(), plugin.WithLogger(logger))...)
			ocancel()
			if err == nil {
				st.Close()
				t.Fatal("plugin.Open with a failing config succeeded")
			}
			checkNoSecret(t, "plugin.Open error", err.Error())
			checkNoSecret(t, "driver log", logs.String())
		})
	}
}
