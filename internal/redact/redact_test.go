package redact

import (
	"bytes"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"endpoint http://AKID:s3cr3t@127.0.0.1:9000 unreachable", "endpoint http://AKID:xxxxx@127.0.0.1:9000 unreachable"},
		{`"ftp://u:p%40ss@h/x" and https://a:b@c`, `"ftp://u:xxxxx@h/x" and https://a:xxxxx@c`},
		{"http://user@host/ and mailto:a@b and a:b@c", "http://user@host/ and mailto:a@b and a:b@c"},
		{"http://host:9000/path@x", "http://host:9000/path@x"},
	} {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := URL("http://u:pw@h:1/p"); got != "http://u:xxxxx@h:1/p" {
		t.Errorf("URL = %q", got)
	}
	var b bytes.Buffer
	if n, err := Writer(&b).Write([]byte("x http://u:pw@h y")); err != nil || n != 17 || b.String() != "x http://u:xxxxx@h y" {
		t.Errorf("Writer: %d %v %q", n, err, b.String())
	}
}
