package broker

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// Security configures the authentication and authorization of the
// broker's listeners (see Listener for which listeners use SASL).
type Security struct {
	// SASL holds the users SASL listeners authenticate.
	SASL SASLConfig
	// ACL enables and configures authorization.
	ACL ACLConfig
	// HandshakeTimeout bounds a new connection's TLS handshake and, on a
	// SASL listener, its SASL exchange; past it the connection is closed.
	// Default 10s.
	HandshakeTimeout time.Duration
}

// SASL mechanism names.
const (
	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// SASLConfig is the users SASL listeners accept and how.
type SASLConfig struct {
	// Mechanisms are the mechanisms offered (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512). Default: PLAIN and each SCRAM mechanism some user
	// has a credential for.
	Mechanisms []string
	// Users are the accounts. A user authenticates with a SCRAM mechanism
	// it has a credential for, or with PLAIN, whose password is checked
	// against any of its credentials: no password is kept in clear.
	Users []SASLUser
}

// SASLUser is one SASL account.
type SASLUser struct {
	// Name is the user name; its principal is "User:" + Name.
	Name string
	// Credentials are its salted and hashed passwords, at most one per
	// SCRAM mechanism (NewSCRAMCredential, ParseSCRAMCredential).
	Credentials []SCRAMCredential
}

// SCRAMCredential is a password stored as SCRAM stores it (RFC 5802): a
// salt, an iteration count and two keys derived from the salted password,
// from which the password cannot be recovered. Its text form (Encode) is
// "MECHANISM:ITERATIONS:SALT:STOREDKEY:SERVERKEY", the last three in
// base64. String redacts it, so that it is never logged by accident.
type SCRAMCredential struct {
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism  string
	Iterations int
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// Iteration bounds of a SCRAM credential (Kafka's).
const (
	MinSCRAMIterations     = 4096
	MaxSCRAMIterations     = 16384
	DefaultSCRAMIterations = 8192
)

// scramHash is the hash of a SCRAM mechanism (nil for another name).
func scramHash(mechanism string) scram.HashGeneratorFcn {
	switch mechanism {
	case MechanismSCRAMSHA256:
		return scram.SHA256
	case MechanismSCRAMSHA512:
		return scram.SHA512
	}
	return nil
}

// NewSCRAMCredential derives the stored credential of password for
// mechanism with a fresh random salt (iterations 0: the default).
func NewSCRAMCredential(mechanism, password string, iterations int) (SCRAMCredential, error) {
	if iterations == 0 {
		iterations = DefaultSCRAMIterations
	}
	h := scramHash(mechanism)
	if h == nil {
		return SCRAMCredential{}, fmt.Errorf("broker: SCRAM mechanism %q: want %s or %s", mechanism, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	}
	if iterations < MinSCRAMIterations || iterations > MaxSCRAMIterations {
		return SCRAMCredential{}, fmt.Errorf("broker: SCRAM iterations %d outside [%d, %d]", iterations, MinSCRAMIterations, MaxSCRAMIterations)
	}
	salt := make([]byte, 24)
	_, _ = rand.Read(salt)
	sc, err := derive(h, "", password, scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return SCRAMCredential{}, err
	}
	return SCRAMCredential{Mechanism: mechanism, Iterations: iterations, Salt: salt, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// derive computes the stored credential of password under kf.
func derive(h scram.HashGeneratorFcn, user, password string, kf scram.KeyFactors) (scram.StoredCredentials, error) {
	cl, err := h.NewClient(user, password, "")
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("broker: SCRAM password: %w", err)
	}
	return cl.GetStoredCredentialsWithError(kf)
}

// ParseSCRAMCredential parses the text form of a credential (Encode).
func ParseSCRAMCredential(s string) (SCRAMCredential, error) {
	f := strings.Split(s, ":")
	if len(f) != 5 {
		return SCRAMCredential{}, errors.New("broker: SCRAM credential: want MECHANISM:ITERATIONS:SALT:STOREDKEY:SERVERKEY (strata sasl-credential prints one)")
	}
	c := SCRAMCredential{Mechanism: f[0]}
	h := scramHash(c.Mechanism)
	if h == nil {
		return SCRAMCredential{}, fmt.Errorf("broker: SCRAM credential: mechanism %q: want %s or %s", f[0], MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	}
	var err error
	if c.Iterations, err = strconv.Atoi(f[1]); err != nil || c.Iterations < MinSCRAMIterations || c.Iterations > MaxSCRAMIterations {
		return SCRAMCredential{}, fmt.Errorf("broker: SCRAM credential: iterations %q: want a number in [%d, %d]", f[1], MinSCRAMIterations, MaxSCRAMIterations)
	}
	size := h().Size()
	for i, dst := range []*[]byte{&c.Salt, &c.StoredKey, &c.ServerKey} {
		if *dst, err = base64.StdEncoding.DecodeString(f[2+i]); err != nil || len(*dst) == 0 || (i > 0 && len(*dst) != size) {
			return SCRAMCredential{}, fmt.Errorf("broker: SCRAM credential: field %d is not the base64 of a %s value", 3+i, []string{"salt", "stored key", "server key"}[i])
		}
	}
	return c, nil
}

// Encode returns the credential's text form, for a config file.
func (c SCRAMCredential) Encode() string {
	e := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s:%d:%s:%s:%s", c.Mechanism, c.Iterations, e(c.Salt), e(c.StoredKey), e(c.ServerKey))
}

// String names the credential's mechanism and hides its keys.
func (c SCRAMCredential) String() string { return c.Mechanism + " credential (redacted)" }

func (c SCRAMCredential) stored() scram.StoredCredentials {
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations}, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}

// saslUsers is a SASLConfig checked and indexed.
type saslUsers struct {
	mechanisms []string
	creds      map[string]map[string]SCRAMCredential // user -> mechanism -> credential
	servers    map[string]*scram.Server
	// decoy derives the credential an unknown user is challenged with,
	// so that the exchange does not tell which users exist.
	decoy []byte
}

func newSASLUsers(cfg SASLConfig) (*saslUsers, error) {
	if len(cfg.Users) == 0 {
		if len(cfg.Mechanisms) > 0 {
			return nil, errors.New("broker: Security.SASL.Mechanisms without Users")
		}
		return nil, nil
	}
	u := &saslUsers{creds: map[string]map[string]SCRAMCredential{}, servers: map[string]*scram.Server{}, decoy: make([]byte, 32)}
	_, _ = rand.Read(u.decoy)
	have := map[string]bool{}
	for i, user := range cfg.Users {
		if user.Name == "" {
			return nil, fmt.Errorf("broker: Security.SASL.Users[%d]: empty name", i)
		}
		if u.creds[user.Name] != nil {
			return nil, fmt.Errorf("broker: Security.SASL.Users[%d]: user %q listed twice", i, user.Name)
		}
		if len(user.Credentials) == 0 {
			return nil, fmt.Errorf("broker: Security.SASL.Users[%d] %s: no credentials", i, user.Name)
		}
		m := map[string]SCRAMCredential{}
		for _, c := range user.Credentials {
			if scramHash(c.Mechanism) == nil {
				return nil, fmt.Errorf("broker: Security.SASL.Users[%d] %s: credential mechanism %q", i, user.Name, c.Mechanism)
			}
			if _, dup := m[c.Mechanism]; dup {
				return nil, fmt.Errorf("broker: Security.SASL.Users[%d] %s: two %s credentials", i, user.Name, c.Mechanism)
			}
			m[c.Mechanism] = c
			have[c.Mechanism] = true
		}
		u.creds[user.Name] = m
	}
	u.mechanisms = cfg.Mechanisms
	if len(u.mechanisms) == 0 {
		u.mechanisms = []string{MechanismPlain}
		for _, m := range []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
			if have[m] {
				u.mechanisms = append(u.mechanisms, m)
			}
		}
	}
	for _, m := range u.mechanisms {
		switch h := scramHash(m); {
		case m == MechanismPlain:
		case h == nil:
			return nil, fmt.Errorf("broker: Security.SASL.Mechanisms: %q: want %s, %s or %s", m, MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
		default:
			mech := m
			srv, err := h.NewServer(func(user string) (scram.StoredCredentials, error) { return u.lookup(mech, user), nil })
			if err != nil {
				return nil, fmt.Errorf("broker: SCRAM server %s: %w", m, err)
			}
			// Alphanumeric nonces: librdkafka mangles a nonce holding
			// base64's '+' or '/' (the default generator's).
			u.servers[m] = srv.WithNonceGenerator(hexNonce)
		}
	}
	return u, nil
}

// hexNonce is a random SCRAM server nonce of 48 hex digits.
func hexNonce() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lookup returns user's credential for mechanism, or a decoy one (that no
// password matches) for an unknown user.
func (u *saslUsers) lookup(mechanism, user string) scram.StoredCredentials {
	if c, ok := u.creds[user][mechanism]; ok {
		return c.stored()
	}
	mac := hmac.New(sha256.New, u.decoy)
	mac.Write([]byte(mechanism + "\x00" + user))
	salt := mac.Sum(nil)
	size := scramHash(mechanism)().Size()
	key := bytes.Repeat([]byte{0}, size) // the hash of no key is all zeros
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt[:24]), Iters: DefaultSCRAMIterations}, StoredKey: key, ServerKey: key}
}

// checkPlain reports whether password is user's (against any of its
// credentials).
func (u *saslUsers) checkPlain(user, password string) bool {
	for _, m := range []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
		c, ok := u.creds[user][m]
		if !ok {
			continue
		}
		sc, err := derive(scramHash(m), user, password, c.stored().KeyFactors)
		return err == nil && hmac.Equal(sc.StoredKey, c.StoredKey)
	}
	return false
}

