package nfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stratastream/strata/drivers/internal/driverconfig"
	"github.com/stratastream/strata/stream"
)

// Config configures the nfs driver. It is parsed from YAML, JSON or a
// file:// URL (see ParseConfig); unknown fields are an error. Durations are
// strings such as "2ms".
//
//	root: /mnt/strata        # required; an absolute directory
//	create_root: false       # create root (and parents) if missing
//	fsync: true              # fsync files and directories (default true)
//	temp_max_age: 1h         # temp files older than this are torn: removed
//	direct_io: true          # write the bulk of large puts with O_DIRECT (default: as fsync)
//	file_mode: "0600"        # permissions of the files it creates (octal; default 0600)
//	dir_mode: "0700"         # permissions of the directories it creates (octal; default 0700)
//	linger: 0s               # engine: group-commit wait
//	max_chunk_bytes: 4194304 # engine: group-commit byte threshold
//	max_inflight_chunks: 4   # engine: chunk puts in flight per stream
//	max_batch_bytes: 8388608 # engine: largest batch
//	cache_bytes: 33554432    # engine: per-stream cache of recent chunks
type Config struct {
	// Root is the directory that holds the store: a shared POSIX mount
	// (NFS, EFS, NetApp) or a local directory. Must be absolute. Required.
	Root string `yaml:"root"`
	// CreateRoot creates Root (and its parents) when it does not exist.
	// Off by default, so that a mount point whose file system is not
	// mounted is an error rather than a silent write to the local disk.
	CreateRoot bool `yaml:"create_root"`
	// Fsync makes every put durable before it returns: the file is fsynced
	// before it is linked and the directory after (default true). Off, acks
	// survive a crash of the process but not of the host; Info.Durable then
	// reports false.
	Fsync *bool `yaml:"fsync"`
	// TempMaxAge is the age after which a temp file left by any host is
	// torn (its writer died mid-put) and removed when a Storage opens
	// (default 1h). Temp files of dead processes of this host are removed
	// at once, whatever their age.
	TempMaxAge time.Duration `yaml:"temp_max_age"`
	// DirectIO writes the block-aligned bulk of puts of DirectMinBytes or
	// more (the engine's larger chunks) with O_DIRECT, so that the kernel
	// does not copy them into the page cache. Default: on when Fsync is on.
	// With Fsync off a put does not wait for the device, and a direct write
	// would make it wait. Where the file system refuses O_DIRECT (some FUSE
	// mounts, old tmpfs) the Storage writes through the page cache, as with
	// DirectIO off. Durability is the same either way: the temp file is
	// fsynced before it is linked.
	DirectIO *bool `yaml:"direct_io"`
	// FileMode is the permission bits of every file the Storage creates
	// (default 0600: only the owner reads records), DirMode those of every
	// directory it creates, the root with CreateRoot included (default
	// 0700). Octal, as a string ("0640") or "0o640"; at most 0777. The
	// process umask applies on top, as to any file created. Files and
	// directories that exist keep their modes.
	FileMode Perm `yaml:"file_mode"`
	DirMode  Perm `yaml:"dir_mode"`

	// Linger is the engine's group-commit wait (chunked.Options.Linger).
	Linger time.Duration `yaml:"linger"`
	// MaxChunkBytes is the engine's group-commit byte threshold
	// (chunked.Options.MaxChunkBytes; 0: the engine's default).
	MaxChunkBytes int `yaml:"max_chunk_bytes"`
	// MaxInflightChunks is how many chunk puts of one stream may be in
	// flight (chunked.Options.MaxInflightChunks; 0: the engine's default).
	MaxInflightChunks int `yaml:"max_inflight_chunks"`
	// MaxBatchBytes is the largest batch (chunked.Options.MaxBatchBytes;
	// 0: stream.DefaultMaxBatchBytes).
	MaxBatchBytes int `yaml:"max_batch_bytes"`
	// CacheBytes bounds each stream's cache of recent chunks
	// (chunked.Options.CacheBytes; 0: the engine's default, negative: none).
	CacheBytes int64 `yaml:"cache_bytes"`

	// Logger receives the driver's and the engine's logs (nil:
	// slog.Default(); in a plugin binary that reaches the host). It is not
	// part of the config document.
	Logger *slog.Logger `yaml:"-"`
}

// logger is c.Logger or slog.Default().
func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// DefaultTempMaxAge is Config.TempMaxAge's default.
const DefaultTempMaxAge = time.Hour

// Defaults of Config.FileMode and Config.DirMode: private to the owner.
const (
	DefaultFileMode Perm = 0o600
	DefaultDirMode  Perm = 0o700
)

// Perm is a set of permission bits (0 to 0777), written in octal in a
// config: "0600", "0o600" or 600. 0 in a Config means the default.
type Perm uint32

