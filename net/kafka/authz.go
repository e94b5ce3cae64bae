package kafka

// Authorization: the checks every handler makes, in one place, with
// Kafka's semantics (KafkaApis and AuthHelper). When Options.Authz is not
// Enabled every check passes, as a Kafka broker without an authorizer.
// The decisions are engine/acl's; this file only binds them to the
// connection's principal and host and to the server's current ACLs.
//
// The Authorizer is rebuilt only when the ACLs' version changes (the
// controller bumps it on every change) and is shared, immutable, by all
// connections through an atomic pointer: a check never locks.

import (
	"iter"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/acl"
)

// AuthzOptions configure authorization (ACLs).
type AuthzOptions struct {
	// Enabled turns ACL checks on. The node enables them when the
	// listener authenticates its clients (SASL_*, or SSL with client
	// certificates): on a PLAINTEXT listener every client is
	// User:ANONYMOUS and ACLs would mean nothing.
	Enabled bool
	// SuperUsers are principals ("User:admin") allowed everything
	// (Kafka's super.users).
	SuperUsers []string
	// AllowEveryoneIfNoACL allows operations on resources no ACL names
	// (Kafka's allow.everyone.if.no.acl.found); off, they are denied.
	AllowEveryoneIfNoACL bool
	// ACLs returns the cluster's bindings and their version, which
	// changes whenever they do; the slice is shared and never modified.
	// The node sets it to the controller's ACLs; nil means no bindings.
	ACLs func() ([]acl.Binding, uint64)
}

// builtAuthorizer is the Authorizer for one version of the ACLs.
type builtAuthorizer struct {
	version uint64
	a       *acl.Authorizer
}

// authorizer is the Authorizer for the current ACLs, built once per
// version: the first request to see a new version builds it (under
// authzBuild, so a change does not make every connection build its own
// copy at once) and the others wait for it.
func (s *Server) authorizer() *acl.Authorizer {
	var (
		bindings []acl.Binding
		version  uint64
	)
	if s.opts.Authz.ACLs != nil {
		bindings, version = s.opts.Authz.ACLs()
	}
	if cur := s.authz.Load(); cur != nil && cur.version == version {
		return cur.a
	}
	s.authzBuild.Lock()
	defer s.authzBuild.Unlock()
	if cur := s.authz.Load(); cur != nil && cur.version == version {
		return cur.a
	}
	a := acl.New(bindings, acl.Options{SuperUsers: s.opts.Authz.SuperUsers, AllowEveryoneIfNoACL: s.opts.Authz.AllowEveryoneIfNoACL})
	// A request that read an older version than the one built meanwhile
	// uses its own, but does not replace the newer one.
	if cur := s.authz.Load(); cur == nil || cur.version < version {
		s.authz.Store(&builtAuthorizer{version: version, a: a})
	}
	return a
}

// authz is one request's view of authorization: the Authorizer of the
// ACLs current when the request began (a request is judged against one
// version of them) and what to log a denial with.
type authz struct {
	c   *conn
	a   *acl.Authorizer // nil: authorization is off
	api int16           // the request's key, named only in a denial's log line
}

// authz starts a request's checks.
func (c *conn) authz(r *request) authz {
	z := authz{c: c, api: r.key}
	if c.s.opts.Authz.Enabled {
		z.a = c.s.authorizer()
	}
	return z
}

// allowed reports whether the connection may do op on the resource; a
// denial is logged at debug level (Kafka logs them to its audit log).
func (z authz) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	if z.a == nil {
		return true
	}
	d := z.a.Authorize(z.c.principal, z.c.host, op, rt, name)
	if !d.Allowed() {
		z.c.s.log.Debug("authorization denied", "principal", z.c.principal, "host", z.c.host, "api", apiName(z.api),
			"operation", op.String(), "resource_type", rt.String(), "resource", name, slog.String("reason", d.String()))
	}
	return d.Allowed()
}

// quietly reports what allowed does without logging a denial: for checks
// that only filter what a client is shown (Metadata of all topics,
// ListGroups), as Kafka's logIfDenied=false.
func (z authz) quietly(op acl.Operation, rt acl.ResourceType, name string) bool {
	return z.a == nil || z.a.Authorize(z.c.principal, z.c.host, op, rt, name).Allowed()
}

