package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/drivers/nfs"
	"github.com/stratastream/strata/internal/yamlconf"
	"github.com/stratastream/strata/stream"
	"github.com/stratastream/strata/stream/plugin"
)

const serveUsage = `Usage: strata serve [--config FILE] [--listen HOST:PORT] [--data DIR] [flags]

Runs a stateless Kafka-protocol broker on shared storage. Without --config it
runs on the embedded default: the nfs driver, in process, on the --data
directory. With --config the drivers named there are loaded at startup (see
docs/operating.md). Flags override the config file.

`

// serveConfig is the `strata serve --config` file (YAML).
type serveConfig struct {
	// Cluster names the cluster; brokers with the same cluster on the same
	// storage take over from each other. Default "strata".
	Cluster string `yaml:"cluster"`
	// Listen is the plaintext Kafka listener (default 127.0.0.1:9092, or
	// none when Listeners are set).
	Listen string `yaml:"listen"`
	// Listeners are more Kafka listeners, each with its security protocol
	// (docs/security.md).
	Listeners []listenerSpec `yaml:"listeners"`
	// Advertise is the HOST:PORT clients are told (default: Listen, with an
	// unspecified host replaced by the machine's hostname).
	Advertise string `yaml:"advertise"`
	// HTTP is the listener of /metrics, /healthz and /readyz (default: off).
	HTTP string `yaml:"http"`
	// AutoCreateTopics creates topics clients ask for (default true).
	AutoCreateTopics *bool `yaml:"auto_create_topics"`
	// DefaultPartitions of auto-created topics (default 1).
	DefaultPartitions int32 `yaml:"default_partitions"`
	// MaxRequestBytes is the largest request accepted (default 100 MiB).
	MaxRequestBytes int `yaml:"max_request_bytes"`
	// MaxConnections caps open client connections (default 10000).
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP caps the open connections of one client address
	// (default 1000).
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// IdleTimeout closes connections without a request for that long
	// (default 10m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// RequestTimeout bounds the arrival of a request once begun and the
	// writing of a response (default 60s).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// FetchMaxBytes caps the records of one Fetch response (default 55 MiB).
	FetchMaxBytes int `yaml:"fetch_max_bytes"`
	// FetchMemoryBytes bounds the records of Fetch responses held at once
	// across connections (default 256 MiB).
	FetchMemoryBytes int `yaml:"fetch_memory_bytes"`
	// MaxFetchSessions bounds the incremental fetch sessions (KIP-227)
	// kept across connections (default 1000; -1: none).
	MaxFetchSessions int `yaml:"max_fetch_sessions"`
	// MaxPartitionsPerTopic caps a topic's partitions (default 10000).
	MaxPartitionsPerTopic int32 `yaml:"max_partitions_per_topic"`
	// MaxPartitions caps the partitions of all topics (default 50000).
	MaxPartitions int `yaml:"max_partitions"`
	// LogFormat is text (default) or json; LogLevel debug, info (default),
	// warn or error.
	LogFormat string `yaml:"log_format"`
	LogLevel  string `yaml:"log_level"`
	// Drivers are loaded at startup; the first (or DefaultDriver) holds the
	// cluster's own streams and every topic no Topics route matches.
	Drivers       []driverSpec `yaml:"drivers"`
	DefaultDriver string       `yaml:"default_driver"`
	// Topics route topic-name prefixes to drivers.
	Topics []topicRoute `yaml:"topics"`
	// StreamSets configures write-ahead stream sets for the embedded
	// default and for every driver without a stream_sets of its own.
	StreamSets *streamSetsConfig `yaml:"stream_sets"`
	// Etcd makes the broker one of a cluster coordinated by etcd (see
	// docs/operating.md, "A cluster of brokers"); --etcd sets its
	// endpoints.
	Etcd *etcdConfig `yaml:"etcd"`
	// SASL holds the users of SASL listeners; ACLs turns authorization
	// on; HandshakeTimeout bounds a connection's TLS handshake and SASL
	// exchange (default 10s).
	SASL             *saslSpec     `yaml:"sasl"`
	ACLs             *aclSpec      `yaml:"acls"`
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// TLS is refused: TLS is set per listener.
	TLS yaml.Node `yaml:"tls"`
}