// saslExchange is one connection's authentication in progress.
type saslExchange struct {
	u         *saslUsers
	mechanism string
	scram     *scram.ServerConversation // nil for PLAIN
	user      string
	// first and serverFirst are the SCRAM client-first and server-first
	// messages, once exchanged.
	first, serverFirst string
}

// start begins an exchange with mechanism (nil if not offered).
func (u *saslUsers) start(mechanism string) *saslExchange {
	if !slices.Contains(u.mechanisms, mechanism) {
		return nil
	}
	ex := &saslExchange{u: u, mechanism: mechanism}
	if srv := u.servers[mechanism]; srv != nil {
		ex.scram = srv.NewConversation()
	}
	return ex
}

// errAuthFailed is the error of a failed SASL authentication.
var errAuthFailed = errors.New("SASL authentication failed")

// step feeds one client message to the exchange and returns the answer,
// and whether the client is now authenticated. An error ends the exchange.
func (ex *saslExchange) step(msg []byte) (out []byte, done bool, err error) {
	if ex.scram == nil {
		// PLAIN (RFC 4616): [authzid] NUL authcid NUL passwd.
		f := bytes.Split(msg, []byte{0})
		if len(f) != 3 || len(f[1]) == 0 || (len(f[0]) > 0 && !bytes.Equal(f[0], f[1])) {
			return nil, false, fmt.Errorf("%w: malformed PLAIN message", errAuthFailed)
		}
		ex.user = string(f[1])
		if !ex.u.checkPlain(ex.user, string(f[2])) {
			return nil, false, fmt.Errorf("%w: invalid credentials for user %q", errAuthFailed, ex.user)
		}
		return nil, true, nil
	}
	if ex.first == "" {
		// client-first: xdg-go/scram parses it, looks the user up and
		// answers with the salt, the iterations and the nonce.
		resp, err := ex.scram.Step(string(msg))
		ex.user = ex.scram.Username()
		if err != nil {
			return nil, false, fmt.Errorf("%w: %s client-first message for user %q: %v", errAuthFailed, ex.mechanism, ex.user, err)
		}
		if a := ex.scram.AuthzID(); a != "" && a != ex.user {
			return nil, false, fmt.Errorf("%w: %s: user %q asks to act as %q", errAuthFailed, ex.mechanism, ex.user, a)
		}
		ex.first, ex.serverFirst = string(msg), resp
		return []byte(resp), false, nil
	}
	if out, err = ex.final(string(msg)); err != nil {
		return nil, false, fmt.Errorf("%w: %s for user %q: %v", errAuthFailed, ex.mechanism, ex.user, err)
	}
	return out, true, nil
}

