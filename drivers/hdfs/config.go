package hdfs

import (
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
)

// Config configures the hdfs driver. It is read from YAML or JSON (see
// ParseConfig) or from an hdfs:// URL. Zero values mean the documented
// defaults.
//
//	namenodes: [nn1.example.com:8020, nn2.example.com:8020]  # required
//	user: strata           # HDFS user (simple auth); required without kerberos
//	root: /strata          # absolute directory holding the store
//	replication: 3         # 0: the NameNode's default
//	block_size: 134217728  # 0: the NameNode's default
//	connections: 4         # NameNode connections (RPCs are serialised per connection)
//	temp_max_age: 15m      # unpublished temp objects older than this are removed
//	timeouts: {connect: 5s, operation: 60s}
//	kerberos: {principal: strata@EXAMPLE.COM, keytab: /etc/strata.keytab,
//	           krb5_conf: /etc/krb5.conf, namenode_spn: nn/_HOST}
//	engine: {linger: 2ms, max_chunk_bytes: 4194304, max_inflight_chunks: 4}
type Config struct {
	// NameNodes are the host:port RPC addresses of the NameNode(s); with
	// HA, all of them (the client fails over on StandbyException).
	// Required.
	NameNodes []string `yaml:"namenodes"`
	// User is the HDFS user the driver acts as with simple authentication.
	// Required unless Kerberos is set (the principal then names the user).
	User string `yaml:"user"`
	// Root is the absolute HDFS directory that holds the store; it is
	// created if missing. Default "/strata".
	Root string `yaml:"root"`
	// Replication of the files the driver writes; 0 takes the NameNode's
	// default (dfs.replication).
	Replication int `yaml:"replication"`
	// BlockSize of the files the driver writes, in bytes; 0 takes the
	// NameNode's default (dfs.blocksize).
	BlockSize int64 `yaml:"block_size"`
	// Connections is how many NameNode connections (clients) the Storage
	// keeps; each serialises its RPCs, so more connections let more puts
	// proceed at once. Default 4.
	Connections int `yaml:"connections"`
	// TempMaxAge is the age after which an unpublished temp object (its
	// writer died or gave up mid-put) is removed. It must be well above
	// Timeouts.Operation. Default 15m.
	TempMaxAge time.Duration `yaml:"temp_max_age"`
	// UseDatanodeHostname connects to DataNodes by hostname instead of IP
	// (dfs.client.use.datanode.hostname), for multi-homed clusters.
	UseDatanodeHostname bool `yaml:"use_datanode_hostname"`
	// DataTransferProtection is "", "authentication", "integrity" or
	// "privacy" (dfs.data.transfer.protection), with Kerberos.
	DataTransferProtection string `yaml:"data_transfer_protection"`
	// Kerberos, when set, authenticates to a secured cluster.
	Kerberos *Kerberos `yaml:"kerberos"`
	// Timeouts bound the driver's waits.
	Timeouts Timeouts `yaml:"timeouts"`
	// Engine tunes the chunked engine (group commit and pipelining).
	Engine Engine `yaml:"engine"`
}

// Kerberos holds the settings passed to the client's Kerberos (SASL
// GSSAPI) support. Exactly one of Keytab and CCache gives the credentials.
type Kerberos struct {
	// Principal is user@REALM (for Keytab); with CCache it is taken from
	// the cache and may be empty.
	Principal string `yaml:"principal"`
	// Keytab is the path of a keytab holding Principal's key.
	Keytab string `yaml:"keytab"`
	// CCache is the path of a credentials cache (from kinit).
	CCache string `yaml:"ccache"`
	// Krb5Conf is the path of krb5.conf. Default /etc/krb5.conf.
	Krb5Conf string `yaml:"krb5_conf"`
	// NameNodeSPN is the NameNode's service principal without the realm,
	// as in dfs.namenode.kerberos.principal, e.g. "nn/_HOST". Required.
	NameNodeSPN string `yaml:"namenode_spn"`
}

// Timeouts bound the driver's waits; running out gives
// stream.ErrUnavailable. Unlike the other chunked drivers, hdfs has no
// per-request timeout: Operation bounds each NameNode RPC too.
type Timeouts struct {
	// Connect bounds dialing a NameNode or DataNode. Default 5s.
	Connect time.Duration `yaml:"connect"`
	// Operation bounds one Storage call (and each NameNode RPC in it).
	// Default 60s.
	Operation time.Duration `yaml:"operation"`
}

// shared is t as the shared Timeouts section (no Request), for its
// defaults and validation.
func (t Timeouts) shared() driverconfig.Timeouts {
	return driverconfig.Timeouts{Connect: t.Connect, Operation: t.Operation}
}

// Engine tunes the chunked engine the driver runs on. Zero values take the
// engine's defaults.
type Engine = driverconfig.Engine

// Defaults of Config.
const (
	DefaultRoot             = "/strata"
	DefaultConnections      = 4
	DefaultTempMaxAge       = 15 * time.Minute
	DefaultConnectTimeout   = driverconfig.DefaultConnectTimeout
	DefaultOperationTimeout = driverconfig.DefaultOperationTimeout
	DefaultKrb5Conf         = "/etc/krb5.conf"
)

