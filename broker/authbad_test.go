package broker

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"

	"github.com/stratastream/strata/internal/testcert"
)

// saslStep sends one SaslAuthenticate (v1) on c and returns its answer.
func saslStep(t *testing.T, c net.Conn, corr int32, msg []byte) kmsg.SASLAuthenticateResponse {
	t.Helper()
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SASLAuthBytes = msg
	if _, err := c.Write(authFrame(36, 1, corr, au)); err != nil {
		t.Fatal(err)
	}
	var ar kmsg.SASLAuthenticateResponse
	ar.Version = 1
	if err := ar.ReadFrom(readFrame(t, c)[4:]); err != nil {
		t.Fatal(err)
	}
	return ar
}

// sendHandshake sends SaslHandshake v1 for mechanism and returns the
// answer.
func sendHandshake(t *testing.T, c net.Conn, mechanism string) kmsg.SASLHandshakeResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mechanism
	if _, err := c.Write(authFrame(17, 1, 1, hs)); err != nil {
		t.Fatal(err)
	}
	var hr kmsg.SASLHandshakeResponse
	hr.Version = 1
	if err := hr.ReadFrom(readFrame(t, c)[4:]); err != nil {
		t.Fatalf("SaslHandshake %s: %v", mechanism, err)
	}
	return hr
}

// saslHandshake sends SaslHandshake v1 for mechanism and checks it is
// accepted.
func saslHandshake(t *testing.T, c net.Conn, mechanism string) {
	t.Helper()
	if hr := sendHandshake(t, c, mechanism); hr.ErrorCode != 0 {
		t.Fatalf("SaslHandshake %s: code %d", mechanism, hr.ErrorCode)
	}
}

// v0Handshake dials addr and sends SaslHandshake v0 for PLAIN: the
// tokens follow as bare frames.
func v0Handshake(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = MechanismPlain
	if _, err := c.Write(authFrame(17, 0, 1, hs)); err != nil {
		t.Fatal(err)
	}
	readFrame(t, c)
	return c
}

// expectClosedWithin asserts the broker closes c within d (plus slack).
func expectClosedWithin(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	start := time.Now()
	expectClosed(t, c)
	if took := time.Since(start); took > d+5*time.Second {
		t.Fatalf("closed after %s, want within %s", took, d)
	}
}

