package acl

import (
	"slices"
	"strings"
)

// Decision is the outcome of one authorization check, with why, so a
// denial can be logged with its reason.
type Decision uint8

const (
	// DeniedNoMatch: ACLs exist on the resource but none allows the
	// operation to this principal from this host (Kafka's default deny),
	// or no ACL exists and allow-everyone-if-no-acl-found is off.
	DeniedNoMatch Decision = iota
	// DeniedByACL: a DENY binding matches (DENY wins over any ALLOW).
	DeniedByACL
	// AllowedByACL: an ALLOW binding matches and no DENY does.
	AllowedByACL
	// AllowedSuperUser: the principal is a super user; ACLs are not read.
	AllowedSuperUser
	// AllowedNoACL: no binding names the resource at all and the
	// authorizer allows everyone in that case.
	AllowedNoACL
)

// Allowed reports whether the decision permits the operation.
func (d Decision) Allowed() bool { return d >= AllowedByACL }

func (d Decision) String() string {
	switch d {
	case DeniedNoMatch:
		return "denied: no ACL allows it"
	case DeniedByACL:
		return "denied by a DENY ACL"
	case AllowedByACL:
		return "allowed by an ACL"
	case AllowedSuperUser:
		return "allowed: super user"
	case AllowedNoACL:
		return "allowed: no ACL on the resource"
	}
	return "unknown decision"
}

// Options are an Authorizer's settings beyond its bindings.
type Options struct {
	// SuperUsers are principals ("User:admin") allowed everything,
	// whatever the ACLs say, DENY ones included (Kafka's super.users).
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource no binding
	// names at all, not even by wildcard or prefix (Kafka's
	// allow.everyone.if.no.acl.found). Off: such resources are denied.
	AllowEveryoneIfNoACL bool
}

// ClusterName is the one name of the cluster resource (Kafka's
// "kafka-cluster"): cluster ACLs and checks use it.
const ClusterName = "kafka-cluster"

// Authorizer answers checks from an immutable index of bindings. Build one
// with New each time the bindings change; it is safe for concurrent use.
//
// The index is what makes a check independent of how many bindings there
// are: bindings are grouped per resource type into literal names, prefixes
// (looked up by the distinct prefix lengths, so a check costs one map
// lookup per distinct length, not one per binding) and the literal "*";
// inside a resource, per principal; and for a principal, the permitted and
// denied operations are precomputed bit sets, for any host and per host.
// A check therefore reads at most a few maps and compares two bit sets.
type Authorizer struct {
	superUsers map[string]bool
	allowNoACL bool
	types      [ResourceUser + 1]*typeIndex
	// bindings per resource type, for AuthorizeByResourceType, which must
	// look at every binding of a type (as Kafka's does).
	byType [ResourceUser + 1][]Binding
}

type typeIndex struct {
	literal    map[string]*resourceRules
	prefixed   map[string]*resourceRules
	prefixLens []int // distinct lengths of the prefixed names, ascending
	wildcard   *resourceRules
}

// resourceRules are the bindings of one resource pattern, per principal.
type resourceRules struct {
	byPrincipal map[string]*principalRules
}

// principalRules are one principal's permissions on one resource pattern:
// for any host ("*") and per host.
type principalRules struct {
	anyHost opSets
	byHost  map[string]opSets
}

// opSets are the operations a set of bindings allows and denies, as bits
// 1<<Operation. allow already includes what the allowed operations imply
// (READ implies DESCRIBE...); deny does not, as in Kafka a DENY of READ
// does not deny DESCRIBE.
type opSets struct{ allow, deny uint32 }

const allOps = uint32(1<<(OpDescribeTokens+1)-1) &^ (1<<OpUnknown | 1<<OpAny)

// grants is what an ALLOW of op permits, Kafka's implications included:
// READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
// DESCRIBE_CONFIGS; ALL is every operation.
func grants(op Operation) uint32 {
	switch op {
	case OpAll:
		return allOps
	case OpRead, OpWrite, OpDelete, OpAlter:
		return 1<<op | 1<<OpDescribe
	case OpAlterConfigs:
		return 1<<op | 1<<OpDescribeConfigs
	}
	return 1 << op
}

func denies(op Operation) uint32 {
	if op == OpAll {
		return allOps
	}
	return 1 << op
}

