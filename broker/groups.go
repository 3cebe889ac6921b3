package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group states (Kafka's classic group protocol).
const (
	stateEmpty      = "Empty"
	statePreparing  = "PreparingRebalance"
	stateCompleting = "CompletingRebalance"
	stateStable     = "Stable"
)

// member is one member of a group.
type member struct {
	id, instanceID, clientID, clientHost string
	protocols                            []kmsg.JoinGroupRequestProtocol
	sessionTimeout, rebalanceTimeout     time.Duration
	lastSeen                             time.Time
	join                                 chan kmsg.JoinGroupResponse // a join waiting for the rebalance
	sync                                 chan syncResult             // a sync waiting for the leader
	assignment                           []byte
	joinedAt                             int64
}

type syncResult struct {
	code       int16
	assignment []byte
}

// group is one consumer group's membership (memory only: after a takeover
// members rejoin; committed offsets are on the store).
type group struct {
	name         string
	state        string
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	timer        *time.Timer
	initialDelay bool // the first rebalance of an empty group waits for more members
	joinSeq      int64
}

// groupCoordinator runs the classic group protocol for every group. One
// mutex guards all groups; waits happen outside it on channels.
type groupCoordinator struct {
	b      *Broker
	mu     sync.Mutex
	groups map[string]*group
	// pending holds member ids handed out with MEMBER_ID_REQUIRED (KIP-394)
	// and not joined yet, keyed group + "\x00" + id, with their expiry.
	// They are not members, so an abandoned join never holds a rebalance.
	pending map[string]time.Time
	stop    chan struct{}
	done    chan struct{}
}

func newGroupCoordinator(b *Broker) *groupCoordinator {
	gc := &groupCoordinator{b: b, groups: map[string]*group{}, pending: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go gc.expireLoop()
	return gc
}

func (gc *groupCoordinator) close() {
	close(gc.stop)
	<-gc.done
	gc.reset(kerr.CoordinatorNotAvailable.Code)
}

// expireLoop removes members whose session timed out.
func (gc *groupCoordinator) expireLoop() {
	defer close(gc.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-gc.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		gc.mu.Lock()
		for k, exp := range gc.pending {
			if now.After(exp) {
				delete(gc.pending, k)
			}
		}
		for _, g := range gc.groups {
			for _, m := range g.members {
				if m.join == nil && now.Sub(m.lastSeen) > m.sessionTimeout {
					gc.b.log.Info("group member session expired", "group", g.name, "member", m.id)
					gc.removeMember(g, m)
				}
			}
		}
		gc.mu.Unlock()
	}
}

func newMemberID(clientID string) string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	return clientID + "-" + hex.EncodeToString(r[:])
}

// failWaiters answers a member's pending join and sync with code.
func (gc *groupCoordinator) failWaiters(g *group, m *member, code int16) {
	if m.join != nil {
		m.join <- kmsg.JoinGroupResponse{ErrorCode: code, Generation: -1, MemberID: m.id}
		m.join = nil
	}
	if m.sync != nil {
		m.sync <- syncResult{code: code}
		m.sync = nil
	}
}

// removeMember drops m and rebalances the rest.
func (gc *groupCoordinator) removeMember(g *group, m *member) {
	gc.failWaiters(g, m, kerr.UnknownMemberID.Code)
	delete(g.members, m.id)
	if g.leader == m.id {
		g.leader = ""
	}
	if len(g.members) == 0 {
		if g.timer != nil {
			g.timer.Stop()
		}
		g.state = stateEmpty
		g.generation++
		g.protocol = ""
		return
	}
	switch g.state {
	case statePreparing:
		gc.maybeCompleteJoin(g)
	default:
		gc.prepareRebalance(g)
	}
}

// prepareRebalance starts a rebalance: every member must rejoin within the
// rebalance timeout.
func (gc *groupCoordinator) prepareRebalance(g *group) {
	for _, m := range g.members {
		if m.sync != nil {
			m.sync <- syncResult{code: kerr.RebalanceInProgress.Code}
			m.sync = nil
		}
	}
	var wait time.Duration
	if g.state == stateEmpty {
		g.initialDelay = true
		wait = gc.b.cfg.GroupInitialRebalanceDelay
	} else {
		for _, m := range g.members {
			wait = max(wait, m.rebalanceTimeout)
		}
	}
	g.state = statePreparing
	if g.timer != nil {
		g.timer.Stop()
	}
	gen := g.generation
	g.timer = time.AfterFunc(wait, func() {
		gc.mu.Lock()
		defer gc.mu.Unlock()
		if g.state != statePreparing || g.generation != gen {
			return
		}
		if g.initialDelay {
			g.initialDelay = false
			if !gc.allJoined(g) {
				// Wait for the stragglers up to their rebalance timeout.
				var rt time.Duration
				for _, m := range g.members {
					rt = max(rt, m.rebalanceTimeout)
				}
				g.timer = time.AfterFunc(rt, func() {
					gc.mu.Lock()
					defer gc.mu.Unlock()
					if g.state == statePreparing && g.generation == gen {
						gc.completeJoin(g)
					}
				})
				return
			}
		}
		gc.completeJoin(g)
	})
}

func (gc *groupCoordinator) allJoined(g *group) bool {
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

func (gc *groupCoordinator) maybeCompleteJoin(g *group) {
	if g.state == statePreparing && !g.initialDelay && gc.allJoined(g) {
		gc.completeJoin(g)
	}
}

// completeJoin ends the join phase: members that did not rejoin are dropped,
// the generation advances and every waiting join is answered.
func (gc *groupCoordinator) completeJoin(g *group) {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	for id, m := range g.members {
		if m.join == nil {
			delete(g.members, id)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = stateEmpty, "", ""
		return
	}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return g.members[ids[i]].joinedAt < g.members[ids[j]].joinedAt })
	if _, ok := g.members[g.leader]; !ok {
		g.leader = ids[0]
	}
	g.protocol = ""
	for _, cand := range g.members[g.leader].protocols {
		all := true
		for _, m := range g.members {
			if protocolMetadata(m, cand.Name) == nil {
				all = false
				break
			}
		}
		if all {
			g.protocol = cand.Name
			break
		}
	}
	g.state = stateCompleting
	now := time.Now()
	for _, id := range ids {
		m := g.members[id]
		resp := kmsg.JoinGroupResponse{Generation: g.generation, LeaderID: g.leader, MemberID: m.id}
		if g.protocol == "" {
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		}
		pt, pr := g.protocolType, g.protocol
		resp.ProtocolType, resp.Protocol = &pt, &pr
		if m.id == g.leader {
			for _, mid := range ids {
				mm := g.members[mid]
				var inst *string
				if mm.instanceID != "" {
					s := mm.instanceID
					inst = &s
				}
				resp.Members = append(resp.Members, kmsg.JoinGroupResponseMember{MemberID: mm.id, InstanceID: inst, ProtocolMetadata: protocolMetadata(mm, g.protocol)})
			}
		}
		m.lastSeen = now
		m.join <- resp
		m.join = nil
	}
	gc.b.log.Info("group rebalanced", "group", g.name, "generation", g.generation, "members", len(ids), "protocol", g.protocol)
	// Members that do not sync within the rebalance timeout (a client that
	// gave up on its join) are removed, so the others are not held.
	var wait time.Duration
	for _, m := range g.members {
		wait = max(wait, m.rebalanceTimeout)
	}
	gen := g.generation
	g.timer = time.AfterFunc(wait, func() {
		gc.mu.Lock()
		defer gc.mu.Unlock()
		if g.state != stateCompleting || g.generation != gen {
			return
		}
		for _, m := range g.members {
			if m.sync == nil {
				gc.b.log.Info("group member did not sync in time", "group", g.name, "member", m.id)
				gc.failWaiters(g, m, kerr.UnknownMemberID.Code)
				delete(g.members, m.id)
			}
		}
		if len(g.members) == 0 {
			g.state, g.protocol, g.leader = stateEmpty, "", ""
			g.generation++
			return
		}
		gc.prepareRebalance(g)
	})
}

func protocolMetadata(m *member, name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			if p.Metadata == nil {
				return []byte{}
			}
			return p.Metadata
		}
	}
	return nil
}

