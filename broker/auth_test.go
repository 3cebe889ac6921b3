package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/drivers/memory"
	"github.com/stratastream/strata/internal/testcert"
	"github.com/stratastream/strata/stream"
)

// secureBroker starts a broker on the memory driver serving l.
func secureBroker(t *testing.T, sec Security, l Listener) (*Broker, string) {
	t.Helper()
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return secureBrokerOn(t, st, sec, l)
}

func secureBrokerOn(t *testing.T, st *stream.Store, sec Security, l Listener) (*Broker, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := NewSecureListener(ln, l, testLogger(t))
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	cfg := Config{Store: st, Advertise: ln.Addr().String(), Logger: testLogger(t), AutoCreateTopics: true, Security: sec}
	b, err := New(context.Background(), cfg)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("broker.New: %v", err)
	}
	go func() { _ = b.ServeListener(sl) }()
	t.Cleanup(func() { _ = b.Close() })
	return b, ln.Addr().String()
}

// testUsers are SASL users alice (password alice-secret) and bob
// (bob-secret), each with SCRAM-SHA-256 and SCRAM-SHA-512 credentials.
func testUsers(t *testing.T) []SASLUser {
	t.Helper()
	var users []SASLUser
	for _, u := range []string{"alice", "bob", "carol"} {
		su := SASLUser{Name: u}
		for _, m := range []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
			c, err := NewSCRAMCredential(m, u+"-secret", MinSCRAMIterations)
			if err != nil {
				t.Fatal(err)
			}
			su.Credentials = append(su.Credentials, c)
		}
		users = append(users, su)
	}
	return users
}

// mechanism is a franz-go SASL mechanism for user and password.
func mechanism(name, user, password string) sasl.Mechanism {
	switch name {
	case MechanismPlain:
		return plain.Auth{User: user, Pass: password}.AsMechanism()
	case MechanismSCRAMSHA256:
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	}
	return scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
}

// roundTrip produces one record to topic and reads it back.
func roundTrip(t *testing.T, addr, topic string, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := newClient(t, addr, append(opts, kgo.AllowAutoTopicCreation())...).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v-" + topic)}).FirstErr(); err != nil {
		return err
	}
	cl := newClient(t, addr, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		return err
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v-"+topic {
		t.Fatalf("consumed %d records from %s, want the one produced", len(recs), topic)
	}
	return nil
}

// authError is the error of a Metadata request through a new client.
func authError(t *testing.T, addr string, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := newClient(t, addr, opts...).Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// TestSASLMechanisms: franz-go authenticates with PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 over SASL_SSL and SASL_PLAINTEXT and produces and
// consumes; a wrong password or an unknown user fails with
// SASL_AUTHENTICATION_FAILED.
func TestSASLMechanisms(t *testing.T) {
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	sec := Security{SASL: SASLConfig{Users: testUsers(t)}}
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"SASL_SSL", true}, {"SASL_PLAINTEXT", false}} {
		t.Run(tc.name, func(t *testing.T) {
			l := Listener{SASL: true}
			var opts []kgo.Opt
			if tc.tls {
				l.TLS = &TLSConfig{CertFile: certFile, KeyFile: keyFile}
				opts = append(opts, kgo.DialTLSConfig(ca.ClientTLS(nil)))
			}
			_, addr := secureBroker(t, sec, l)
			for i, m := range []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512} {
				if err := roundTrip(t, addr, "t"+string(rune('a'+i)), append(opts, kgo.SASL(mechanism(m, "alice", "alice-secret")))...); err != nil {
					t.Fatalf("%s with the right password: %v", m, err)
				}
				for _, who := range [][2]string{{"alice", "wrong"}, {"nobody", "alice-secret"}} {
					err := authError(t, addr, append(opts, kgo.SASL(mechanism(m, who[0], who[1])))...)
					if !errors.Is(err, kerr.SaslAuthenticationFailed) {
						t.Fatalf("%s as %s with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", m, who[0], err)
					}
				}
			}
		})
	}
}