// New builds an Authorizer. Bindings that could never match (unknown or
// filter-only enum values, an empty resource name or host, a principal
// without a type) are ignored: the controller refuses them in the first
// place (cluster/metadata.ValidateACLBinding).
func New(bindings []Binding, opts Options) *Authorizer {
	a := &Authorizer{superUsers: make(map[string]bool, len(opts.SuperUsers)), allowNoACL: opts.AllowEveryoneIfNoACL}
	for _, p := range opts.SuperUsers {
		a.superUsers[p] = true
	}
	for _, b := range bindings {
		if !usable(b) {
			continue
		}
		a.byType[b.ResourceType] = append(a.byType[b.ResourceType], b)
		ti := a.types[b.ResourceType]
		if ti == nil {
			ti = &typeIndex{literal: map[string]*resourceRules{}, prefixed: map[string]*resourceRules{}}
			a.types[b.ResourceType] = ti
		}
		var rr *resourceRules
		switch {
		case b.PatternType == PatternLiteral && b.ResourceName == WildcardResource:
			if ti.wildcard == nil {
				ti.wildcard = &resourceRules{byPrincipal: map[string]*principalRules{}}
			}
			rr = ti.wildcard
		case b.PatternType == PatternLiteral:
			rr = ruleFor(ti.literal, b.ResourceName)
		default:
			if _, ok := ti.prefixed[b.ResourceName]; !ok {
				ti.prefixLens = append(ti.prefixLens, len(b.ResourceName))
			}
			rr = ruleFor(ti.prefixed, b.ResourceName)
		}
		pr := rr.byPrincipal[b.Principal]
		if pr == nil {
			pr = &principalRules{}
			rr.byPrincipal[b.Principal] = pr
		}
		sets := &pr.anyHost
		var hs opSets
		if b.Host != WildcardHost {
			if pr.byHost == nil {
				pr.byHost = map[string]opSets{}
			}
			hs = pr.byHost[b.Host]
			sets = &hs
		}
		if b.Permission == PermissionAllow {
			sets.allow |= grants(b.Operation)
		} else {
			sets.deny |= denies(b.Operation)
		}
		if b.Host != WildcardHost {
			pr.byHost[b.Host] = hs
		}
	}
	for _, ti := range a.types {
		if ti != nil {
			slices.Sort(ti.prefixLens)
			ti.prefixLens = slices.Compact(ti.prefixLens)
		}
	}
	return a
}

// usable reports whether b is a binding a check can match: concrete enum
// values, a resource name, a host and a Type:Name principal.
func usable(b Binding) bool {
	return b.ResourceType >= ResourceTopic && b.ResourceType <= ResourceUser &&
		(b.PatternType == PatternLiteral || b.PatternType == PatternPrefixed) &&
		b.Operation >= OpAll && b.Operation <= OpDescribeTokens &&
		(b.Permission == PermissionAllow || b.Permission == PermissionDeny) &&
		b.ResourceName != "" && b.Host != "" && strings.Contains(b.Principal, ":")
}

func ruleFor(m map[string]*resourceRules, name string) *resourceRules {
	rr := m[name]
	if rr == nil {
		rr = &resourceRules{byPrincipal: map[string]*principalRules{}}
		m[name] = rr
	}
	return rr
}

// IsSuperUser reports whether principal bypasses ACLs.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.superUsers[principal] }

