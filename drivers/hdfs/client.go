package hdfs

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gohdfs "github.com/colinmarc/hdfs/v2"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/stratastream/strata/stream"
)

// clients is a small pool of HDFS clients. The client serialises the RPCs
// of one NameNode connection, so several let concurrent puts overlap.
//
// A client whose NameNode connection failed (reset, cut, timed out) is
// replaced by a new one the next time it is picked. The client itself would
// reconnect, but only after refusing every call for 5 s (its back-off per
// NameNode, meant for failing over to another NameNode): with one NameNode
// a single reset would make the driver unavailable for that long after the
// network is back.
type clients struct {
	opts    gohdfs.ClientOptions // without NamenodeDialFunc (set per member)
	cfg     Config
	members []*slot
	next    atomic.Uint32
	closed  atomic.Bool
	retired sync.WaitGroup // replaced clients being closed
}

// slot is one place of the pool: its current member, replaced when broken.
type slot struct {
	mu       sync.Mutex // serialises replacements
	cur      atomic.Pointer[member]
	failedAt time.Time // last replacement that could not connect (under mu)
}

// member is one client and the state of its NameNode connection.
type member struct {
	c *gohdfs.Client
	// broken is set once a read or write on its NameNode connection
	// failed, or a dial did.
	broken atomic.Bool
	// conn is its latest NameNode connection.
	conn atomic.Pointer[deadlineConn]
}

// isBroken reports whether m's NameNode connection failed, or its peer
// reset or closed it (then marking m broken).
func (m *member) isBroken() bool {
	if m.broken.Load() {
		return true
	}
	if dc := m.conn.Load(); dc != nil && peerGone(dc.Conn) {
		m.broken.Store(true)
		return true
	}
	return false
}

// pick returns the next client, round robin, replacing it first if its
// NameNode connection failed or its peer reset or closed it while it was
// idle. (The client renews its leases every second, which finds a dead
// idle connection too, but a call in that second would fail on it although
// the network may be fine by then: a network cut resets every connection,
// and the calls after it is over found them.) When
// the replacement cannot connect, or another caller's attempt failed while
// this one waited for it, the broken client is returned: its calls fail at
// once with the cause, and the next pick tries again.
func (p *clients) pick() *gohdfs.Client {
	s := p.members[int(p.next.Add(1))%len(p.members)]
	m := s.cur.Load()
	if !m.isBroken() {
		return m.c
	}
	asked := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.cur.Load(); cur != m {
		return cur.c // replaced meanwhile
	}
	if p.closed.Load() || s.failedAt.After(asked) {
		return m.c
	}
	fresh, err := p.connect()
	if err != nil {
		s.failedAt = time.Now()
		return m.c
	}
	s.cur.Store(fresh)
	// Close waits for the client's RPC in flight, if any (bounded by the
	// connection's deadlines): not on the caller's time.
	p.retired.Add(1)
	go func() {
		defer p.retired.Done()
		m.c.Close()
	}()
	return fresh.c
}

// all returns the current clients.
func (p *clients) all() []*gohdfs.Client {
	cs := make([]*gohdfs.Client, len(p.members))
	for i, s := range p.members {
		cs[i] = s.cur.Load().c
	}
	return cs
}

// close closes the clients; pick replaces none after it started.
func (p *clients) close() {
	p.closed.Store(true)
	for _, s := range p.members {
		s.mu.Lock()
		s.cur.Load().c.Close()
		s.mu.Unlock()
	}
	p.retired.Wait()
}

// newClients connects cfg.Connections clients. A failure names the
// NameNodes and the cause.
func newClients(cfg Config) (*clients, error) {
	opts := gohdfs.ClientOptions{
		Addresses:              cfg.NameNodes,
		User:                   cfg.User,
		UseDatanodeHostname:    cfg.UseDatanodeHostname,
		DataTransferProtection: cfg.DataTransferProtection,
		DatanodeDialFunc:       (&net.Dialer{Timeout: cfg.Timeouts.Connect, KeepAlive: 30 * time.Second}).DialContext,
	}
	if k := cfg.Kerberos; k != nil {
		kc, err := kerberosClient(k)
		if err != nil {
			return nil, err
		}
		opts.KerberosClient = kc
		opts.KerberosServicePrincipleName = k.NameNodeSPN
	}
	p := &clients{opts: opts, cfg: cfg}
	for range cfg.Connections {
		m, err := p.connect()
		if err != nil {
			p.close()
			return nil, err
		}
		s := &slot{}
		s.cur.Store(m)
		p.members = append(p.members, s)
	}
	return p, nil
}

