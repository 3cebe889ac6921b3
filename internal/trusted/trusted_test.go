package trusted

import (
	"context"
	"testing"
)

func TestChecksumMark(t *testing.T) {
	ctx := context.Background()
	if Checksum(ctx) {
		t.Fatal("a bare context carries the mark")
	}
	type other struct{}
	marked := context.WithValue(WithChecksum(ctx), other{}, 1)
	if !Checksum(marked) {
		t.Fatal("a context derived from a marked one lost the mark")
	}
	if Checksum(context.WithValue(ctx, other{}, true)) {
		t.Fatal("another key's true value reads as the mark")
	}
}