// Authorize decides whether principal, connected from host (an IP
// address), may do op on the resource of type rt named name (a literal
// name, never a pattern), with Kafka's StandardAuthorizer semantics:
// super users may do anything; otherwise the bindings whose pattern
// matches the name (literal, the literal "*", prefixes of it) and whose
// principal is the principal or "User:*" and whose host is host or "*"
// are applied: any DENY of op (or ALL) denies, else any ALLOW of op, of
// ALL or of an operation implying op allows; if none of them applies,
// the operation is denied, unless no binding at all names the resource
// and AllowEveryoneIfNoACL is set.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) Decision {
	if a.superUsers[principal] {
		return AllowedSuperUser
	}
	if rt < ResourceTopic || rt > ResourceUser || op <= OpAny || op > OpDescribeTokens {
		return DeniedNoMatch
	}
	ti := a.types[rt]
	if ti == nil {
		return a.noACL()
	}
	var (
		found   bool
		allowed bool
	)
	check := func(rr *resourceRules) (denied bool) {
		if rr == nil {
			return false
		}
		found = true
		for _, p := range [2]string{principal, WildcardPrincipal} {
			pr := rr.byPrincipal[p]
			if pr == nil {
				continue
			}
			s := pr.anyHost
			if hs, ok := pr.byHost[host]; ok {
				s.allow |= hs.allow
				s.deny |= hs.deny
			}
			if s.deny&(1<<op) != 0 {
				return true
			}
			if s.allow&(1<<op) != 0 {
				allowed = true
			}
		}
		return false
	}
	if check(ti.literal[name]) || check(ti.wildcard) {
		return DeniedByACL
	}
	for _, l := range ti.prefixLens {
		if l > len(name) {
			break
		}
		if check(ti.prefixed[name[:l]]) {
			return DeniedByACL
		}
	}
	switch {
	case allowed:
		return AllowedByACL
	case !found:
		return a.noACL()
	}
	return DeniedNoMatch
}

func (a *Authorizer) noACL() Decision {
	if a.allowNoACL {
		return AllowedNoACL
	}
	return DeniedNoMatch
}

// AuthorizeByResourceType reports whether principal may do op on at least
// one resource of type rt: Kafka's Authorizer.authorizeByResourceType,
// which InitProducerId uses to let an idempotent producer in when it may
// WRITE some topic. A super user (or, with AllowEveryoneIfNoACL, a type
// without a binding on a name nothing else matches) may; a DENY of the
// literal "*" for the principal forbids all; otherwise some ALLOW (op or
// ALL) must not be covered by a DENY: a literal by the same literal or a
// prefix of it, a prefix by a shorter or equal DENY prefix.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	// Kafka checks a hard-coded name first, so super users (and the
	// no-ACL rule) are honoured regardless of DENY bindings.
	if a.Authorize(principal, host, op, rt, "hardcode").Allowed() {
		return true
	}
	if rt < ResourceTopic || rt > ResourceUser {
		return false
	}
	var (
		denyLiteral  = map[string]bool{}
		denyPrefixed = map[string]bool{}
		allows       []Binding
	)
	for _, b := range a.byType[rt] {
		if b.Host != host && b.Host != WildcardHost {
			continue
		}
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			continue
		}
		if b.Operation != op && b.Operation != OpAll {
			continue
		}
		if b.Permission == PermissionDeny {
			switch {
			case b.PatternType == PatternLiteral && b.ResourceName == WildcardResource:
				return false
			case b.PatternType == PatternLiteral:
				denyLiteral[b.ResourceName] = true
			default:
				denyPrefixed[b.ResourceName] = true
			}
			continue
		}
		if b.PatternType == PatternLiteral && b.ResourceName == WildcardResource {
			return true
		}
		allows = append(allows, b)
	}
	for _, b := range allows {
		if b.PatternType == PatternLiteral && denyLiteral[b.ResourceName] {
			continue
		}
		dominated := false
		for l := 1; l <= len(b.ResourceName); l++ {
			if denyPrefixed[b.ResourceName[:l]] {
				dominated = true
				break
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}

// SupportedOperations are the operations that mean something on a
// resource type (Kafka's AclEntry.supportedOperations): what the
// *_authorized_operations fields of Metadata, DescribeGroups and
// DescribeCluster report.
func SupportedOperations(rt ResourceType) []Operation {
	switch rt {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDescribe, OpDelete, OpDescribeConfigs, OpAlterConfigs}
	case ResourceCluster:
		return []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe}
	case ResourceTransactionalID:
		return []Operation{OpDescribe, OpWrite}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}

// AuthorizedOperations is the bit field (1<<operation code for each
// allowed operation) of the supported operations principal may do on the
// resource, as Kafka's AuthHelper.authorizedOperations computes it.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Authorize(principal, host, op, rt, name).Allowed() {
			bits |= 1 << op
		}
	}
	return bits
}

// Operations lists every concrete operation (not ANY, not UNKNOWN), for
// tests and tools.
func Operations() []Operation {
	ops := make([]Operation, 0, OpDescribeTokens-OpAll+1)
	for op := OpAll; op <= OpDescribeTokens; op++ {
		ops = append(ops, op)
	}
	return ops
}
