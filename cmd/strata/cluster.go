package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/internal/cluster"
)

// etcdConfig is the `etcd` section of the serve config: with it (or
// --etcd) the broker is one of a cluster whose partitions are shared by
// brokers coordinated through etcd.
type etcdConfig struct {
	// Endpoints are the etcd client endpoints (HOST:PORT or URLs).
	Endpoints []string `yaml:"endpoints"`
	// Prefix is the etcd key prefix of the cluster (default
	// /strata/CLUSTER/).
	Prefix string `yaml:"prefix"`
	// LeaseTTL is how long a broker that stopped renewing its lease keeps
	// its partitions (default 2s).
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// DialTimeout bounds the startup check of etcd (default 5s).
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// Username and Password (or PasswordFile) authenticate to etcd.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// TLS configures TLS to etcd.
	TLS *etcdTLS `yaml:"tls"`
}

// etcdTLS is TLS to etcd: the CA that signed the servers' certificates
// and, for client certificate authentication, a certificate and key.
type etcdTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// check validates the section.
func (c *etcdConfig) check() error {
	if len(c.Endpoints) == 0 {
		return errors.New("etcd.endpoints: at least one endpoint is required")
	}
	for i, e := range c.Endpoints {
		if strings.TrimSpace(e) == "" {
			return fmt.Errorf("etcd.endpoints[%d]: empty", i)
		}
	}
	if c.LeaseTTL != 0 && c.LeaseTTL < time.Second {
		return fmt.Errorf("etcd.lease_ttl: %s is below etcd's minimum of 1s", c.LeaseTTL)
	}
	if c.DialTimeout < 0 {
		return fmt.Errorf("etcd.dial_timeout: %s is negative", c.DialTimeout)
	}
	if c.Password != "" && c.PasswordFile != "" {
		return errors.New("etcd: set password or password_file, not both")
	}
	if (c.Password != "" || c.PasswordFile != "") && c.Username == "" {
		return errors.New("etcd.username: required with a password")
	}
	if t := c.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("etcd.tls: cert_file and key_file go together")
	}
	return nil
}

// tlsConfig builds the TLS config to etcd (nil without a tls section).
func (c *etcdConfig) tlsConfig() (*tls.Config, error) {
	if c.TLS == nil {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLS.ServerName}
	if c.TLS.CAFile != "" {
		pem, err := os.ReadFile(c.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd.tls.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd.tls.ca_file %s: no PEM certificate in it", c.TLS.CAFile)
		}
	}
	if c.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd.tls: loading cert_file/key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// storageIdentity names the storage of the cluster's default driver, so
// that a broker configured for other storage is refused by the cluster
// instead of fencing its partitions: the embedded default's directory, or
// the default driver's name, kind and a digest of its config.
func storageIdentity(cfg serveConfig, dataDir string) (string, error) {
	if len(cfg.Drivers) == 0 {
		dir, err := filepath.Abs(dataDir)
		if err != nil {
			return "", fmt.Errorf("--data %s: %v", dataDir, err)
		}
		return "nfs:" + dir, nil
	}
	d := cfg.Drivers[0]
	for _, x := range cfg.Drivers {
		if x.Name == cfg.DefaultDriver {
			d = x
		}
	}
	raw, err := yaml.Marshal(&d.Config)
	if err != nil {
		return "", fmt.Errorf("drivers %s config: %v", d.Name, err)
	}
	sum := sha256.Sum256(raw)
	return fmt.Sprintf("%s:%s:%s", d.Name, orDefault(d.Driver, d.Binary), hex.EncodeToString(sum[:8])), nil
}

// joinCluster joins the etcd-coordinated cluster as the broker advertised
// at adv.
func joinCluster(ctx context.Context, cfg serveConfig, dataDir, adv string, logger *slog.Logger) (*cluster.Member, error) {
	ec := cfg.Etcd
	tc, err := ec.tlsConfig()
	if err != nil {
		return nil, err
	}
	password := ec.Password
	if ec.PasswordFile != "" {
		b, err := os.ReadFile(ec.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("etcd.password_file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	storage, err := storageIdentity(cfg, dataDir)
	if err != nil {
		return nil, err
	}
	m, err := cluster.Join(ctx, cluster.Config{
		Endpoints: ec.Endpoints, Prefix: ec.Prefix, Cluster: orDefault(cfg.Cluster, "strata"),
		Storage: storage, Name: adv, Addr: adv, TTL: ec.LeaseTTL, DialTimeout: ec.DialTimeout,
		TLS: tc, Username: ec.Username, Password: password, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("joined the cluster through etcd", "node", m.ID(), "endpoints", strings.Join(ec.Endpoints, ","), "storage", storage)
	return m, nil
}
