package nfs

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/stream"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("root: /mnt/x/\nlinger: 2ms\nmax_chunk_bytes: 1048576\nfsync: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != "/mnt/x" || c.Linger != 2*time.Millisecond || c.MaxChunkBytes != 1<<20 || c.fsync() || c.TempMaxAge != DefaultTempMaxAge {
		t.Fatalf("parsed %+v", c)
	}
	c, err = ParseConfig([]byte(`{"root": "/data", "temp_max_age": "5m", "create_root": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != "/data" || !c.fsync() || c.TempMaxAge != 5*time.Minute || !c.CreateRoot {
		t.Fatalf("parsed JSON %+v", c)
	}
	c, err = ParseConfig([]byte("file:///mnt/s%20x?linger=2ms&fsync=false&create_root=true&max_chunk_bytes=65536\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != "/mnt/s x" || c.Linger != 2*time.Millisecond || c.fsync() || !c.CreateRoot || c.MaxChunkBytes != 65536 {
		t.Fatalf("parsed URL %+v", c)
	}
	o := c.engineOptions()
	if o.Driver != "nfs" || o.Durable || !o.SharedNamespace {
		t.Fatalf("engine options with fsync off: %+v", o)
	}
	if c, _ := ParseConfig([]byte("root: /x")); !c.engineOptions().Durable {
		t.Fatal("engine options with fsync on (the default) do not claim a durable store")
	}
}

func TestParseConfigErrorsNameTheField(t *testing.T) {
	cases := []struct{ config, field string }{
		{"", "root"},
		{"linger: 1ms", "root"},
		{"root: relative/dir", "root"},
		{"root: /x\nlinger: -1ms", "linger"},
		{"root: /x\nlinger: fast", "linger"},
		{"root: /x\ntemp_max_age: -1s", "temp_max_age"},
		{"root: /x\nmax_chunk_bytes: -1", "max_chunk_bytes"},
		{"root: /x\nmax_inflight_chunks: -2", "max_inflight_chunks"},
		{"root: /x\nmax_batch_bytes: -2", "max_batch_bytes"},
		{"root: /x\nfsync: maybe", "fsync"},
		{"root: /x\nrooot: /y", "rooot"},
		{"[1, 2", ""},
		{"file://host/x", "root"},
		{"file:///x?root=/y", "root"},
		{"file:///x?linger=soon", "linger"},
		{"file:///x?lingr=1ms", "lingr"},
		{"file://", "root"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.config))
		if !errors.Is(err, stream.ErrInvalidArgument) {
			t.Errorf("ParseConfig(%q): got %v, want ErrInvalidArgument", c.config, err)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("ParseConfig(%q): error %q does not name %q", c.config, err, c.field)
		}
	}
}

// FuzzParseConfig: any bytes either parse into a valid config with an
// absolute, clean root, or fail with ErrInvalidArgument; never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("root: /mnt/strata\nlinger: 2ms\n"))
	f.Add([]byte(`{"root":"/x","fsync":false,"max_chunk_bytes":1}`))
	f.Add([]byte("root: /a/../b\ntemp_max_age: 1h\n"))
	f.Add([]byte("file:///mnt/x?fsync=false&linger=1ms"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("error %v is not ErrInvalidArgument", err)
			}
			return
		}
		if !filepath.IsAbs(c.Root) || filepath.Clean(c.Root) != c.Root || c.Fsync == nil || c.TempMaxAge <= 0 {
			t.Fatalf("accepted config %+v", c)
		}
	})
}

// FuzzKeyPath: a key the driver accepts maps to a path strictly inside
// objects/, whose walk back gives the same key; everything else is
// ErrInvalidArgument.
func FuzzKeyPath(f *testing.F) {
	for _, k := range []string{"a", "a/b/c", "../x", "/abs", "a\x00b", "a/./b", "s/0/c/00000000000000000001", "..a/b..", "a@/b"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if err := validKey(key); err != nil {
			if !errors.Is(err, stream.ErrInvalidArgument) {
				t.Fatalf("validKey(%q): %v is not ErrInvalidArgument", key, err)
			}
			return
		}
		p := keyPath(key)
		rel, ok := strings.CutPrefix(p, objectsDir+"/")
		if !ok || !filepath.IsLocal(rel) || filepath.Clean(p) != p || strings.Contains(p, "\x00") {
			t.Fatalf("key %q maps to %q, not inside %s/", key, p, objectsDir)
		}
		// Decode as List does: strip the directory suffix of every element
		// but the last.
		els := strings.Split(rel, "/")
		for i := range len(els) - 1 {
			el, ok := strings.CutSuffix(els[i], dirSuffix)
			if !ok {
				t.Fatalf("key %q: directory element %q lacks %q", key, els[i], dirSuffix)
			}
			els[i] = el
		}
		if strings.HasSuffix(els[len(els)-1], dirSuffix) {
			t.Fatalf("key %q: file element %q ends in %q", key, els[len(els)-1], dirSuffix)
		}
		if back := strings.Join(els, "/"); back != key {
			t.Fatalf("key %q maps to %q which decodes to %q", key, p, back)
		}
	})
}

func TestParseModes(t *testing.T) {
	c, err := ParseConfig([]byte("root: /x"))
	if err != nil || c.FileMode != 0o600 || c.DirMode != 0o700 {
		t.Fatalf("default modes: %v %v, %v; want 0600 0700", c.FileMode, c.DirMode, err)
	}
	for _, config := range []string{
		"root: /x\nfile_mode: \"0640\"\ndir_mode: \"0o750\"",
		`{"root": "/x", "file_mode": "640", "dir_mode": "0750"}`,
		"file:///x?file_mode=0640&dir_mode=0750",
	} {
		c, err := ParseConfig([]byte(config))
		if err != nil || c.FileMode != 0o640 || c.DirMode != 0o750 {
			t.Fatalf("%s: modes %v %v, %v; want 0640 0750", config, c.FileMode, c.DirMode, err)
		}
	}
	for _, bad := range []string{"0999", "1777", "rw-r--r--", "0", "-1", "[1]"} {
		_, err := ParseConfig([]byte("root: /x\nfile_mode: " + bad))
		if !errors.Is(err, stream.ErrInvalidArgument) || !strings.Contains(err.Error(), "file_mode") {
			t.Errorf("file_mode %s: %v, want ErrInvalidArgument naming file_mode", bad, err)
		}
	}
}
