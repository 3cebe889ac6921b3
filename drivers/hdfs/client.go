package hdfs

import (
	"context"
	"fmt"
	"net"
	"strings"
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
type clients struct {
	all  []*gohdfs.Client
	next atomic.Uint32
}

// pick returns the next client, round robin.
func (p *clients) pick() *gohdfs.Client {
	return p.all[int(p.next.Add(1))%len(p.all)]
}

func (p *clients) close() {
	for _, c := range p.all {
		c.Close()
	}
}

// newClients connects cfg.Connections clients. A failure names the
// NameNodes and the cause.
func newClients(cfg Config) (*clients, error) {
	opts := gohdfs.ClientOptions{
		Addresses:              cfg.NameNodes,
		User:                   cfg.User,
		UseDatanodeHostname:    cfg.UseDatanodeHostname,
		DataTransferProtection: cfg.DataTransferProtection,
		NamenodeDialFunc:       deadlineDialer(cfg.Timeouts.Connect, cfg.Timeouts.Operation),
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
	p := &clients{}
	for range cfg.Connections {
		c, err := gohdfs.NewClient(opts)
		if err != nil {
			p.close()
			return nil, unavailable("connect to namenodes "+strings.Join(cfg.NameNodes, ","), "", err)
		}
		p.all = append(p.all, c)
		// The client caches the server defaults on first use without a
		// lock, and every block write asks for them: fetch them now, before
		// the client is shared, so that later uses only read the cache.
		if _, err := c.ServerDefaults(); err != nil {
			p.close()
			return nil, unavailable("get server defaults from "+strings.Join(cfg.NameNodes, ","), "", err)
		}
	}
	return p, nil
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
// a connection that fails a read is closed: the client's next write fails
// and it reconnects.
func deadlineDialer(connect, rpc time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: c, rpc: rpc}, nil
	}
}

// deadlineConn is a net.Conn with a deadline per read and write; see
// deadlineDialer.
type deadlineConn struct {
	net.Conn
	rpc time.Duration
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	c.Conn.SetReadDeadline(time.Now().Add(c.rpc))
	n, err := c.Conn.Read(b)
	if err != nil {
		c.Conn.Close()
	}
	return n, err
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.rpc))
	n, err := c.Conn.Write(b)
	if err != nil {
		c.Conn.Close()
	}
	return n, err
}