// cluster reports whether the connection may do op on the cluster.
func (z authz) cluster(op acl.Operation) bool {
	return z.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

// topicSet is which topics of a request an operation is allowed on.
type topicSet struct {
	m map[string]bool // nil: all of them
}

// ok reports whether the operation is allowed on topic.
func (s topicSet) ok(topic string) bool { return s.m == nil || s.m[topic] }

// refusesAny reports whether some topic of the request is refused.
func (s topicSet) refusesAny() bool {
	for _, ok := range s.m {
		if !ok {
			return true
		}
	}
	return false
}

// noTopics refuses every topic.
var noTopics = topicSet{m: map[string]bool{}}

// topics decides op for each distinct topic name (Kafka's
// filterByAuthorized: one check per name, however many partitions name
// it). With authorization off it allocates nothing.
func (z authz) topics(op acl.Operation, names iter.Seq[string]) topicSet {
	if z.a == nil {
		return topicSet{}
	}
	out := map[string]bool{}
	for n := range names {
		if _, seen := out[n]; !seen {
			out[n] = z.allowed(op, acl.ResourceTopic, n)
		}
	}
	return topicSet{m: out}
}

// byResourceType reports whether the connection may do op on some
// resource of type rt (Kafka's authorizeByResourceType).
func (z authz) byResourceType(op acl.Operation, rt acl.ResourceType) bool {
	if z.a == nil {
		return true
	}
	ok := z.a.AuthorizeByResourceType(z.c.principal, z.c.host, op, rt)
	if !ok {
		z.c.s.log.Debug("authorization denied", "principal", z.c.principal, "host", z.c.host, "api", apiName(z.api),
			"operation", op.String(), "resource_type", rt.String(), "resource", "any")
	}
	return ok
}

// operations is the *_authorized_operations bit field for a resource:
// what the connection may do of the operations the resource type
// supports; every supported operation when authorization is off (Kafka's
// answer without an authorizer).
func (z authz) operations(rt acl.ResourceType, name string) int32 {
	if z.a == nil {
		var bits int32
		for _, op := range acl.SupportedOperations(rt) {
			bits |= 1 << op
		}
		return bits
	}
	return z.a.AuthorizedOperations(z.c.principal, z.c.host, rt, name)
}

// namesOf iterates the names of a request's topics (or groups).
func namesOf[T any](items []T, name func(*T) string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range items {
			if !yield(name(&items[i])) {
				return
			}
		}
	}
}

// clusterGated are the APIs whose whole request needs one operation on
// the cluster (Kafka's authorizeClusterOperation in KafkaApis/AclApis):
// the security admin APIs. They are checked in dispatch, before their
// handlers, so no handler can forget it.
var clusterGated = map[int16]acl.Operation{
	kmsg.DescribeACLs.Int16():                 acl.OpDescribe,
	kmsg.CreateACLs.Int16():                   acl.OpAlter,
	kmsg.DeleteACLs.Int16():                   acl.OpAlter,
	kmsg.DescribeClientQuotas.Int16():         acl.OpDescribeConfigs,
	kmsg.AlterClientQuotas.Int16():            acl.OpAlterConfigs,
	kmsg.DescribeUserSCRAMCredentials.Int16(): acl.OpDescribe,
	kmsg.AlterUserSCRAMCredentials.Int16():    acl.OpAlter,
}

// clusterGate answers a cluster-gated request the principal may not make
// with CLUSTER_AUTHORIZATION_FAILED, shaped as Kafka's error response for
// it (every item of the request refused); nil lets the handler run.
func (c *conn) clusterGate(r *request) kmsg.Response {
	op, gated := clusterGated[r.key]
	if !gated || c.authz(r).cluster(op) {
		return nil
	}
	code := kerr.ClusterAuthorizationFailed.Code
	msg := kmsg.StringPtr("not authorized: " + op.String() + " on the cluster is needed")
	resp := r.kreq.ResponseKind()
	switch req := r.kreq.(type) {
	case *kmsg.DescribeACLsRequest:
		resp := resp.(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
	case *kmsg.CreateACLsRequest:
		resp := resp.(*kmsg.CreateACLsResponse)
		for range req.Creations {
			resp.Results = append(resp.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: msg})
		}
	case *kmsg.DeleteACLsRequest:
		resp := resp.(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			resp.Results = append(resp.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: msg})
		}
	case *kmsg.DescribeClientQuotasRequest:
		resp := resp.(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
	case *kmsg.AlterClientQuotasRequest:
		resp := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			re := kmsg.AlterClientQuotasResponseEntry{ErrorCode: code, ErrorMessage: msg}
			for _, part := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: part.Type, Name: part.Name})
			}
			resp.Entries = append(resp.Entries, re)
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		// One result per user named, as Kafka's error response.
		resp := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				resp.Results = append(resp.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: user, ErrorCode: code, ErrorMessage: msg})
			}
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
	default:
		return nil // a gated key always decodes to its request type
	}
	return resp
}