func (gc *groupCoordinator) join(cc *conn, r *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) int16 {
	resp.Generation = -1
	resp.MemberID = r.MemberID
	fail := func(code int16) int16 { resp.ErrorCode = code; return code }
	if gc.b.fenced.Load() {
		return fail(kerr.NotCoordinator.Code)
	}
	if r.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if r.SessionTimeoutMillis < 1000 || r.SessionTimeoutMillis > 30*60*1000 {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	if len(r.Protocols) == 0 || r.ProtocolType == "" {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	gc.mu.Lock()
	g := gc.groups[r.Group]
	if g == nil {
		g = &group{name: r.Group, state: stateEmpty, members: map[string]*member{}}
		gc.groups[r.Group] = g
	}
	if len(g.members) > 0 && g.protocolType != r.ProtocolType {
		gc.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	var m *member
	if r.MemberID == "" && r.Version >= 4 {
		// KIP-394: hand out an id and let the client join with it.
		id := newMemberID(cc.clientID)
		gc.pending[r.Group+"\x00"+id] = time.Now().Add(time.Duration(r.SessionTimeoutMillis) * time.Millisecond)
		gc.mu.Unlock()
		resp.MemberID = id
		return fail(kerr.MemberIDRequired.Code)
	}
	if r.MemberID != "" {
		m = g.members[r.MemberID]
		if m == nil {
			if _, ok := gc.pending[r.Group+"\x00"+r.MemberID]; !ok {
				gc.mu.Unlock()
				return fail(kerr.UnknownMemberID.Code)
			}
			delete(gc.pending, r.Group+"\x00"+r.MemberID)
		}
	}
	if m == nil {
		id := r.MemberID
		if id == "" {
			id = newMemberID(cc.clientID)
		}
		m = &member{id: id, clientID: cc.clientID, clientHost: cc.remote}
		if r.InstanceID != nil {
			m.instanceID = *r.InstanceID
		}
		g.members[m.id] = m
	}
	if m.join != nil {
		m.join <- kmsg.JoinGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code, Generation: -1, MemberID: m.id}
	}
	g.protocolType = r.ProtocolType
	g.joinSeq++
	m.joinedAt = g.joinSeq
	m.protocols = r.Protocols
	m.sessionTimeout = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	m.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	if r.Version == 0 {
		m.rebalanceTimeout = m.sessionTimeout
	}
	m.lastSeen = time.Now()
	gc.b.log.Debug("group join", "group", g.name, "member", m.id, "requested_member", r.MemberID, "state", g.state, "client", cc.remote)
	ch := make(chan kmsg.JoinGroupResponse, 1)
	m.join = ch
	if g.state != statePreparing {
		gc.prepareRebalance(g)
	}
	gc.maybeCompleteJoin(g)
	gc.mu.Unlock()

	var out kmsg.JoinGroupResponse
	select {
	case out = <-ch:
	case <-gc.b.ctx.Done():
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	resp.ErrorCode, resp.Generation, resp.LeaderID, resp.MemberID, resp.Members = out.ErrorCode, out.Generation, out.LeaderID, out.MemberID, out.Members
	resp.Protocol, resp.ProtocolType = out.Protocol, out.ProtocolType
	if resp.Protocol == nil {
		empty := ""
		resp.Protocol = &empty
	}
	return resp.ErrorCode
}

func (gc *groupCoordinator) sync(r *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) int16 {
	fail := func(code int16) int16 { resp.ErrorCode = code; return code }
	gc.mu.Lock()
	g := gc.groups[r.Group]
	if g == nil {
		gc.mu.Unlock()
		return fail(kerr.UnknownMemberID.Code)
	}
	m := g.members[r.MemberID]
	switch {
	case m == nil:
		gc.mu.Unlock()
		return fail(kerr.UnknownMemberID.Code)
	case r.Generation != g.generation:
		gc.mu.Unlock()
		return fail(kerr.IllegalGeneration.Code)
	case g.state == statePreparing:
		gc.mu.Unlock()
		return fail(kerr.RebalanceInProgress.Code)
	}
	m.lastSeen = time.Now()
	pt, pr := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &pr
	if g.state == stateStable {
		resp.MemberAssignment = m.assignment
		gc.mu.Unlock()
		return 0
	}
	if m.id == g.leader {
		assigned := map[string][]byte{}
		for _, a := range r.GroupAssignment {
			assigned[a.MemberID] = a.MemberAssignment
		}
		for _, mm := range g.members {
			mm.assignment = assigned[mm.id]
			if mm.sync != nil {
				mm.sync <- syncResult{assignment: mm.assignment}
				mm.sync = nil
			}
		}
		g.state = stateStable
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		resp.MemberAssignment = m.assignment
		gc.mu.Unlock()
		return 0
	}
	ch := make(chan syncResult, 1)
	m.sync = ch
	gc.mu.Unlock()
	select {
	case res := <-ch:
		resp.ErrorCode, resp.MemberAssignment = res.code, res.assignment
	case <-gc.b.ctx.Done():
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	}
	return resp.ErrorCode
}

func (gc *groupCoordinator) heartbeat(r *kmsg.HeartbeatRequest, resp *kmsg.HeartbeatResponse) int16 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	g := gc.groups[r.Group]
	var m *member
	if g != nil {
		m = g.members[r.MemberID]
	}
	switch {
	case gc.b.fenced.Load():
		resp.ErrorCode = kerr.NotCoordinator.Code
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case r.Generation != g.generation:
		m.lastSeen = time.Now()
		resp.ErrorCode = kerr.IllegalGeneration.Code
	case g.state == statePreparing:
		m.lastSeen = time.Now()
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default:
		m.lastSeen = time.Now()
	}
	if resp.ErrorCode != 0 {
		gc.b.log.Debug("group heartbeat refused", "group", r.Group, "member", r.MemberID, "generation", r.Generation, "code", errorFor(resp.ErrorCode))
	}
	return resp.ErrorCode
}

func (gc *groupCoordinator) leave(r *kmsg.LeaveGroupRequest, resp *kmsg.LeaveGroupResponse) int16 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	g := gc.groups[r.Group]
	ids := []string{r.MemberID}
	if r.Version >= 3 {
		ids = ids[:0]
		for _, lm := range r.Members {
			ids = append(ids, lm.MemberID)
		}
	}
	worst := int16(0)
	for i, id := range ids {
		code := int16(0)
		var m *member
		if g != nil {
			m = g.members[id]
		}
		if m == nil {
			code = kerr.UnknownMemberID.Code
			worst = code
		} else {
			gc.b.log.Info("group member left", "group", g.name, "member", id)
			gc.removeMember(g, m)
		}
		if r.Version >= 3 {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: id, InstanceID: r.Members[i].InstanceID, ErrorCode: code})
		}
	}
	if r.Version < 3 {
		resp.ErrorCode = worst
	}
	return worst
}