// driverSpec is one driver to load.
type driverSpec struct {
	// Name identifies the driver in routes, logs and metrics (default: Driver).
	Name string `yaml:"name"`
	// Driver is the built-in driver (memory, nfs, s3, azure, hdfs) when
	// Binary is "builtin" or empty.
	Driver string `yaml:"driver"`
	// Binary is "builtin" (default) or the path of a plugin binary.
	Binary string `yaml:"binary"`
	// SHA256 pins the plugin binary (64 hex digits).
	SHA256 string `yaml:"sha256"`
	// Config is the driver's own config, passed to it as YAML.
	Config yaml.Node `yaml:"config"`
	// RestartDelay is how long the broker waits before restarting the
	// driver's process after it died (default 500ms); failed restarts
	// double it up to 30s.
	RestartDelay time.Duration `yaml:"restart_delay"`
	// AllowNonDurable accepts a driver whose Info says it is not durable or
	// not shared between processes (the memory driver): for tests only.
	AllowNonDurable bool `yaml:"allow_non_durable"`
	// StreamSets overrides the top-level stream_sets for this driver.
	StreamSets *streamSetsConfig `yaml:"stream_sets"`
}

// topicRoute sends topics whose names start with Prefix to Driver.
type topicRoute struct {
	Prefix string `yaml:"prefix"`
	Driver string `yaml:"driver"`
}

func parseServeConfig(b []byte) (serveConfig, error) {
	var c serveConfig
	if err := yamlconf.Decode(b, &c); err != nil && !errors.Is(err, io.EOF) {
		return c, err
	}
	if _, _, err := c.security(); err != nil {
		return c, err
	}
	if len(c.Drivers) == 0 && (len(c.Topics) > 0 || c.DefaultDriver != "") {
		return c, errors.New("drivers: topics and default_driver need drivers (a config without drivers uses the embedded default, nfs on --data)")
	}
	seen := map[string]bool{}
	for i := range c.Drivers {
		d := &c.Drivers[i]
		if d.Binary == "" {
			d.Binary = "builtin"
		}
		if d.Binary == "builtin" && !isBuiltin(d.Driver) {
			return c, fmt.Errorf("drivers[%d].driver: %q is not a built-in driver (%s); set binary to a plugin path for others", i, d.Driver, strings.Join(builtinDrivers, ", "))
		}
		if d.Name == "" {
			d.Name = d.Driver
		}
		if d.Name == "" {
			return c, fmt.Errorf("drivers[%d].name: required with a plugin binary", i)
		}
		if seen[d.Name] {
			return c, fmt.Errorf("drivers[%d].name: %q used twice", i, d.Name)
		}
		seen[d.Name] = true
		if d.RestartDelay < 0 {
			return c, fmt.Errorf("drivers[%d].restart_delay: %s is negative", i, d.RestartDelay)
		}
		if d.SHA256 != "" && len(d.SHA256) != 64 {
			return c, fmt.Errorf("drivers[%d].sha256: want 64 hex digits, got %d characters", i, len(d.SHA256))
		}
	}
	if c.DefaultDriver != "" && !seen[c.DefaultDriver] {
		return c, fmt.Errorf("default_driver: %q is not one of the drivers", c.DefaultDriver)
	}
	for i, r := range c.Topics {
		if !seen[r.Driver] {
			return c, fmt.Errorf("topics[%d].driver: %q is not one of the drivers", i, r.Driver)
		}
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return c, fmt.Errorf("log_format: %q: want text or json", c.LogFormat)
	}
	return c, nil
}

