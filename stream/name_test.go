package stream

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"orders-3/log", true},
		{"A.b_c-d/e/f", true},
		{strings.Repeat("x", 255), true},
		{"", false},
		{strings.Repeat("x", 256), false},
		{"/abs", false},
		{"trailing/", false},
		{"a//b", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"a/../b", false},
		{"a/./b", false},
		{"nul\x00", false},
		{"space x", false},
		{"uni\u00e9", false},
		{"back\\slash", false},
		{"..a", true},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ValidateName(%q) = %v, not ErrInvalidArgument", tt.name, err)
		}
	}
}

func TestCheckBatch(t *testing.T) {
	info := Info{MaxBatchBytes: 10, MaxProperties: 1}
	tests := []struct {
		b    Batch
		want error
	}{
		{Batch{Count: 1, Payload: make([]byte, 10)}, nil},
		{Batch{Count: 1}, nil},
		{Batch{Count: 0}, ErrInvalidArgument},
		{Batch{Count: 1, Payload: make([]byte, 11)}, ErrBatchTooLarge},
		{Batch{Count: 1, Properties: map[string]string{"k": "v", "k2": "v"}}, ErrBatchTooLarge},
		{Batch{Count: 1, Payload: make([]byte, 9), Properties: map[string]string{"k": "v"}}, ErrBatchTooLarge},
		{Batch{Count: 1, Properties: map[string]string{"": "v"}}, ErrInvalidArgument},
	}
	for i, tt := range tests {
		err := info.CheckBatch(tt.b)
		if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("case %d: CheckBatch = %v, want %v", i, err, tt.want)
		}
	}
}

func TestSentinel(t *testing.T) {
	for _, s := range Sentinels {
		wrapped := errors.Join(errors.New("ctx"), s)
		if Sentinel(wrapped) != s {
			t.Errorf("Sentinel(%v) = %v", wrapped, Sentinel(wrapped))
		}
	}
	if Sentinel(errors.New("other")) != nil {
		t.Error("Sentinel of a plain error is not nil")
	}
}

func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/a", "a//b", "x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateName(name) != nil {
			return
		}
		// A valid name never escapes a root when joined as a path.
		if strings.HasPrefix(name, "/") || len(name) > MaxNameLen {
			t.Fatalf("accepted %q", name)
		}
		for _, el := range strings.Split(name, "/") {
			if el == "" || el == "." || el == ".." {
				t.Fatalf("accepted %q with element %q", name, el)
			}
		}
	})
}
