package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/broker"
)

// listenerSpec is one entry of the config's listeners.
type listenerSpec struct {
	// Name names the listener in logs (default its security protocol).
	Name string `yaml:"name"`
	// Listen is the HOST:PORT to bind. Required.
	Listen string `yaml:"listen"`
	// Advertise is the HOST:PORT clients of this listener are told
	// (default: the broker's advertise).
	Advertise string `yaml:"advertise"`
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string `yaml:"security_protocol"`
	// TLS is required with SSL and SASL_SSL.
	TLS *tlsSpec `yaml:"tls"`
}

// tlsSpec is a listener's TLS files (broker.TLSConfig).
type tlsSpec struct {
	CertFile          string `yaml:"cert_file"`
	KeyFile           string `yaml:"key_file"`
	ClientCAFile      string `yaml:"client_ca_file"`
	RequireClientCert bool   `yaml:"require_client_cert"`
}

// saslSpec is the config's sasl section.
type saslSpec struct {
	// Mechanisms offered (default PLAIN and the SCRAM ones users have).
	Mechanisms []string `yaml:"mechanisms"`
	// Users and their stored credentials (strata sasl-credential).
	Users []saslUserSpec `yaml:"users"`
}

type saslUserSpec struct {
	Name        string   `yaml:"name"`
	Credentials []string `yaml:"credentials"`
}

// aclSpec is the config's acls section.
type aclSpec struct {
	Enabled    bool     `yaml:"enabled"`
	SuperUsers []string `yaml:"super_users"`
}

// security checks the security sections of c and returns the broker's
// Security and the listeners other than the plaintext --listen one.
// Errors name the field and never quote a credential.
func (c *serveConfig) security() (broker.Security, []broker.Listener, error) {
	var sec broker.Security
	sec.HandshakeTimeout = c.HandshakeTimeout
	if c.HandshakeTimeout < 0 {
		return sec, nil, fmt.Errorf("handshake_timeout: %s is negative", c.HandshakeTimeout)
	}
	if !c.TLS.IsZero() {
		return sec, nil, errors.New("tls: TLS is set per listener (listeners[].tls with security_protocol SSL or SASL_SSL); remove the top-level tls section")
	}
	if c.SASL != nil {
		sec.SASL.Mechanisms = c.SASL.Mechanisms
		for i, u := range c.SASL.Users {
			su := broker.SASLUser{Name: u.Name}
			for j, s := range u.Credentials {
				cred, err := broker.ParseSCRAMCredential(s)
				if err != nil {
					return sec, nil, fmt.Errorf("sasl.users[%d].credentials[%d]: %v", i, j, err)
				}
				su.Credentials = append(su.Credentials, cred)
			}
			sec.SASL.Users = append(sec.SASL.Users, su)
		}
	}
	if c.ACLs != nil {
		sec.ACL = broker.ACLConfig{Enabled: c.ACLs.Enabled, SuperUsers: c.ACLs.SuperUsers}
		for i, p := range c.ACLs.SuperUsers {
			if !strings.HasPrefix(p, "User:") || p == "User:" {
				return sec, nil, fmt.Errorf("acls.super_users[%d]: %q: want User:NAME", i, p)
			}
		}
	}
	var ls []broker.Listener
	for i, l := range c.Listeners {
		bl := broker.Listener{Name: l.Name, Advertise: l.Advertise}
		switch l.SecurityProtocol {
		case "PLAINTEXT", "", "SSL":
		case "SASL_PLAINTEXT", "SASL_SSL":
			bl.SASL = true
		default:
			return sec, nil, fmt.Errorf("listeners[%d].security_protocol: %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", i, l.SecurityProtocol)
		}
		wantTLS := strings.HasSuffix(l.SecurityProtocol, "SSL")
		switch {
		case l.Listen == "":
			return sec, nil, fmt.Errorf("listeners[%d].listen: required", i)
		case wantTLS && l.TLS == nil:
			return sec, nil, fmt.Errorf("listeners[%d].tls: required with security_protocol %s", i, l.SecurityProtocol)
		case !wantTLS && l.TLS != nil:
			return sec, nil, fmt.Errorf("listeners[%d].tls: set with security_protocol %s (want SSL or SASL_SSL)", i, orDefault(l.SecurityProtocol, "PLAINTEXT"))
		case bl.SASL && len(sec.SASL.Users) == 0:
			return sec, nil, fmt.Errorf("listeners[%d].security_protocol %s: needs sasl.users", i, l.SecurityProtocol)
		}
		if l.TLS != nil {
			bl.TLS = &broker.TLSConfig{CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile, ClientCAFile: l.TLS.ClientCAFile, RequireClientCert: l.TLS.RequireClientCert}
		}
		if bl.Name == "" {
			bl.Name = fmt.Sprintf("%s-%d", bl.Protocol(), i)
		}
		ls = append(ls, bl)
	}
	return sec, ls, nil
}

// openListeners binds the configured listeners and loads their TLS
// files; on error the ones bound are closed.
func openListeners(c serveConfig, ls []broker.Listener, logger *slog.Logger) ([]*broker.SecureListener, error) {
	var out []*broker.SecureListener
	fail := func(err error) ([]*broker.SecureListener, error) {
		for _, sl := range out {
			_ = sl.Close()
		}
		return nil, err
	}
	for i, l := range ls {
		ln, err := net.Listen("tcp", c.Listeners[i].Listen)
		if err != nil {
			return fail(fmt.Errorf("listeners[%d].listen %s: %v", i, c.Listeners[i].Listen, err))
		}
		if l.Advertise == "" {
			l.Advertise = advertiseOf(ln.Addr())
		}
		sl, err := broker.NewSecureListener(ln, l, logger)
		if err != nil {
			_ = ln.Close()
			return fail(fmt.Errorf("listeners[%d]: %v", i, err))
		}
		out = append(out, sl)
	}
	return out, nil
}

const saslCredentialUsage = `Usage: strata sasl-credential --user NAME [--iterations N] < password

Reads a password from the first line of stdin and prints the sasl.users
entry of the strata serve config for that user: its SCRAM-SHA-256 and
SCRAM-SHA-512 credentials (salted and hashed; the password is not kept).
PLAIN logins are checked against the same credentials.

`

// runSASLCredential implements `strata sasl-credential`.
func runSASLCredential(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata sasl-credential", saslCredentialUsage, stderr)
	user := fs.String("user", "", "the user name (required)")
	iters := fs.Int("iterations", broker.DefaultSCRAMIterations, fmt.Sprintf("SCRAM iterations, %d to %d", broker.MinSCRAMIterations, broker.MaxSCRAMIterations))
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	if *user == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "strata sasl-credential: --user is required and there are no arguments (the password comes on stdin)")
		return 2
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "strata sasl-credential: reading the password: %v\n", err)
		return 2
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		fmt.Fprintln(stderr, "strata sasl-credential: empty password on stdin")
		return 2
	}
	entry := saslUserSpec{Name: *user}
	for _, m := range []string{broker.MechanismSCRAMSHA256, broker.MechanismSCRAMSHA512} {
		c, err := broker.NewSCRAMCredential(m, password, *iters)
		if err != nil {
			fmt.Fprintf(stderr, "strata sasl-credential: %v\n", err)
			return 2
		}
		entry.Credentials = append(entry.Credentials, c.Encode())
	}
	out, err := yaml.Marshal([]saslUserSpec{entry})
	if err != nil {
		fmt.Fprintf(stderr, "strata sasl-credential: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// stdinOf is the process's stdin (a variable for tests).
var stdinOf io.Reader = os.Stdin