// ParseConfig reads a Config from YAML, JSON or an hdfs:// URL, applies the
// defaults and validates it. Unknown fields are an error, so a misspelt
// setting is not silently ignored. Errors wrap stream.ErrInvalidArgument and
// name the bad field.
//
// The URL form is hdfs://NN1:PORT,NN2:PORT/ROOT?user=U&replication=N
// &block_size=N&connections=N&temp_max_age=D&connect_timeout=D
// &operation_timeout=D&linger=D&max_chunk_bytes=N&max_inflight_chunks=N
// &cache_bytes=N (Kerberos needs the YAML form).
func ParseConfig(data []byte) (Config, error) {
	c, err := driverconfig.Decode(DriverName, "hdfs", data, fromURL)
	if err != nil {
		return Config{}, err
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// fromURL reads the hdfs:// form documented on ParseConfig.
func fromURL(u *url.URL) (Config, error) {
	c := Config{Root: u.Path}
	if u.Host != "" {
		c.NameNodes = strings.Split(u.Host, ",")
	}
	p := driverconfig.Params{
		"user":              driverconfig.String(&c.User),
		"replication":       driverconfig.Int(&c.Replication),
		"block_size":        driverconfig.Int64(&c.BlockSize),
		"connections":       driverconfig.Int(&c.Connections),
		"temp_max_age":      driverconfig.Duration(&c.TempMaxAge),
		"connect_timeout":   driverconfig.Duration(&c.Timeouts.Connect),
		"operation_timeout": driverconfig.Duration(&c.Timeouts.Operation),
	}
	c.Engine.AddParams(p)
	// The hdfs:// form has never taken max_batch_bytes (the YAML form
	// does); it stays an unknown parameter here.
	delete(p, "max_batch_bytes")
	if err := p.Apply(DriverName, u.Query()); err != nil {
		return Config{}, err
	}
	return c, nil
}

// withDefaults fills in the documented defaults.
func (c Config) withDefaults() Config {
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if c.Root != "/" {
		c.Root = strings.TrimSuffix(c.Root, "/")
	}
	if c.Connections == 0 {
		c.Connections = DefaultConnections
	}
	if c.TempMaxAge == 0 {
		c.TempMaxAge = DefaultTempMaxAge
	}
	t := c.Timeouts.shared().WithDefaults()
	c.Timeouts = Timeouts{Connect: t.Connect, Operation: t.Operation}
	if c.Kerberos != nil && c.Kerberos.Krb5Conf == "" {
		c.Kerberos.Krb5Conf = DefaultKrb5Conf
	}
	return c
}

// Validate checks a defaulted Config; the error names the bad field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return driverconfig.Invalid(DriverName, field, format, args...)
	}
	if len(c.NameNodes) == 0 {
		return bad("namenodes", "required (host:port of each NameNode)")
	}
	for _, a := range c.NameNodes {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return bad("namenodes", "%q is not host:port", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return bad("namenodes", "%q: bad port", a)
		}
	}
	if c.Kerberos == nil && c.User == "" {
		return bad("user", "required without kerberos")
	}
	if !path.IsAbs(c.Root) || path.Clean(c.Root) != c.Root {
		return bad("root", "%q is not a clean absolute path", c.Root)
	}
	if strings.ContainsAny(c.Root, ":@") {
		return bad("root", "%q: ':' and '@' are not allowed", c.Root)
	}
	switch {
	case c.Replication < 0 || c.Replication > 512:
		return bad("replication", "%d is out of 0..512", c.Replication)
	case c.BlockSize < 0:
		return bad("block_size", "%d < 0", c.BlockSize)
	case c.Connections < 0 || c.Connections > 64:
		return bad("connections", "%d is out of 1..64", c.Connections)
	}
	if err := c.Timeouts.shared().Validate(DriverName); err != nil {
		return err
	}
	if c.TempMaxAge < 2*c.Timeouts.Operation {
		return bad("temp_max_age", "%v must be at least twice timeouts.operation (%v)", c.TempMaxAge, c.Timeouts.Operation)
	}
	if err := c.Engine.Validate(DriverName, "engine."); err != nil {
		return err
	}
	switch c.DataTransferProtection {
	case "", "authentication", "integrity", "privacy":
	default:
		return bad("data_transfer_protection", "%q is not authentication, integrity or privacy", c.DataTransferProtection)
	}
	if k := c.Kerberos; k != nil {
		if (k.Keytab == "") == (k.CCache == "") {
			return bad("kerberos", "exactly one of keytab and ccache is required")
		}
		if k.Keytab != "" && !strings.Contains(k.Principal, "@") {
			return bad("kerberos.principal", "%q is not user@REALM", k.Principal)
		}
		if k.NameNodeSPN == "" {
			return bad("kerberos.namenode_spn", "required (e.g. nn/_HOST)")
		}
	}
	return nil
}