// UnmarshalYAML implements yaml.Unmarshaler: the value is octal.
func (p *Perm) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimPrefix(strings.TrimPrefix(n.Value, "0o"), "0O")
	m, err := strconv.ParseUint(v, 8, 32)
	if n.Kind != yaml.ScalarNode || err != nil || m == 0 || m > 0o777 {
		return fmt.Errorf("%q is not a permission mode in octal, 0001 to 0777 (as \"0600\")", n.Value)
	}
	*p = Perm(m)
	return nil
}

func (p Perm) String() string { return fmt.Sprintf("%#o", uint32(p)) }

// mode is p as an fs.FileMode.
func (p Perm) mode() fs.FileMode { return fs.FileMode(p) & fs.ModePerm }

// ParseConfig parses and validates a YAML or JSON config, or a file://
// URL, and applies the defaults. Errors wrap stream.ErrInvalidArgument and
// name the bad field.
//
// The URL form carries the root as its path and any other field as a query
// parameter: file:///mnt/strata?linger=2ms&fsync=false&create_root=true.
func ParseConfig(config []byte) (Config, error) {
	var c Config
	doc, err := configFields(config)
	if err != nil {
		return c, err
	}
	fields := reflect.ValueOf(&c).Elem()
	for name, node := range doc {
		i := slices.IndexFunc(reflect.VisibleFields(fields.Type()), func(f reflect.StructField) bool {
			return f.Tag.Get("yaml") == name && name != "-" // Logger is not a field of the document
		})
		if i < 0 {
			return c, driverconfig.Invalid(DriverName, name, "unknown field")
		}
		if err := node.Decode(fields.Field(i).Addr().Interface()); err != nil {
			return c, driverconfig.Invalid(DriverName, name, "%v", err)
		}
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	return c.withDefaults(), nil
}

// configFields splits a config into its fields, by YAML name.
func configFields(config []byte) (map[string]yaml.Node, error) {
	text := strings.TrimSpace(string(config))
	if !strings.HasPrefix(text, "file://") {
		var doc map[string]yaml.Node
		if err := yaml.Unmarshal(config, &doc); err != nil {
			return nil, fmt.Errorf("%w: nfs config: not YAML, JSON or a file:// URL: %v", stream.ErrInvalidArgument, err)
		}
		return doc, nil
	}
	u, err := url.Parse(text)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: nfs config URL: %v", stream.ErrInvalidArgument, err)
	case u.Host != "" && u.Host != "localhost":
		return nil, fmt.Errorf("%w: nfs config URL: root: %q has a host; want file:///absolute/path", stream.ErrInvalidArgument, text)
	}
	scalar := func(v string) yaml.Node { return yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	doc := map[string]yaml.Node{"root": scalar(u.Path)}
	for k, vs := range u.Query() {
		if k == "root" {
			return nil, fmt.Errorf("%w: nfs config URL: root: give it as the URL's path, not a parameter", stream.ErrInvalidArgument)
		}
		doc[k] = scalar(vs[len(vs)-1])
	}
	return doc, nil
}

func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return driverconfig.Invalid(DriverName, field, format, args...)
	}
	switch {
	case c.Root == "":
		return bad("root", "required (the directory that holds the store)")
	case !filepath.IsAbs(c.Root):
		return bad("root", "%q is not an absolute path", c.Root)
	case bytes.IndexByte([]byte(c.Root), 0) >= 0:
		return bad("root", "contains a NUL byte")
	case c.TempMaxAge < 0:
		return bad("temp_max_age", "%v is negative", c.TempMaxAge)
	case c.FileMode > 0o777:
		return bad("file_mode", "%v has bits beyond 0777", c.FileMode)
	case c.DirMode > 0o777:
		return bad("dir_mode", "%v has bits beyond 0777", c.DirMode)
	}
	return c.engine().Validate(DriverName, "")
}

// engine is the engine section of c, whose fields sit at the top of the
// config.
func (c Config) engine() driverconfig.Engine {
	return driverconfig.Engine{
		Linger:            c.Linger,
		MaxChunkBytes:     c.MaxChunkBytes,
		MaxInflightChunks: c.MaxInflightChunks,
		MaxBatchBytes:     c.MaxBatchBytes,
		CacheBytes:        c.CacheBytes,
	}
}

func (c Config) withDefaults() Config {
	c.Root = filepath.Clean(c.Root)
	if c.Fsync == nil {
		on := true
		c.Fsync = &on
	}
	if c.TempMaxAge == 0 {
		c.TempMaxAge = DefaultTempMaxAge
	}
	if c.FileMode == 0 {
		c.FileMode = DefaultFileMode
	}
	if c.DirMode == 0 {
		c.DirMode = DefaultDirMode
	}
	return c
}

// fsync reports whether fsync is on (Config.Fsync, default true).
func (c Config) fsync() bool { return c.Fsync == nil || *c.Fsync }

// directIO reports whether direct writes are on (Config.DirectIO, default:
// as fsync).
func (c Config) directIO() bool {
	if c.DirectIO == nil {
		return c.fsync()
	}
	return *c.DirectIO
}