// runServe implements `strata serve`.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata serve", serveUsage, stderr)
	var (
		configPath = fs.String("config", "", "broker config file (YAML): drivers to load, topics routing, listeners")
		listen     = fs.String("listen", "", "Kafka listener HOST:PORT (default 127.0.0.1:9092)")
		data       = fs.String("data", "./strata-data", "directory of the embedded default (nfs driver) when there is no --config")
		httpAddr   = fs.String("http", "", "listener HOST:PORT for /metrics, /healthz and /readyz (default off)")
		cluster    = fs.String("cluster", "", "cluster name (default strata)")
		advertise  = fs.String("advertise", "", "HOST:PORT advertised to clients (default the listener)")
		logFormat  = fs.String("log-format", "", "log format: text or json")
		logLevel   = fs.String("log-level", "", "log level: debug, info, warn, error")
		etcd       = fs.String("etcd", "", "etcd endpoints HOST:PORT,...: share the cluster's partitions with the other brokers registered there (default off: one broker serves the cluster)")
	)
	if done, code := parseFlags(fs, args, stdout); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata serve: %s\n", fmt.Sprintf(format, a...))
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q (flags only; see strata serve -h)", fs.Arg(0))
	}
	var cfg serveConfig
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			return bad("reading --config: %v", err)
		}
		if cfg, err = parseServeConfig(b); err != nil {
			return bad("config %s: %v", *configPath, err)
		}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Listen, *listen)
	set(&cfg.HTTP, *httpAddr)
	set(&cfg.Cluster, *cluster)
	set(&cfg.Advertise, *advertise)
	set(&cfg.LogFormat, *logFormat)
	set(&cfg.LogLevel, *logLevel)
	if cfg.Listen == "" && len(cfg.Listeners) == 0 {
		cfg.Listen = "127.0.0.1:9092"
	}
	if *etcd != "" {
		if cfg.Etcd == nil {
			cfg.Etcd = &etcdConfig{}
		}
		cfg.Etcd.Endpoints = strings.Split(*etcd, ",")
	}
	if cfg.Etcd != nil {
		if err := cfg.Etcd.check(); err != nil {
			return bad("%v", err)
		}
	}
	var level slog.Level
	if cfg.LogLevel != "" {
		if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
			return bad("log level %q: want debug, info, warn or error", cfg.LogLevel)
		}
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if cfg.LogFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(handler)
	slog.SetDefault(logger)
	setBrokerProcs(logger)

	defer plugin.CleanupClients()
	stores, err := loadStores(ctx, cfg, *data, logger)
	for _, s := range stores {
		defer s.store.Close()
	}
	if err != nil {
		logger.Error("startup failed", "err", err)
		fmt.Fprintf(stderr, "strata serve: %v\n", err)
		return 1
	}

	sec, secListeners, err := cfg.security()
	if err != nil {
		return bad("config: %v", err)
	}
	// The plaintext listener (--listen) first: it stays what it was.
	var ln net.Listener
	if cfg.Listen != "" {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return bad("--listen %s: %v", cfg.Listen, err)
		}
		defer ln.Close()
	}
	sls, err := openListeners(cfg, secListeners, logger)
	if err != nil {
		return bad("%v", err)
	}
	for _, sl := range sls {
		defer sl.Close()
	}
	first := ln
	if first == nil {
		first = sls[0]
	}
	// Every listener is bound before the broker takes the cluster (a new
	// epoch fences the running broker): a busy port must not leave the
	// cluster with no broker serving.
	var hln net.Listener
	if cfg.HTTP != "" {
		if hln, err = net.Listen("tcp", cfg.HTTP); err != nil {
			return bad("--http %s: %v", cfg.HTTP, err)
		}
		defer hln.Close()
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = advertiseOf(first.Addr())
	}
	bcfg := broker.Config{
		Cluster:               cfg.Cluster,
		Store:                 stores[0].store,
		Driver:                stores[0].name,
		Advertise:             adv,
		MaxRequestBytes:       cfg.MaxRequestBytes,
		MaxConnections:        cfg.MaxConnections,
		MaxConnectionsPerIP:   cfg.MaxConnectionsPerIP,
		IdleTimeout:           cfg.IdleTimeout,
		RequestTimeout:        cfg.RequestTimeout,
		FetchMaxBytes:         cfg.FetchMaxBytes,
		FetchMemoryBytes:      cfg.FetchMemoryBytes,
		MaxFetchSessions:      cfg.MaxFetchSessions,
		MaxPartitionsPerTopic: cfg.MaxPartitionsPerTopic,
		MaxPartitions:         cfg.MaxPartitions,
		AutoCreateTopics:      cfg.AutoCreateTopics == nil || *cfg.AutoCreateTopics,
		DefaultPartitions:     cfg.DefaultPartitions,
		Security:              sec,
		Logger:                logger,
	}
	for _, r := range cfg.Topics {
		for _, s := range stores {
			if s.name == r.Driver {
				bcfg.Routes = append(bcfg.Routes, broker.Route{Prefix: r.Prefix, Driver: s.name, Store: s.store})
			}
		}
	}
	if cfg.Etcd != nil {
		m, err := joinCluster(ctx, cfg, *data, adv, logger)
		if err != nil {
			logger.Error("startup failed", "err", err)
			fmt.Fprintf(stderr, "strata serve: %v\n", err)
			return 1
		}
		defer m.Close()
		bcfg.Membership = m
	}
	b, err := broker.New(ctx, bcfg)
	if err != nil {
		if code := superseded(err, logger, stderr); code != 0 {
			return code
		}
		logger.Error("startup failed", "err", err)
		fmt.Fprintf(stderr, "strata serve: %v\n", err)
		return 1
	}
	defer b.Close()
	if hln != nil {
		srv := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(hln) }()
		defer srv.Close()
		logger.Info("serving metrics and health", "http", hln.Addr().String())
	}
	who := fmt.Sprintf("broker epoch %d", b.Epoch())
	if bcfg.Membership != nil {
		who = fmt.Sprintf("node %d of the cluster in etcd", bcfg.Membership.ID())
	}
	errc := make(chan error, 1+len(sls))
	if ln != nil {
		go func() { errc <- b.Serve(ln) }()
		fmt.Fprintf(stdout, "strata serve: cluster %s, %s, Kafka listener %s (advertised %s)\n", orDefault(cfg.Cluster, "strata"), who, ln.Addr(), adv)
	}
	for i, sl := range sls {
		go func() { errc <- b.ServeListener(sl) }()
		fmt.Fprintf(stdout, "strata serve: cluster %s, %s, Kafka listener %s %s (advertised %s)\n", orDefault(cfg.Cluster, "strata"), who, secListeners[i].Protocol(), sl.Addr(), sl.Advertise())
	}
	select {
	case <-ctx.Done():
		if bcfg.Membership != nil {
			leave(b, logger)
		}
		logger.Info("shutting down")
		return 0
	case err := <-errc:
		if err != nil {
			logger.Error("listener failed", "err", err)
			return 1
		}
		return 0
	case <-b.Superseded():
		return superseded(b.Err(), logger, stderr)
	}
}