// final checks the client-final message as Kafka's SCRAM server does
// (RFC 5802, with Kafka's nonce rule: the client's nonce must end with
// the server-first nonce, since librdkafka sends the client part twice)
// and returns the server-final message.
func (ex *saslExchange) final(c2 string) ([]byte, error) {
	i := strings.LastIndex(c2, ",p=")
	if i < 0 {
		return nil, errors.New("client-final message without a proof")
	}
	withoutProof, proofB64 := c2[:i], c2[i+3:]
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return nil, errors.New("malformed client-final message")
	}
	// The gs2 header is the client-first message's first two fields; no
	// channel binding is offered, so c= is its base64.
	first := strings.SplitN(ex.first, ",", 3)
	if len(first) != 3 || fields[0] != "c="+base64.StdEncoding.EncodeToString([]byte(first[0]+","+first[1]+",")) {
		return nil, errors.New("channel binding does not match the client-first message")
	}
	nonce := ""
	for _, f := range strings.Split(ex.serverFirst, ",") {
		if strings.HasPrefix(f, "r=") {
			nonce = f[2:]
		}
	}
	if nonce == "" || !strings.HasSuffix(fields[1][2:], nonce) {
		return nil, errors.New("nonce does not match the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	h := scramHash(ex.mechanism)
	cred := ex.u.lookup(ex.mechanism, ex.user)
	if err != nil || len(proof) != h().Size() {
		return nil, errors.New("malformed proof")
	}
	authMsg := []byte(first[2] + "," + ex.serverFirst + "," + withoutProof)
	sig := hmacOf(h, cred.StoredKey, authMsg)
	for i := range proof {
		proof[i] ^= sig[i] // the client key
	}
	stored := h()
	stored.Write(proof)
	if !hmac.Equal(stored.Sum(nil), cred.StoredKey) {
		return nil, errors.New("invalid credentials")
	}
	if _, known := ex.u.creds[ex.user][ex.mechanism]; !known {
		return nil, errors.New("invalid credentials")
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, cred.ServerKey, authMsg))), nil
}