// authFrame is a request frame of key at version v with body req.
func authFrame(key, v int16, corr int32, req kmsg.Request) []byte {
	req.SetVersion(v)
	body := req.AppendTo(nil)
	if req.IsFlexible() && key != 18 {
		body = append([]byte{0}, body...) // header tags
	}
	return rawFrame(key, v, corr, body)
}

// TestUnauthenticatedGetsNothing: before authenticating, ApiVersions and
// SaslHandshake are answered; Metadata, Fetch or Produce close the
// connection without an answer; so does a SaslAuthenticate with a wrong
// PLAIN password, after its SASL_AUTHENTICATION_FAILED.
func TestUnauthenticatedGetsNothing(t *testing.T) {
	_, addr := secureBroker(t, Security{SASL: SASLConfig{Users: testUsers(t)}}, Listener{SASL: true})
	for _, key := range []int16{kmsg.Metadata.Int16(), kmsg.Fetch.Int16(), kmsg.Produce.Int16(), kmsg.CreateTopics.Int16()} {
		c := dial(t, addr)
		if _, err := c.Write(rawFrame(18, 3, 1, []byte{2, 'x', 2, '1', 0})); err != nil {
			t.Fatal(err)
		}
		readFrame(t, c)
		req := kmsg.RequestForKey(key)
		if _, err := c.Write(authFrame(key, supported[key].min, 2, req)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	}
	c := dial(t, addr)
	saslHandshake(t, c, MechanismPlain)
	if ar := saslStep(t, c, 2, []byte("\x00alice\x00wrong")); ar.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("SaslAuthenticate with a wrong password: code %d, want SASL_AUTHENTICATION_FAILED", ar.ErrorCode)
	}
	expectClosed(t, c)
}

// TestTLSClientCertificates: with a client CA, a client certificate's CN
// is the principal (an ACL-less principal gets TOPIC_AUTHORIZATION_FAILED,
// the super user's CN works), a certificate from another CA fails the
// handshake, and a replaced certificate file is served to new
// connections without a restart (a broken one is not: the loaded pair
// stays).
func TestTLSClientCertificates(t *testing.T) {
	ca := testcert.New(t, "strata-test-ca")
	_, certFile, keyFile := ca.Issue("broker", 2, true, "server")
	admin, _, _ := ca.Issue("admin", 3, false, "admin")
	eve, _, _ := ca.Issue("eve", 4, false, "eve")
	other := testcert.New(t, "another-ca")
	stranger, _, _ := other.Issue("admin", 5, false, "stranger")
	sec := Security{ACL: ACLConfig{Enabled: true, SuperUsers: []string{"User:admin"}}}
	l := Listener{TLS: &TLSConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: ca.File, RequireClientCert: true}}
	_, addr := secureBroker(t, sec, l)

	if err := roundTrip(t, addr, "certs", kgo.DialTLSConfig(ca.ClientTLS(&admin))); err != nil {
		t.Fatalf("User:admin (super user by its certificate): %v", err)
	}
	if err := roundTrip(t, addr, "certs", kgo.DialTLSConfig(ca.ClientTLS(&eve))); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("User:eve without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	strangerTLS := ca.ClientTLS(nil)
	// Sent even though the server asks for certificates of its own CA.
	strangerTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }
	for name, cfg := range map[string]*tls.Config{"another CA's certificate": strangerTLS, "no certificate": ca.ClientTLS(nil)} {
		start := time.Now()
		c, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			_, _ = c.Write(rawFrame(18, 0, 1, nil))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			_ = c.Close()
		}
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("%s: %v, want the handshake refused", name, err)
		}
		t.Logf("%s: refused after %s: %v", name, time.Since(start).Round(time.Millisecond), err)
	}

	// Replace the server certificate: new connections get the new one.
	ca.Issue("broker", 99, true, "server")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tls.Dial("tcp", addr, ca.ClientTLS(&admin))
		if err != nil {
			t.Fatal(err)
		}
		serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		_ = c.Close()
		if serial == 99 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still served the certificate with serial %d 10 s after it was replaced", serial)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A file that does not load keeps the loaded pair in service.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * reloadCheckInterval)
	for i := 0; i < 2; i++ {
		c, err := tls.Dial("tcp", addr, ca.ClientTLS(&admin))
		if err != nil {
			t.Fatalf("after a broken certificate file: %v", err)
		}
		if serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); serial != 99 {
			t.Fatalf("after a broken certificate file: serial %d, want 99 (the loaded one)", serial)
		}
		_ = c.Close()
	}
}

