package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSConfig is the TLS of a listener: its certificate and key from files,
// and optionally the CA that client certificates must chain to. The files
// are re-read when they change: at a handshake, at most once a second, the
// broker compares their modification times and sizes with the loaded ones
// and loads them again; a pair that does not load is logged and the
// previous one kept.
type TLSConfig struct {
	// CertFile and KeyFile are the PEM certificate (chain) and private key
	// of the listener. Required.
	CertFile string
	KeyFile  string
	// ClientCAFile is a PEM file of CA certificates. When set, a client
	// certificate must chain to one of them, and its subject's common name
	// is the connection's principal ("User:CN") unless SASL names one.
	ClientCAFile string
	// RequireClientCert refuses a handshake without a client certificate
	// (needs ClientCAFile). Without it a client certificate is verified
	// when one is sent.
	RequireClientCert bool
}

// tlsFiles holds a TLSConfig's loaded files and reloads them when they
// change on disk.
type tlsFiles struct {
	cfg TLSConfig
	log *slog.Logger

	// server is the listener's config: each handshake takes the current
	// files (config).
	server *tls.Config

	mu      sync.Mutex
	checked time.Time
	stamps  [3]fileStamp
	current *tls.Config
}

// fileStamp is what tells a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// reloadCheckInterval bounds how often a handshake checks the files.
const reloadCheckInterval = time.Second

func newTLSFiles(cfg TLSConfig, log *slog.Logger) (*tlsFiles, error) {
	switch {
	case cfg.CertFile == "" || cfg.KeyFile == "":
		return nil, errors.New("tls: cert_file and key_file are required")
	case cfg.RequireClientCert && cfg.ClientCAFile == "":
		return nil, errors.New("tls: require_client_cert needs client_ca_file")
	}
	f := &tlsFiles{cfg: cfg, log: log}
	stamps, conf, err := f.load()
	if err != nil {
		return nil, err
	}
	f.stamps, f.current, f.checked = stamps, conf, time.Now()
	f.server = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return f.config(), nil },
	}
	return f, nil
}

// files are the paths a tlsFiles watches ("" for none).
func (f *tlsFiles) files() [3]string {
	return [3]string{f.cfg.CertFile, f.cfg.KeyFile, f.cfg.ClientCAFile}
}

// stat returns the stamps of the files.
func (f *tlsFiles) stat() ([3]fileStamp, error) {
	var s [3]fileStamp
	for i, p := range f.files() {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return s, fmt.Errorf("tls: %w", err)
		}
		s[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return s, nil
}

// load reads the files into a server config.
func (f *tlsFiles) load() ([3]fileStamp, *tls.Config, error) {
	stamps, err := f.stat()
	if err != nil {
		return stamps, nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.cfg.CertFile, f.cfg.KeyFile)
	if err != nil {
		return stamps, nil, fmt.Errorf("tls: loading cert_file %s and key_file %s: %w", f.cfg.CertFile, f.cfg.KeyFile, err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(f.cfg.ClientCAFile)
		if err != nil {
			return stamps, nil, fmt.Errorf("tls: client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return stamps, nil, fmt.Errorf("tls: client_ca_file %s holds no PEM certificate", f.cfg.ClientCAFile)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.VerifyClientCertIfGiven
		if f.cfg.RequireClientCert {
			conf.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return stamps, conf, nil
}

// config returns the server config for a handshake, reloading the files
// first if they changed.
func (f *tlsFiles) config() *tls.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.checked) < reloadCheckInterval {
		return f.current
	}
	f.checked = time.Now()
	stamps, err := f.stat()
	if err != nil || stamps == f.stamps {
		return f.current
	}
	stamps, conf, err := f.load()
	if err != nil {
		// A certificate and key written one after the other fail to pair
		// until both are there: keep serving the old pair meanwhile.
		f.log.Warn("reloading the listener's TLS files failed; keeping the loaded ones", "cert_file", f.cfg.CertFile, "err", err)
		return f.current
	}
	f.stamps, f.current = stamps, conf
	f.log.Info("reloaded the listener's TLS files", "cert_file", f.cfg.CertFile)
	return conf
}