func (gc *groupCoordinator) offsetCommit(r *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) int16 {
	code := int16(0)
	gc.mu.Lock()
	g := gc.groups[r.Group]
	switch {
	case gc.b.fenced.Load():
		code = kerr.NotCoordinator.Code
	case r.Group == "":
		code = kerr.InvalidGroupID.Code
	case r.Generation < 0 && r.MemberID == "":
		if g != nil && len(g.members) > 0 {
			code = kerr.UnknownMemberID.Code // simple commits need an inactive group
		}
	case g == nil || g.members[r.MemberID] == nil:
		code = kerr.UnknownMemberID.Code
	case r.Generation != g.generation:
		code = kerr.IllegalGeneration.Code
	case g.state == stateCompleting:
		code = kerr.RebalanceInProgress.Code
	default:
		g.members[r.MemberID].lastSeen = time.Now()
	}
	gc.mu.Unlock()
	var cs []committed
	if code == 0 {
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				md := ""
				if rp.Metadata != nil {
					md = *rp.Metadata
				}
				cs = append(cs, committed{Group: r.Group, Topic: rt.Topic, Partition: rp.Partition, Offset: max(rp.Offset, 0), LeaderEpoch: rp.LeaderEpoch, Metadata: md})
			}
		}
		ctx, cancel := gc.b.reqCtx(30 * time.Second)
		if err := gc.b.offsets.commit(ctx, cs); err != nil {
			gc.b.log.Warn("offset commit failed", "group", r.Group, "err", err)
			code = kerr.CoordinatorNotAvailable.Code
			if errors.Is(err, errNotCoordinator) { // the offsets moved meanwhile
				code = kerr.NotCoordinator.Code
			}
		}
		cancel()
	}
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			st.Partitions = append(st.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: rp.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, st)
	}
	return code
}