// hmacOf is HMAC(key, msg) with h.
func hmacOf(h scram.HashGeneratorFcn, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// maxAuthFrame bounds a frame read before authentication (Kafka's
// sasl.server.max.receive.size).
const maxAuthFrame = 512 << 10

// anonymous is the principal of an unauthenticated connection.
const anonymous = "User:ANONYMOUS"

// authenticate runs the SASL exchange of a new connection: it answers
// ApiVersions, SaslHandshake (v0: the tokens follow as bare frames; v1:
// in SaslAuthenticate) and SaslAuthenticate until the client has
// authenticated, all within timeout. Any other request, a malformed
// frame or a failed authentication ends the connection (a failed
// SaslAuthenticate is answered with SASL_AUTHENTICATION_FAILED first).
func (cc *conn) authenticate(sl *SecureListener, timeout time.Duration) error {
	b := cc.b
	deadline := time.Now().Add(timeout)
	w := bufio.NewWriter(cc.c)
	var buf []byte
	var werr error
	send := func(p *pending) error {
		cc.write(w, p, &buf, false, func(err error) { werr = err })
		if werr == nil {
			werr = w.Flush()
		}
		return werr
	}
	var ex *saslExchange
	raw := false // SaslHandshake v0: the tokens come as bare frames
	for {
		_ = cc.c.SetReadDeadline(deadline)
		frame, err := cc.readAuthFrame(raw)
		if err != nil {
			return err
		}
		if raw {
			out, done, err := ex.step(frame)
			if err != nil {
				b.log.Info("SASL authentication failed", "listener", sl.cfg.Name, "remote", cc.remote, "mechanism", ex.mechanism, "err", err)
				return err
			}
			_ = cc.c.SetWriteDeadline(deadline)
			if _, err := cc.c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(out)))); err != nil {
				return err
			}
			if _, err := cc.c.Write(out); err != nil {
				return err
			}
			if done {
				return cc.authenticated(sl, ex)
			}
			continue
		}
		p, req, resp, err := cc.parse(frame)
		if err != nil {
			b.metrics.badFrames.Add(1)
			return err
		}
		if req == nil {
			if p.key == kmsg.ApiVersions.Int16() {
				if err := send(p); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("listener %s: %s before authentication (unsupported version)", sl.cfg.Name, kmsg.NameForKey(p.key))
		}
		code := int16(0)
		var fail error
		done := false
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			p.resp = apiVersionsResponse(r.Version)
		case *kmsg.SASLHandshakeRequest:
			rr := resp.(*kmsg.SASLHandshakeResponse)
			rr.SupportedMechanisms = b.sasl.mechanisms
			p.resp = rr
			switch {
			case ex != nil:
				code, fail = kerr.IllegalSaslState.Code, errors.New("a second SaslHandshake")
			default:
				if ex = b.sasl.start(r.Mechanism); ex == nil {
					code, fail = kerr.UnsupportedSaslMechanism.Code, fmt.Errorf("mechanism %q not offered", r.Mechanism)
				}
				raw = r.Version == 0
			}
			rr.ErrorCode = code
		case *kmsg.SASLAuthenticateRequest:
			rr := resp.(*kmsg.SASLAuthenticateResponse)
			p.resp = rr
			if ex == nil {
				code, fail = kerr.IllegalSaslState.Code, errors.New("SaslAuthenticate before SaslHandshake")
				rr.ErrorCode = code
				break
			}
			var out []byte
			out, done, fail = ex.step(r.SASLAuthBytes)
			if fail != nil {
				code = kerr.SaslAuthenticationFailed.Code
				rr.ErrorMessage = errString(fmt.Sprintf("Authentication failed: invalid credentials with SASL mechanism %s", ex.mechanism))
				b.log.Info("SASL authentication failed", "listener", sl.cfg.Name, "remote", cc.remote, "mechanism", ex.mechanism, "err", fail)
			}
			rr.ErrorCode, rr.SASLAuthBytes = code, out
		default:
			b.metrics.request(p.key, kerr.SaslAuthenticationFailed.Code)
			return fmt.Errorf("listener %s: %s before authentication", sl.cfg.Name, kmsg.NameForKey(p.key))
		}
		b.metrics.request(p.key, code)
		if err := send(p); err != nil {
			return err
		}
		switch {
		case fail != nil:
			return fail
		case done:
			return cc.authenticated(sl, ex)
		}
	}
}

