package yamlconf

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDecodeHidesValues(t *testing.T) {
	type creds struct {
		Key struct {
			ID string `yaml:"id"`
		} `yaml:"key"`
		N int `yaml:"n"`
	}
	for _, doc := range []string{
		"key: s3cr3tVALUEs3cr3t\n",          // a string where a mapping belongs
		"n: s3cr3tVALUEs3cr3t\n",            // a string where an int belongs
		"key:\n  id: [s3cr3tVALUEs3cr3t]\n", // a sequence where a string belongs
	} {
		var c creds
		err := Decode([]byte(doc), &c)
		if err == nil {
			t.Fatalf("%q decoded without error", doc)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error quotes the value: %v", err)
		}
	}
	var c creds
	if err := Decode([]byte("bogus: 1\n"), &c); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown field: %v, want an error naming it", err)
	}
	if err := Decode(nil, &c); !errors.Is(err, io.EOF) {
		t.Errorf("empty document: %v, want io.EOF", err)
	}
	if err := Decode([]byte("n: 3\n"), &c); err != nil || c.N != 3 {
		t.Errorf("valid document: %v, n=%d", err, c.N)
	}
}