// leaveTimeout bounds the hand-over of a clustered broker's partitions at
// a graceful stop.
const leaveTimeout = 20 * time.Second

// leave hands the broker's partitions over to the rest of its cluster
// before it stops (broker.Leave), for at most leaveTimeout; a second
// SIGINT or SIGTERM stops it at once.
func leave(b *broker.Broker, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	logger.Info("leaving the cluster: handing the partitions over to the other brokers (a second signal stops at once)")
	began := time.Now()
	left, err := b.Leave(ctx)
	if err != nil {
		logger.Warn("stopping before every partition was handed over: the others take the rest when this broker's lease ends", "left", left, "err", err)
		return
	}
	logger.Info("partitions handed over", "took", time.Since(began).Round(time.Millisecond))
}

// exitSuperseded is the exit status of a broker that another broker took
// over: while it started or while it served.
const exitSuperseded = 3

// superseded reports a takeover by a newer broker (a *broker.SupersededError)
// in the operator's words and returns exitSuperseded; 0 for any other err.
func superseded(err error, logger *slog.Logger, stderr io.Writer) int {
	var se *broker.SupersededError
	if !errors.As(err, &se) {
		return 0
	}
	logger.Error("a newer broker took over the cluster; exiting", "cluster", se.Cluster, "epoch", se.Epoch, "newer_epoch", se.Newer, "err", se.Err)
	fmt.Fprintf(stderr, "strata serve: %v; exiting\n", se)
	return exitSuperseded
}