func (gc *groupCoordinator) offsetFetch(r *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) int16 {
	if gc.b.fenced.Load() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp.ErrorCode
	}
	fill := func(c committed, ok bool, p int32) kmsg.OffsetFetchResponseTopicPartition {
		sp := kmsg.NewOffsetFetchResponseTopicPartition()
		sp.Partition = p
		sp.Offset, sp.LeaderEpoch = -1, -1
		if ok {
			md := c.Metadata
			sp.Offset, sp.LeaderEpoch, sp.Metadata = c.Offset, c.LeaderEpoch, &md
		}
		return sp
	}
	if r.Topics == nil {
		byTopic := map[string]int{}
		for _, c := range gc.b.offsets.all(r.Group) {
			i, ok := byTopic[c.Topic]
			if !ok {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = c.Topic
				resp.Topics = append(resp.Topics, st)
				i = len(resp.Topics) - 1
				byTopic[c.Topic] = i
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, fill(c, true, c.Partition))
		}
		return 0
	}
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			c, ok := gc.b.offsets.fetch(r.Group, rt.Topic, p)
			st.Partitions = append(st.Partitions, fill(c, ok, p))
		}
		resp.Topics = append(resp.Topics, st)
	}
	return 0
}

func (gc *groupCoordinator) listGroups(r *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) int16 {
	seen := map[string]bool{}
	gc.mu.Lock()
	for name, g := range gc.groups {
		seen[name] = true
		if !wantState(r.StatesFilter, g.state) {
			continue
		}
		resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: name, ProtocolType: g.protocolType, GroupState: g.state})
	}
	gc.mu.Unlock()
	for _, name := range gc.b.offsets.groupNames() {
		if !seen[name] && wantState(r.StatesFilter, stateEmpty) {
			resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: name, ProtocolType: "consumer", GroupState: stateEmpty})
		}
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return 0
}

