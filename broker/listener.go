package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// Listener says how the connections of one listener are secured: TLS,
// SASL, both (Kafka's SASL_SSL) or neither (PLAINTEXT, what Serve does).
type Listener struct {
	// Name names the listener in logs (default its security protocol).
	Name string
	// TLS, when set, makes every connection a TLS server connection.
	TLS *TLSConfig
	// SASL requires each connection to authenticate with one of the
	// mechanisms of Config.Security.SASL before any request other than
	// ApiVersions and the SASL handshake is answered.
	SASL bool
	// Advertise is the HOST:PORT that Metadata and FindCoordinator name
	// for this broker on this listener (default Config.Advertise).
	Advertise string
}

// Protocol is the listener's Kafka security protocol: PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL.
func (l Listener) Protocol() string {
	switch {
	case l.TLS != nil && l.SASL:
		return "SASL_SSL"
	case l.TLS != nil:
		return "SSL"
	case l.SASL:
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// SecureListener is a net.Listener with its security loaded: the TLS files
// read and checked. NewSecureListener builds one before the broker starts,
// so that a bad certificate stops startup before the cluster is taken over.
type SecureListener struct {
	net.Listener
	cfg  Listener
	tls  *tlsFiles
	host string
	port int32
}

// NewSecureListener loads l's TLS files (if any) for ln. Logs about
// reloading the files go to logger (default slog.Default()).
func NewSecureListener(ln net.Listener, l Listener, logger *slog.Logger) (*SecureListener, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if l.Name == "" {
		l.Name = l.Protocol()
	}
	sl := &SecureListener{Listener: ln, cfg: l}
	if l.Advertise != "" {
		host, port, err := splitAdvertise(l.Advertise)
		if err != nil {
			return nil, fmt.Errorf("broker: listener %s: advertise %q: %w", l.Name, l.Advertise, err)
		}
		sl.host, sl.port = host, port
	}
	if l.TLS != nil {
		f, err := newTLSFiles(*l.TLS, logger.With("listener", l.Name))
		if err != nil {
			return nil, fmt.Errorf("broker: listener %s: %w", l.Name, err)
		}
		sl.tls = f
	}
	return sl, nil
}

// Advertise is the HOST:PORT the listener advertises ("": the broker's).
func (sl *SecureListener) Advertise() string { return sl.cfg.Advertise }

// splitAdvertise parses a HOST:PORT.
func splitAdvertise(s string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, errors.New("bad port")
	}
	return host, int32(port), nil
}

// ServeListener accepts Kafka client connections on sl, securing each as
// sl says, until the broker is closed (it then returns nil) or the
// listener fails. A SASL listener needs Config.Security.SASL users.
func (b *Broker) ServeListener(sl *SecureListener) error {
	if sl.cfg.SASL && b.sasl == nil {
		_ = sl.Close()
		return fmt.Errorf("broker: listener %s uses SASL but Config.Security.SASL has no users", sl.cfg.Name)
	}
	return b.serve(sl.Listener, sl)
}

// handshakeTimeout is the default of Security.HandshakeTimeout.
const handshakeTimeout = 10 * time.Second

// secure runs the TLS handshake and the SASL exchange of a new connection
// of sl, within Security.HandshakeTimeout, and sets the connection's
// principal. On return cc.c is the connection to read and write.
func (cc *conn) secure(sl *SecureListener) error {
	timeout := cc.b.cfg.Security.HandshakeTimeout
	if sl.tls != nil {
		tc := tls.Server(cc.c, sl.tls.server)
		ctx, cancel := context.WithTimeout(cc.ctx, timeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			cc.b.log.Debug("closing connection: TLS handshake failed", "listener", sl.cfg.Name, "remote", cc.remote, "err", err)
			return fmt.Errorf("listener %s: TLS handshake: %w", sl.cfg.Name, err)
		}
		cc.c = tc
		cc.r = bufio.NewReaderSize(tc, 64<<10)
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && sl.tls.cfg.ClientCAFile != "" {
			cc.principal = "User:" + certs[0].Subject.CommonName
		}
	}
	if sl.cfg.SASL {
		return cc.authenticate(sl, timeout)
	}
	return nil
}