// kgoTLS trusts ca.
func kgoTLS(ca *testcert.CA) kgo.Opt { return kgo.DialTLSConfig(ca.ClientTLS(nil)) }

// saslClient authenticates as user with SCRAM-SHA-256.
func saslClient(t *testing.T, addr, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, addr, append(opts, kgo.SASL(mechanism(MechanismSCRAMSHA256, user, user+"-secret")))...)
}

// createACL has cl create one ACL and checks it was.
func createACL(t *testing.T, cl *kgo.Client, c kmsg.CreateACLsRequestCreation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls %+v: %v %+v", c, err, resp)
	}
}

// fetchFrom fetches partition 0 of topic from offset 0 with cl.
func fetchFrom(t *testing.T, cl *kgo.Client, topic string) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 100
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestACLs: with ACLs on, the super user creates ACLs with CreateAcls:
// carol may Write to topics prefixed "shared-", bob may Read them. carol
// produces; carol's Fetch gets TOPIC_AUTHORIZATION_FAILED and no records;
// bob reads the records; bob's produce and a group join without a group
// ACL are refused with TOPIC_ and GROUP_AUTHORIZATION_FAILED (an
// idempotent producer's InitProducerId with CLUSTER_AUTHORIZATION_FAILED,
// as in Kafka: it needs Write on some topic); bob cannot
// create ACLs (CLUSTER_AUTHORIZATION_FAILED). The ACLs are on the store:
// a broker that takes over enforces them, and after DeleteAcls bob is
// refused too.
func TestACLs(t *testing.T) {
	st, err := memory.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sec := Security{SASL: SASLConfig{Users: testUsers(t)}, ACL: ACLConfig{Enabled: true, SuperUsers: []string{"User:alice"}}}
	b1, addr := secureBrokerOn(t, st, sec, Listener{SASL: true})
	admin := saslClient(t, addr, "alice")
	createTopic(t, admin, "shared-x", 1, nil)
	for _, c := range []kmsg.CreateACLsRequestCreation{
		{ResourceType: rTopic, ResourceName: "shared-", ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:carol", Host: "*", Operation: opWrite, PermissionType: kmsg.ACLPermissionTypeAllow},
		{ResourceType: rTopic, ResourceName: "shared-", ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:bob", Host: "*", Operation: opRead, PermissionType: kmsg.ACLPermissionTypeAllow},
	} {
		createACL(t, admin, c)
	}
	carol := saslClient(t, addr, "carol")
	ctx := context.Background()
	if err := carol.ProduceSync(ctx, &kgo.Record{Topic: "shared-x", Value: []byte("secret record")}).FirstErr(); err != nil {
		t.Fatalf("carol produces with Write: %v", err)
	}
	if p := fetchFrom(t, carol, "shared-x"); p.ErrorCode != topicDenied || len(p.RecordBatches) != 0 {
		t.Fatalf("carol's fetch without Read: error %d with %d record bytes, want TOPIC_AUTHORIZATION_FAILED and none", p.ErrorCode, len(p.RecordBatches))
	}
	bob := saslClient(t, addr, "bob")
	if p := fetchFrom(t, bob, "shared-x"); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("bob's fetch with Read: error %d with %d record bytes", p.ErrorCode, len(p.RecordBatches))
	}
	// Metadata: a listing leaves out topics without Describe; naming one
	// gets TOPIC_AUTHORIZATION_FAILED.
	createTopic(t, admin, "private", 1, nil)
	all, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob)
	if err != nil || len(all.Topics) != 1 || strOr(all.Topics[0].Topic) != "shared-x" {
		t.Fatalf("bob's Metadata of all topics: %v %+v, want shared-x only", err, all)
	}
	named := kmsg.NewPtrMetadataRequest()
	named.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("private")}}
	if mr, err := named.RequestWith(ctx, bob); err != nil || len(mr.Topics) != 1 || mr.Topics[0].ErrorCode != topicDenied {
		t.Fatalf("bob's Metadata of private: %v %+v, want TOPIC_AUTHORIZATION_FAILED", err, mr)
	}
	// An idempotent producer needs Write on some topic (InitProducerId).
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "shared-x", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob's idempotent produce without Write: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	plainBob := saslClient(t, addr, "bob", kgo.DisableIdempotentWrite())
	if err := plainBob.ProduceSync(ctx, &kgo.Record{Topic: "shared-x", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob's produce without Write: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	// kgo finds the coordinator first: FindCoordinator is refused.
	if jr, err := join.RequestWith(ctx, bob); !errors.Is(err, kerr.GroupAuthorizationFailed) && (err != nil || jr.ErrorCode != groupDenied) {
		t.Fatalf("bob's JoinGroup without a group ACL: %v %+v, want GROUP_AUTHORIZATION_FAILED", err, jr)
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: rTopic, ResourceName: "*", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:bob", Host: "*", Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if cr, err := req.RequestWith(ctx, bob); err != nil || cr.Results[0].ErrorCode != clusterDenied {
		t.Fatalf("bob's CreateAcls: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, cr)
	}

	// A broker that takes over reads the ACLs from the store.
	_ = b1.Close()
	_, addr2 := secureBrokerOn(t, st, sec, Listener{SASL: true})
	if p := fetchFrom(t, saslClient(t, addr2, "carol"), "shared-x"); p.ErrorCode != topicDenied {
		t.Fatalf("carol's fetch on the next broker: error %d, want TOPIC_AUTHORIZATION_FAILED", p.ErrorCode)
	}
	admin2 := saslClient(t, addr2, "alice")
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType, desc.Operation, desc.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if dr, err := desc.RequestWith(ctx, admin2); err != nil || len(dr.Resources) != 1 || len(dr.Resources[0].ACLs) != 2 {
		t.Fatalf("DescribeAcls on the next broker: %v %+v, want the two ACLs", err, dr)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny, Principal: kmsg.StringPtr("User:bob"), Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
	if dr, err := del.RequestWith(ctx, admin2); err != nil || len(dr.Results) != 1 || len(dr.Results[0].MatchingACLs) != 1 {
		t.Fatalf("DeleteAcls: %v %+v", err, dr)
	}
	if p := fetchFrom(t, saslClient(t, addr2, "bob"), "shared-x"); p.ErrorCode != topicDenied || len(p.RecordBatches) != 0 {
		t.Fatalf("bob's fetch after DeleteAcls: error %d, %d record bytes", p.ErrorCode, len(p.RecordBatches))
	}
}

// TestACLAPIsWithoutACLs: on a broker without ACLs the ACL APIs answer
// SECURITY_DISABLED, and the SASL APIs on a plaintext listener answer
// ILLEGAL_SASL_STATE; the broker keeps serving.
func TestACLAPIsWithoutACLs(t *testing.T) {
	addr := memBroker(t)
	cl := newClient(t, addr)
	ctx := context.Background()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: rTopic, ResourceName: "x", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:a", Host: "*", Operation: opRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
	if cr, err := req.RequestWith(ctx, cl); err != nil || len(cr.Results) != 1 || cr.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls without ACLs: %v %+v, want SECURITY_DISABLED", err, cr)
	}
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType, desc.Operation, desc.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if dr, err := desc.RequestWith(ctx, cl); err != nil || dr.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls without ACLs: %v %+v, want SECURITY_DISABLED", err, dr)
	}
	if hr := sendHandshake(t, dial(t, addr), MechanismPlain); hr.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on a plaintext listener: code %d, want ILLEGAL_SASL_STATE", hr.ErrorCode)
	}
	apiVersionsOK(t, addr)
}
