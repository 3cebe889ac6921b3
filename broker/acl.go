package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/stream"
)

// ACLConfig enables authorization. Once enabled, a request is allowed only
// when an ACL allows its principal the operation on the resource and none
// denies it (deny by default); super users are allowed everything. The
// ACLs are created and deleted with Kafka's CreateAcls and DeleteAcls
// (kafka-acls.sh, kadm) and kept in the CLUSTER/__acls stream.
type ACLConfig struct {
	// Enabled turns authorization on.
	Enabled bool
	// SuperUsers are principals ("User:admin") allowed everything, also
	// before any ACL exists.
	SuperUsers []string
}

// acl is one access control entry, as stored (JSON) and matched.
type acl struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// aclRecord is one entry of the CLUSTER/__acls stream.
type aclRecord struct {
	// Op is "create" or "delete".
	Op   string `json:"op"`
	ACLs []acl  `json:"acls"`
}

// aclStore holds the ACLs, kept in the CLUSTER/__acls stream, which the
// broker holds open read-write at its epoch.
type aclStore struct {
	b     *Broker
	super []string

	writeMu sync.Mutex // serializes appends; guards s
	s       *stream.Stream

	mu   sync.RWMutex
	acls []acl
}

func openACLs(ctx context.Context, b *Broker) (*aclStore, error) {
	name := b.streamName("__acls")
	s, err := b.cfg.Store.Open(ctx, name, stream.OpenOptions{Epoch: uint64(b.epoch), CreateIfMissing: true})
	if err != nil {
		return nil, fmt.Errorf("broker: opening the ACLs %s on %s: %w", name, b.cfg.Driver, err)
	}
	a := &aclStore{b: b, s: s, super: b.cfg.Security.ACL.SuperUsers}
	if err := readStream(ctx, s, a.replay); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("broker: reading the ACLs %s on %s: %w", name, b.cfg.Driver, err)
	}
	return a, nil
}