// connect makes a new member: a client with its own NameNode connection.
func (p *clients) connect() (*member, error) {
	m := &member{}
	opts := p.opts
	opts.NamenodeDialFunc = deadlineDialer(p.cfg.Timeouts.Connect, p.cfg.Timeouts.Operation, m)
	c, err := gohdfs.NewClient(opts)
	if err != nil {
		return nil, unavailable("connect to namenodes "+strings.Join(p.cfg.NameNodes, ","), "", err)
	}
	m.c = c
	// The client caches the server defaults on first use without a lock,
	// and every block write asks for them: fetch them now, before the
	// client is shared, so that later uses only read the cache.
	if _, err := c.ServerDefaults(); err != nil {
		c.Close()
		return nil, unavailable("get server defaults from "+strings.Join(p.cfg.NameNodes, ","), "", err)
	}
	return m, nil
}

// kerberosClient logs in with the keytab or credentials cache of k.
func kerberosClient(k *Kerberos) (*krbclient.Client, error) {
	kcfg, err := krbconfig.Load(k.Krb5Conf)
	if err != nil {
		return nil, fmt.Errorf("%w: hdfs: kerberos.krb5_conf %s: %v", stream.ErrInvalidArgument, k.Krb5Conf, err)
	}
	if k.CCache != "" {
		cc, err := credentials.LoadCCache(k.CCache)
		if err != nil {
			return nil, fmt.Errorf("%w: hdfs: kerberos.ccache %s: %v", stream.ErrInvalidArgument, k.CCache, err)
		}
		c, err := krbclient.NewFromCCache(cc, kcfg, krbclient.DisablePAFXFAST(true))
		if err != nil {
			return nil, fmt.Errorf("%w: hdfs: kerberos.ccache %s: %v", stream.ErrInvalidArgument, k.CCache, err)
		}
		return c, nil
	}
	kt, err := keytab.Load(k.Keytab)
	if err != nil {
		return nil, fmt.Errorf("%w: hdfs: kerberos.keytab %s: %v", stream.ErrInvalidArgument, k.Keytab, err)
	}
	user, realm, _ := strings.Cut(k.Principal, "@")
	c := krbclient.NewWithKeytab(user, realm, kt, kcfg, krbclient.DisablePAFXFAST(true))
	if err := c.Login(); err != nil {
		return nil, fmt.Errorf("%w: hdfs: kerberos login as %s: %v", stream.ErrUnavailable, k.Principal, err)
	}
	return c, nil
}

// deadlineDialer dials NameNodes with a connect timeout and returns
// connections whose every read and write must finish within rpc. The client
// has no RPC timeouts of its own, and it keeps using a connection after a
// failed read (the late answer would then be taken for the next call's), so
// a connection that fails a read is closed: the client's next write fails.
// Any failure marks m broken, so that the pool replaces it.
func deadlineDialer(connect, rpc time.Duration, m *member) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			m.broken.Store(true)
			return nil, err
		}
		dc := &deadlineConn{Conn: c, rpc: rpc, m: m}
		m.conn.Store(dc)
		return dc, nil
	}
}

// deadlineConn is a net.Conn with a deadline per read and write; see
// deadlineDialer.
type deadlineConn struct {
	net.Conn
	rpc time.Duration
	m   *member
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.rpc))
	n, err := c.Conn.Read(b)
	if err != nil {
		c.m.broken.Store(true)
		c.Conn.Close()
	}
	return n, err
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.rpc))
	n, err := c.Conn.Write(b)
	if err != nil {
		c.m.broken.Store(true)
		c.Conn.Close()
	}
	return n, err
}