// advertiseOf is the address to advertise for a listener bound to addr:
// an unspecified host (0.0.0.0) becomes the machine's hostname.
func advertiseOf(addr net.Addr) string {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// loadedStore is one driver's store; the first one is the default.
type loadedStore struct {
	name  string
	store *stream.Store
}

// loadStores opens the drivers: the embedded default (nfs in process on
// dataDir) without a config, else every configured driver through
// stream/plugin, each checked by its Info. A configured driver's process is
// supervised: restarted when it dies (plugin.OpenSupervised).
func loadStores(ctx context.Context, cfg serveConfig, dataDir string, logger *slog.Logger) ([]loadedStore, error) {
	if len(cfg.Drivers) == 0 {
		dir, err := filepath.Abs(dataDir)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %v", dataDir, err)
		}
		st, err := nfs.Open(ctx, fmt.Appendf(nil, "root: %q\ncreate_root: true\n", dir))
		if err != nil {
			return nil, fmt.Errorf("embedded default (nfs driver on %s): %w", dir, err)
		}
		logger.Info("driver loaded", "name", "nfs", "mode", "in-process (embedded default)", "root", dir)
		if err := checkInfo("nfs", st, false); err != nil {
			return []loadedStore{{name: "nfs", store: st}}, err
		}
		ws, err := withStreamSets("nfs", "nfs", st, cfg.StreamSets.merged(nil), nfs.LogStoreDir(dir), logger)
		if err != nil {
			return []loadedStore{{name: "nfs", store: st}}, err
		}
		return []loadedStore{{name: "nfs", store: ws}}, nil
	}
	var out []loadedStore
	for i, d := range cfg.Drivers {
		st, err := loadDriver(ctx, d, logger)
		if err != nil {
			return out, fmt.Errorf("drivers[%d] %s: %w", i, d.Name, err)
		}
		if err := checkInfo(d.Name, st, d.AllowNonDurable); err != nil {
			out = append(out, loadedStore{name: d.Name, store: st})
			return out, fmt.Errorf("drivers[%d] %s: %w", i, d.Name, err)
		}
		ws, err := withStreamSets(d.Name, builtinKind(d), st, d.StreamSets.merged(cfg.StreamSets), "", logger)
		if err != nil {
			out = append(out, loadedStore{name: d.Name, store: st})
			return out, fmt.Errorf("drivers[%d] %s: %w", i, d.Name, err)
		}
		out = append(out, loadedStore{name: d.Name, store: ws})
	}
	if cfg.DefaultDriver != "" {
		for i, s := range out {
			if s.name == cfg.DefaultDriver {
				out[0], out[i] = out[i], out[0]
			}
		}
	}
	return out, nil
}

func loadDriver(ctx context.Context, d driverSpec, logger *slog.Logger) (*stream.Store, error) {
	target := d.Binary
	if target == "builtin" {
		target = d.Driver
	}
	drv, err := resolveDriver(target)
	if err != nil {
		return nil, err
	}
	var config []byte
	if !d.Config.IsZero() {
		if config, err = yaml.Marshal(&d.Config); err != nil {
			return nil, fmt.Errorf("config: %v", err)
		}
	}
	opts := append(drv.options(), plugin.WithLogger(logger.With("driver", d.Name)))
	if d.SHA256 != "" {
		opts = append(opts, plugin.WithSHA256(d.SHA256))
	}
	if d.RestartDelay > 0 {
		opts = append(opts, plugin.WithRestartDelay(d.RestartDelay))
	}
	st, err := plugin.OpenSupervised(ctx, drv.Path, config, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading plugin %s: %w", drv, err)
	}
	logger.Info("driver loaded", "name", d.Name, "command", drv.String(), "pinned", d.SHA256 != "", "driver", st.Info().Driver, "version", st.Info().Version)
	return stream.NewStore(st), nil
}

// checkInfo refuses a driver the broker cannot run on.
func checkInfo(name string, st *stream.Store, allowNonDurable bool) error {
	info := st.Info()
	switch {
	case info.Driver == "":
		return errors.New("info check: the driver reports no name")
	case info.MaxBatchBytes < 1<<20:
		return fmt.Errorf("info check: MaxBatchBytes %d is below the 1 MiB a Kafka batch needs", info.MaxBatchBytes)
	case info.MaxFetchBytes <= 0:
		return fmt.Errorf("info check: MaxFetchBytes %d", info.MaxFetchBytes)
	case !allowNonDurable && !info.Durable:
		return fmt.Errorf("info check: driver %s (%s) is not durable (acks would not survive a crash); set allow_non_durable: true for tests", name, info.Driver)
	case !allowNonDurable && !info.SharedNamespace:
		return fmt.Errorf("info check: driver %s (%s) has no shared namespace (no takeover possible); set allow_non_durable: true for tests", name, info.Driver)
	}
	return nil
}
