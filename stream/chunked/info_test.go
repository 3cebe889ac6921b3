package chunked_test

import (
	"testing"

	"github.com/stratastream/strata/stream/chunked"
)

// TestInfoClaimsOnlyDeclared: a Store's Info claims durability and a
// shared namespace only when the driver declares them in Options; the
// zero value claims neither (the suite fails a capability that is claimed
// and not delivered, and skips one that is not claimed).
func TestInfoClaimsOnlyDeclared(t *testing.T) {
	info := func(o chunked.Options) (durable, shared bool) {
		s, err := chunked.NewStore(chunked.NewMemStorage(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		i := s.Info()
		return i.Durable, i.SharedNamespace
	}
	if d, s := info(chunked.Options{Driver: "undeclared"}); d || s {
		t.Errorf("zero Options: Info claims Durable=%v SharedNamespace=%v; want neither", d, s)
	}
	if d, s := info(chunked.Options{Driver: "declared", Durable: true, SharedNamespace: true}); !d || !s {
		t.Errorf("declared Options: Info Durable=%v SharedNamespace=%v; want both", d, s)
	}
}