// TestSASLBadInput: malformed SASL frames, a SCRAM exchange replayed or
// cut short, and a TLS handshake that never finishes end the connection
// (after SASL_AUTHENTICATION_FAILED where a response is due) within the
// handshake timeout; the package's goleak check sees nothing left.
func TestSASLBadInput(t *testing.T) {
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	const timeout = time.Second
	sec := Security{SASL: SASLConfig{Users: testUsers(t)}, HandshakeTimeout: timeout}
	_, addr := secureBroker(t, sec, Listener{SASL: true})
	_, tlsAddr := secureBroker(t, sec, Listener{SASL: true, TLS: &TLSConfig{CertFile: certFile, KeyFile: keyFile}})

	failed := func(t *testing.T, ar kmsg.SASLAuthenticateResponse) {
		t.Helper()
		if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("code %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
		}
	}
	for _, tc := range []struct{ name, mech, msg string }{
		{"PLAIN without separators", MechanismPlain, "alicealice-secret"},
		{"PLAIN with another authzid", MechanismPlain, "bob\x00alice\x00alice-secret"},
		{"SCRAM garbage first message", MechanismSCRAMSHA256, "\xff\xfe garbage"},
		{"SCRAM first message with extensions", MechanismSCRAMSHA512, "n,,m=ext,n=alice,r=abc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr)
			saslHandshake(t, c, tc.mech)
			failed(t, saslStep(t, c, 2, []byte(tc.msg)))
			expectClosed(t, c)
		})
	}
	t.Run("SaslAuthenticate before SaslHandshake", func(t *testing.T) {
		c := dial(t, addr)
		if ar := saslStep(t, c, 1, []byte("\x00alice\x00alice-secret")); ar.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("code %d, want ILLEGAL_SASL_STATE", ar.ErrorCode)
		}
		expectClosed(t, c)
	})
	t.Run("unsupported mechanism", func(t *testing.T) {
		c := dial(t, addr)
		if hr := sendHandshake(t, c, "GSSAPI"); hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hr.SupportedMechanisms) != 3 {
			t.Fatalf("SaslHandshake GSSAPI: %+v", hr)
		}
		expectClosed(t, c)
	})
	t.Run("oversized frame before authentication", func(t *testing.T) {
		c := dial(t, addr)
		_, _ = c.Write([]byte{0x00, 0x10, 0x00, 0x00}) // 1 MiB
		expectClosed(t, c)
	})
	t.Run("v0 handshake then a garbage token", func(t *testing.T) {
		c := v0Handshake(t, addr)
		_, _ = c.Write([]byte{0, 0, 0, 3, 'x', 'y', 'z'})
		expectClosed(t, c)
	})
	t.Run("v0 handshake with a good PLAIN token authenticates", func(t *testing.T) {
		c := v0Handshake(t, addr)
		tok := "\x00alice\x00alice-secret"
		_, _ = c.Write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
		if r := readFrame(t, c); len(r) != 0 {
			t.Fatalf("v0 PLAIN answer of %d bytes, want an empty token", len(r))
		}
		_, _ = c.Write(authFrame(3, 1, 2, kmsg.NewPtrMetadataRequest()))
		readFrame(t, c) // answered: authenticated
	})
	t.Run("SCRAM exchange replayed", func(t *testing.T) {
		cl, err := xscram.SHA256.NewClient("alice", "alice-secret", "")
		if err != nil {
			t.Fatal(err)
		}
		conv := cl.NewConversation()
		first, _ := conv.Step("")
		c := dial(t, addr)
		saslHandshake(t, c, MechanismSCRAMSHA256)
		s1 := saslStep(t, c, 2, []byte(first))
		final, err := conv.Step(string(s1.SASLAuthBytes))
		if err != nil {
			t.Fatal(err)
		}
		if ar := saslStep(t, c, 3, []byte(final)); ar.ErrorCode != 0 {
			t.Fatalf("the original exchange: code %d", ar.ErrorCode)
		}
		// The same two messages on a new connection: the server's nonce
		// differs, so the recorded proof does not match.
		r := dial(t, addr)
		saslHandshake(t, r, MechanismSCRAMSHA256)
		if ar := saslStep(t, r, 2, []byte(first)); ar.ErrorCode != 0 {
			t.Fatalf("replayed first message: code %d", ar.ErrorCode)
		}
		failed(t, saslStep(t, r, 3, []byte(final)))
		expectClosed(t, r)
	})
	t.Run("SCRAM exchange cut short", func(t *testing.T) {
		c := dial(t, addr)
		saslHandshake(t, c, MechanismSCRAMSHA256)
		saslStep(t, c, 2, []byte("n,,n=alice,r=0123456789abcdef"))
		expectClosedWithin(t, c, timeout) // no final message
	})
	t.Run("SASL never started", func(t *testing.T) {
		expectClosedWithin(t, dial(t, addr), timeout)
	})
	t.Run("TLS handshake never finishes", func(t *testing.T) {
		c := dial(t, tlsAddr)
		_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}) // a ClientHello's first bytes
		expectClosedWithin(t, c, timeout)
	})
	t.Run("plaintext on the TLS listener", func(t *testing.T) {
		c := dial(t, tlsAddr)
		_, _ = c.Write(rawFrame(18, 0, 1, nil))
		expectClosed(t, c)
	})
}

// FuzzSASLStep feeds arbitrary client messages to each mechanism's
// exchange: every outcome is an error or a next message, never a panic,
// and no input authenticates without the password.
func FuzzSASLStep(f *testing.F) {
	f.Add(MechanismPlain, []byte("\x00alice\x00wrong"), []byte(nil))
	f.Add(MechanismSCRAMSHA256, []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add(MechanismSCRAMSHA512, []byte("n,a=alice,n=alice,r=x"), []byte("c=,r=,p="))
	f.Add(MechanismSCRAMSHA256, []byte("p=tls-unique,,n=alice,r=abc"), []byte(",p="))
	password := hexNonce() // no input can know it
	c, err := NewSCRAMCredential(MechanismSCRAMSHA256, password, MinSCRAMIterations)
	if err != nil {
		f.Fatal(err)
	}
	c512, err := NewSCRAMCredential(MechanismSCRAMSHA512, password, MinSCRAMIterations)
	if err != nil {
		f.Fatal(err)
	}
	u, err := newSASLUsers(SASLConfig{Users: []SASLUser{{Name: "alice", Credentials: []SCRAMCredential{c, c512}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mech string, first, final []byte) {
		ex := u.start(mech)
		if ex == nil {
			return
		}
		_, done, err := ex.step(first)
		if err != nil {
			return
		}
		if done {
			t.Fatalf("%s: authenticated by %q", mech, first)
		}
		if _, done, err = ex.step(final); err == nil || done {
			t.Fatalf("%s: authenticated by %q then %q (err %v)", mech, first, final, err)
		}
	})
}