// replay applies one record of the stream.
func (a *aclStore) replay(payload []byte) error {
	var r aclRecord
	if err := json.Unmarshal(payload, &r); err != nil {
		return fmt.Errorf("decoding ACL record: %v: %w", err, stream.ErrCorrupt)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch r.Op {
	case "create":
		for _, e := range r.ACLs {
			if !slices.Contains(a.acls, e) {
				a.acls = append(a.acls, e)
			}
		}
	case "delete":
		a.acls = slices.DeleteFunc(a.acls, func(e acl) bool { return slices.Contains(r.ACLs, e) })
	default:
		return fmt.Errorf("ACL record op %q: %w", r.Op, stream.ErrCorrupt)
	}
	return nil
}

// write makes r durable, then applies it.
func (a *aclStore) write(ctx context.Context, r aclRecord) error {
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if _, err := a.b.appendCluster(ctx, &a.s, payload, a.replay); err != nil {
		a.b.checkFenced(err, "writing the ACLs")
		return fmt.Errorf("broker: writing the ACLs %s: %w", a.s.Name(), err)
	}
	return a.replay(payload)
}

func (a *aclStore) close() error {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	return a.s.Close()
}

// implied lists the operations an ACL's operation allows (Kafka's rules:
// Read, Write, Delete and Alter imply Describe; AlterConfigs implies
// DescribeConfigs).
func implies(granted, op kmsg.ACLOperation) bool {
	switch {
	case granted == op, granted == kmsg.ACLOperationAll:
		return true
	case op == kmsg.ACLOperationDescribe:
		return granted == kmsg.ACLOperationRead || granted == kmsg.ACLOperationWrite || granted == kmsg.ACLOperationDelete || granted == kmsg.ACLOperationAlter
	case op == kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// matchesResource reports whether e covers the resource name of type rt.
func (e acl) matchesResource(rt kmsg.ACLResourceType, name string) bool {
	if e.ResourceType != rt {
		return false
	}
	switch e.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return e.ResourceName == "*" || e.ResourceName == name
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, e.ResourceName)
	}
	return false
}

// allowed reports whether principal from host may do op on the resource.
func (a *aclStore) allowed(principal, host string, rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) bool {
	if slices.Contains(a.super, principal) {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	allow := false
	for _, e := range a.acls {
		if (e.Principal != principal && e.Principal != "User:*") || (e.Host != "*" && e.Host != host) || !e.matchesResource(rt, name) {
			continue
		}
		switch {
		case e.Permission == kmsg.ACLPermissionTypeDeny && (e.Operation == op || e.Operation == kmsg.ACLOperationAll):
			return false
		case e.Permission == kmsg.ACLPermissionTypeAllow && implies(e.Operation, op):
			allow = true
		}
	}
	return allow
}

// anyAllowed reports whether principal may do op on some resource of type
// rt (Kafka's rule for InitProducerId: Write on any topic).
func (a *aclStore) anyAllowed(principal string, rt kmsg.ACLResourceType, op kmsg.ACLOperation) bool {
	if slices.Contains(a.super, principal) {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, e := range a.acls {
		if (e.Principal == principal || e.Principal == "User:*") && e.ResourceType == rt && e.Permission == kmsg.ACLPermissionTypeAllow && implies(e.Operation, op) {
			return true
		}
	}
	return false
}

// aclFilter is a DescribeAcls or DeleteAcls filter.
type aclFilter struct {
	rt         kmsg.ACLResourceType
	name       *string
	pattern    kmsg.ACLResourcePatternType
	principal  *string
	host       *string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

func (f aclFilter) matches(e acl) bool {
	switch {
	case f.rt != kmsg.ACLResourceTypeAny && f.rt != e.ResourceType:
		return false
	case f.principal != nil && *f.principal != e.Principal:
		return false
	case f.host != nil && *f.host != e.Host:
		return false
	case f.op != kmsg.ACLOperationAny && f.op != e.Operation:
		return false
	case f.permission != kmsg.ACLPermissionTypeAny && f.permission != e.Permission:
		return false
	}
	switch f.pattern {
	case kmsg.ACLResourcePatternTypeAny:
		return f.name == nil || *f.name == e.ResourceName
	case kmsg.ACLResourcePatternTypeMatch:
		return f.name == nil || e.matchesResource(e.ResourceType, *f.name)
	default:
		return f.pattern == e.PatternType && (f.name == nil || *f.name == e.ResourceName)
	}
}

// matching returns the ACLs f matches.
func (a *aclStore) matching(f aclFilter) []acl {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []acl
	for _, e := range a.acls {
		if f.matches(e) {
			out = append(out, e)
		}
	}
	return out
}

// checkACL validates an ACL to create (INVALID_REQUEST with a message).
func checkACL(e acl) string {
	switch {
	case e.ResourceType != kmsg.ACLResourceTypeTopic && e.ResourceType != kmsg.ACLResourceTypeGroup && e.ResourceType != kmsg.ACLResourceTypeCluster && e.ResourceType != kmsg.ACLResourceTypeTransactionalId:
		return fmt.Sprintf("resource type %s: want TOPIC, GROUP, CLUSTER or TRANSACTIONAL_ID", e.ResourceType)
	case e.PatternType != kmsg.ACLResourcePatternTypeLiteral && e.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Sprintf("pattern type %s: want LITERAL or PREFIXED", e.PatternType)
	case e.ResourceName == "":
		return "empty resource name"
	case e.ResourceType == kmsg.ACLResourceTypeCluster && e.ResourceName != "kafka-cluster":
		return fmt.Sprintf("cluster resource name %q: want kafka-cluster", e.ResourceName)
	case !strings.HasPrefix(e.Principal, "User:") || len(e.Principal) == len("User:"):
		return fmt.Sprintf("principal %q: want User:NAME or User:*", e.Principal)
	case e.Host == "":
		return "empty host (use *)"
	case e.Operation < kmsg.ACLOperationAll || e.Operation > kmsg.ACLOperationIdempotentWrite:
		return fmt.Sprintf("operation %s", e.Operation)
	case e.Permission != kmsg.ACLPermissionTypeAllow && e.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Sprintf("permission %s: want ALLOW or DENY", e.Permission)
	}
	return ""
}

// createACLs answers CreateAcls.
func (b *Broker) createACLs(r *kmsg.CreateACLsRequest, resp *kmsg.CreateACLsResponse) int16 {
	var add []acl
	for _, c := range r.Creations {
		e := acl{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType, Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if r.Version == 0 {
			e.PatternType = kmsg.ACLResourcePatternTypeLiteral
		}
		res := kmsg.NewCreateACLsResponseResult()
		if msg := checkACL(e); msg != "" {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, errString(msg)
		} else {
			add = append(add, e)
		}
		resp.Results = append(resp.Results, res)
	}
	if len(add) == 0 {
		return 0
	}
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	if err := b.acls.write(ctx, aclRecord{Op: "create", ACLs: add}); err != nil {
		b.log.Warn("creating ACLs failed", "err", err)
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, errString(err.Error())
			}
		}
		return kerr.UnknownServerError.Code
	}
	b.log.Info("ACLs created", "count", len(add))
	return 0
}

// describeACLs answers DescribeAcls.
func (b *Broker) describeACLs(r *kmsg.DescribeACLsRequest, resp *kmsg.DescribeACLsResponse) {
	f := aclFilter{rt: r.ResourceType, name: r.ResourceName, pattern: r.ResourcePatternType, principal: r.Principal, host: r.Host, op: r.Operation, permission: r.PermissionType}
	if r.Version == 0 {
		f.pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	type key struct {
		rt      kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	idx := map[key]int{}
	for _, e := range b.acls.matching(f) {
		k := key{e.ResourceType, e.ResourceName, e.PatternType}
		i, ok := idx[k]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = k.rt, k.name, k.pattern
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			idx[k] = i
		}
		d := kmsg.NewDescribeACLsResponseResourceACL()
		d.Principal, d.Host, d.Operation, d.PermissionType = e.Principal, e.Host, e.Operation, e.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, d)
	}
}

// deleteACLs answers DeleteAcls.
func (b *Broker) deleteACLs(r *kmsg.DeleteACLsRequest, resp *kmsg.DeleteACLsResponse) int16 {
	var del []acl
	for _, rf := range r.Filters {
		f := aclFilter{rt: rf.ResourceType, name: rf.ResourceName, pattern: rf.ResourcePatternType, principal: rf.Principal, host: rf.Host, op: rf.Operation, permission: rf.PermissionType}
		if r.Version == 0 {
			f.pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		res := kmsg.NewDeleteACLsResponseResult()
		for _, e := range b.acls.matching(f) {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = e.ResourceType, e.ResourceName, e.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = e.Principal, e.Host, e.Operation, e.Permission
			res.MatchingACLs = append(res.MatchingACLs, m)
			del = append(del, e)
		}
		resp.Results = append(resp.Results, res)
	}
	if len(del) == 0 {
		return 0
	}
	ctx, cancel := b.reqCtx(30 * time.Second)
	defer cancel()
	if err := b.acls.write(ctx, aclRecord{Op: "delete", ACLs: del}); err != nil {
		b.log.Warn("deleting ACLs failed", "err", err)
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, errString(err.Error())
			resp.Results[i].MatchingACLs = nil
		}
		return kerr.UnknownServerError.Code
	}
	b.log.Info("ACLs deleted", "count", len(del))
	return 0
}
