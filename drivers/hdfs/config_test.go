package hdfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`
namenodes: [nn1:8020, nn2:8020]
user: strata
root: /data/strata/
replication: 3
timeouts: {connect: 2s, operation: 20s}
engine: {linger: 2ms, max_chunk_bytes: 1048576}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NameNodes) != 2 || c.User != "strata" || c.Root != "/data/strata" || c.Replication != 3 ||
		c.Timeouts.Connect != 2*time.Second || c.Timeouts.Operation != 20*time.Second ||
		c.Engine.Linger != 2*time.Millisecond || c.Engine.MaxChunkBytes != 1<<20 ||
		c.Connections != DefaultConnections || c.TempMaxAge != DefaultTempMaxAge {
		t.Fatalf("parsed %+v", c)
	}

	u, err := ParseConfig([]byte("hdfs://nn1:8020,nn2:8020/x/y?user=u&replication=2&operation_timeout=5s&linger=1ms"))
	if err != nil {
		t.Fatal(err)
	}
	if len(u.NameNodes) != 2 || u.Root != "/x/y" || u.User != "u" || u.Replication != 2 ||
		u.Timeouts.Operation != 5*time.Second || u.Engine.Linger != time.Millisecond {
		t.Fatalf("parsed URL %+v", u)
	}

	j, err := ParseConfig([]byte(`{"namenodes": ["127.0.0.1:9000"], "user": "root"}`))
	if err != nil || j.Root != DefaultRoot {
		t.Fatalf("JSON config: %+v, %v", j, err)
	}
}

// TestParseConfigErrors: each bad config fails with ErrInvalidArgument
// naming the bad field.
func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, field string }{
		{`user: u`, "namenodes"},
		{`namenodes: [nn1]` + "\nuser: u", "namenodes"},
		{`namenodes: ["nn1:99999"]` + "\nuser: u", "namenodes"},
		{`namenodes: [nn1:8020]`, "user"},
		{"namenodes: [nn1:8020]\nuser: u\nroot: relative", "root"},
		{"namenodes: [nn1:8020]\nuser: u\nroot: /a/../b", "root"},
		{"namenodes: [nn1:8020]\nuser: u\nroot: /a@b", "root"},
		{"namenodes: [nn1:8020]\nuser: u\nreplication: -1", "replication"},
		{"namenodes: [nn1:8020]\nuser: u\nblock_size: -1", "block_size"},
		{"namenodes: [nn1:8020]\nuser: u\nconnections: 100", "connections"},
		{"namenodes: [nn1:8020]\nuser: u\ntemp_max_age: 1s", "temp_max_age"},
		{"namenodes: [nn1:8020]\nuser: u\ndata_transfer_protection: maybe", "data_transfer_protection"},
		{"namenodes: [nn1:8020]\nuser: u\nengine: {linger: -1s}", "engine.linger"},
		{"namenodes: [nn1:8020]\nuser: u\nengine: {max_batch_bytes: -1}", "engine.max_batch_bytes"},
		{"namenodes: [nn1:8020]\nuser: u\ntimeouts: {connect: -1s}", "timeouts.connect"},
		{"namenodes: [nn1:8020]\nuser: u\ntimeouts: {request: 1s}", "request"}, // hdfs has no per-request timeout
		{"namenodes: [nn1:8020]\nkerberos: {principal: a@B, namenode_spn: nn/_HOST}", "kerberos"},
		{"namenodes: [nn1:8020]\nkerberos: {principal: nobody, keytab: /k, namenode_spn: nn/_HOST}", "kerberos.principal"},
		{"namenodes: [nn1:8020]\nkerberos: {principal: a@B, keytab: /k}", "kerberos.namenode_spn"},
		{"namenodes: [nn1:8020]\nuser: u\nrooot: /x", "rooot"},
		{"hdfs://nn1:8020/x?user=u&bogus=1", "bogus"},
		{"hdfs://nn1:8020/x?user=u&replication=two", "replication"},
		{"hdfs://nn1:8020/x?user=u&request_timeout=1s", "request_timeout"},
		{"hdfs://nn1:8020/x?user=u&max_batch_bytes=1", "max_batch_bytes"}, // YAML only
	} {
		_, err := ParseConfig([]byte(tc.config))
		if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("ParseConfig(%q) = %v, want ErrInvalidArgument naming %s", tc.config, err, tc.field)
		}
	}
}

// FuzzParseConfig: outside bytes never panic the parser, and what it
// accepts is valid.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("namenodes: [nn1:8020]\nuser: u\n"))
	f.Add([]byte(`{"namenodes": ["127.0.0.1:9000"], "user": "root", "root": "/s"}`))
	f.Add([]byte("hdfs://nn1:8020,nn2:8020/x?user=u&replication=2"))
	f.Add([]byte("namenodes: [nn1:8020]\nkerberos: {principal: a@B, keytab: /k, namenode_spn: nn/_HOST}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
	})
}

// TestKerberosSetupErrors: Kerberos settings are handed to the client's
// Kerberos support; unreadable files fail OpenStorage naming the field,
// before any connection.
func TestKerberosSetupErrors(t *testing.T) {
	dir := t.TempDir()
	krb5 := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(krb5, []byte("[libdefaults]\n default_realm = EXAMPLE.COM\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Config{NameNodes: []string{"127.0.0.1:1"}}
	for _, tc := range []struct {
		k     Kerberos
		field string
	}{
		{Kerberos{Principal: "a@EXAMPLE.COM", Keytab: filepath.Join(dir, "none.keytab"), NameNodeSPN: "nn/_HOST", Krb5Conf: filepath.Join(dir, "none.conf")}, "kerberos.krb5_conf"},
		{Kerberos{Principal: "a@EXAMPLE.COM", Keytab: filepath.Join(dir, "none.keytab"), NameNodeSPN: "nn/_HOST", Krb5Conf: krb5}, "kerberos.keytab"},
		{Kerberos{CCache: filepath.Join(dir, "none.ccache"), NameNodeSPN: "nn/_HOST", Krb5Conf: krb5}, "kerberos.ccache"},
	} {
		cfg := base
		cfg.Kerberos = &tc.k
		_, err := OpenStorage(t.Context(), cfg)
		if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("OpenStorage with %+v = %v, want ErrInvalidArgument naming %s", tc.k, err, tc.field)
		}
	}
}