// readAuthFrame reads one size-prefixed frame of the SASL exchange: a
// request, or with raw a bare SASL token.
func (cc *conn) readAuthFrame(raw bool) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(cc.r, sz[:]); err != nil {
		return nil, cc.authReadErr(err)
	}
	size := int32(binary.BigEndian.Uint32(sz[:]))
	low := int32(8)
	if raw {
		low = 0
	}
	if size < low || size > maxAuthFrame {
		cc.b.metrics.badFrames.Add(1)
		return nil, fmt.Errorf("SASL frame size %d outside [%d, %d] before authentication", size, low, maxAuthFrame)
	}
	frame, err := readBody(cc.r, int(size), cc.b.bodyMem)
	if err != nil {
		return nil, cc.authReadErr(err)
	}
	return frame, nil
}

// authReadErr names a read of the SASL exchange that failed: a timeout is
// the handshake timeout running out.
func (cc *conn) authReadErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		cc.b.log.Debug("closing connection: SASL exchange not finished within the handshake timeout", "remote", cc.remote, "timeout", cc.b.cfg.Security.HandshakeTimeout)
		return fmt.Errorf("SASL exchange not finished within %s: %w", cc.b.cfg.Security.HandshakeTimeout, err)
	}
	return fmt.Errorf("reading the SASL exchange: %w", err)
}

// authenticated ends a successful exchange.
func (cc *conn) authenticated(sl *SecureListener, ex *saslExchange) error {
	cc.principal = "User:" + ex.user
	_ = cc.c.SetDeadline(time.Time{})
	cc.lastWrite.Store(time.Now().UnixNano())
	cc.b.log.Debug("SASL authenticated", "listener", sl.cfg.Name, "remote", cc.remote, "mechanism", ex.mechanism, "principal", cc.principal)
	return nil
}