func wantState(filter []string, state string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if f == state {
			return true
		}
	}
	return false
}

func (gc *groupCoordinator) describeGroups(r *kmsg.DescribeGroupsRequest, resp *kmsg.DescribeGroupsResponse) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for _, name := range r.Groups {
		sg := kmsg.NewDescribeGroupsResponseGroup()
		sg.Group = name
		sg.State = "Dead"
		if g := gc.groups[name]; g != nil {
			sg.State, sg.ProtocolType, sg.Protocol = g.state, g.protocolType, g.protocol
			ids := make([]string, 0, len(g.members))
			for id := range g.members {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				m := g.members[id]
				sm := kmsg.NewDescribeGroupsResponseGroupMember()
				sm.MemberID, sm.ClientID, sm.ClientHost = m.id, m.clientID, m.clientHost
				if m.instanceID != "" {
					s := m.instanceID
					sm.InstanceID = &s
				}
				sm.ProtocolMetadata = protocolMetadata(m, g.protocol)
				sm.MemberAssignment = m.assignment
				sg.Members = append(sg.Members, sm)
			}
		} else if len(gc.b.offsets.all(name)) > 0 {
			sg.State = stateEmpty
			sg.ProtocolType = "consumer"
		}
		resp.Groups = append(resp.Groups, sg)
	}
}
