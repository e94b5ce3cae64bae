package acl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func allow(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal, host string, op Operation) Binding {
	b := allow(rt, name, pt, principal, host, op)
	b.Permission = PermissionDeny
	return b
}

// TestAuthorizeMatrix is the ACL matrix: allowed, denied, DENY over ALLOW,
// PREFIXED, wildcards (resource, principal, host), super users, and the
// operations' implications.
func TestAuthorizeMatrix(t *testing.T) {
	const (
		alice = "User:alice"
		bob   = "User:bob"
		h1    = "10.0.0.1"
		h2    = "10.0.0.2"
	)
	type check struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            Decision
	}
	tests := []struct {
		name     string
		bindings []Binding
		opts     Options
		checks   []check
	}{
		{
			name:     "literal allow",
			bindings: []Binding{allow(ResourceTopic, "orders", PatternLiteral, alice, "*", OpRead)},
			checks: []check{
				{alice, h1, OpRead, ResourceTopic, "orders", AllowedByACL},
				{alice, h1, OpWrite, ResourceTopic, "orders", DeniedNoMatch},
				{bob, h1, OpRead, ResourceTopic, "orders", DeniedNoMatch},
				{alice, h1, OpRead, ResourceTopic, "orders2", DeniedNoMatch},
				{alice, h1, OpRead, ResourceTopic, "order", DeniedNoMatch},
				{alice, h1, OpRead, ResourceGroup, "orders", DeniedNoMatch},
			},
		},
		{
			name: "implications of ALLOW",
			bindings: []Binding{
				allow(ResourceTopic, "r", PatternLiteral, alice, "*", OpRead),
				allow(ResourceTopic, "w", PatternLiteral, alice, "*", OpWrite),
				allow(ResourceTopic, "d", PatternLiteral, alice, "*", OpDelete),
				allow(ResourceTopic, "a", PatternLiteral, alice, "*", OpAlter),
				allow(ResourceTopic, "ac", PatternLiteral, alice, "*", OpAlterConfigs),
				allow(ResourceTopic, "c", PatternLiteral, alice, "*", OpCreate),
				allow(ResourceTopic, "all", PatternLiteral, alice, "*", OpAll),
			},
			checks: []check{
				{alice, h1, OpDescribe, ResourceTopic, "r", AllowedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "w", AllowedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "d", AllowedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "a", AllowedByACL},
				{alice, h1, OpDescribeConfigs, ResourceTopic, "ac", AllowedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "ac", DeniedNoMatch},
				{alice, h1, OpDescribe, ResourceTopic, "c", DeniedNoMatch}, // CREATE implies nothing
				{alice, h1, OpRead, ResourceTopic, "w", DeniedNoMatch},     // WRITE does not imply READ
				{alice, h1, OpDescribeConfigs, ResourceTopic, "r", DeniedNoMatch},
				{alice, h1, OpRead, ResourceTopic, "all", AllowedByACL},
				{alice, h1, OpAlterConfigs, ResourceTopic, "all", AllowedByACL},
				{alice, h1, OpIdempotentWrite, ResourceTopic, "all", AllowedByACL},
			},
		},
		{
			name: "DENY overrides ALLOW, and a DENY implies nothing",
			bindings: []Binding{
				allow(ResourceTopic, "t", PatternLiteral, alice, "*", OpAll),
				deny(ResourceTopic, "t", PatternLiteral, alice, "*", OpWrite),
				allow(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpRead),
				deny(ResourceTopic, "secret", PatternPrefixed, "User:*", "*", OpRead),
				allow(ResourceTopic, "x", PatternLiteral, bob, "*", OpRead),
				deny(ResourceTopic, "x", PatternLiteral, bob, "*", OpAll),
			},
			checks: []check{
				{alice, h1, OpRead, ResourceTopic, "t", AllowedByACL},
				{alice, h1, OpWrite, ResourceTopic, "t", DeniedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "t", AllowedByACL}, // DENY WRITE does not deny DESCRIBE
				{bob, h1, OpRead, ResourceTopic, "anything", AllowedByACL},
				{bob, h1, OpRead, ResourceTopic, "secret-plans", DeniedByACL}, // prefixed DENY beats wildcard ALLOW
				{alice, h1, OpRead, ResourceTopic, "secretariat", DeniedByACL},
				{alice, h1, OpDescribe, ResourceTopic, "secret-plans", AllowedByACL},
				{bob, h1, OpRead, ResourceTopic, "x", DeniedByACL}, // DENY ALL
				{bob, h1, OpDescribe, ResourceTopic, "x", DeniedByACL},
			},
		},
		{
			name: "prefixed patterns",
			bindings: []Binding{
				allow(ResourceTopic, "app.", PatternPrefixed, alice, "*", OpWrite),
				allow(ResourceTopic, "app.billing.", PatternPrefixed, bob, "*", OpRead),
				allow(ResourceGroup, "app-", PatternPrefixed, alice, "*", OpRead),
			},
			checks: []check{
				{alice, h1, OpWrite, ResourceTopic, "app.orders", AllowedByACL},
				{alice, h1, OpWrite, ResourceTopic, "app.", AllowedByACL},
				{alice, h1, OpWrite, ResourceTopic, "app", DeniedNoMatch},
				{alice, h1, OpWrite, ResourceTopic, "xapp.orders", DeniedNoMatch},
				{bob, h1, OpRead, ResourceTopic, "app.billing.eu", AllowedByACL},
				{bob, h1, OpRead, ResourceTopic, "app.orders", DeniedNoMatch},
				{alice, h1, OpRead, ResourceGroup, "app-consumers", AllowedByACL},
				{alice, h1, OpRead, ResourceTopic, "app-consumers", DeniedNoMatch},
			},
		},
		{
			name: "wildcard resource, principal and host",
			bindings: []Binding{
				allow(ResourceTopic, "*", PatternLiteral, alice, "*", OpDescribe),
				allow(ResourceTopic, "pub", PatternLiteral, "User:*", "*", OpRead),
				allow(ResourceTopic, "lan", PatternLiteral, alice, h1, OpRead),
				deny(ResourceTopic, "lan", PatternLiteral, bob, h2, OpRead),
				allow(ResourceTopic, "lan", PatternLiteral, bob, "*", OpRead),
			},
			checks: []check{
				{alice, h1, OpDescribe, ResourceTopic, "anything", AllowedByACL},
				{bob, h1, OpDescribe, ResourceTopic, "anything", DeniedNoMatch},
				{bob, h1, OpRead, ResourceTopic, "pub", AllowedByACL},
				{"User:carol", h2, OpRead, ResourceTopic, "pub", AllowedByACL},
				{alice, h1, OpRead, ResourceTopic, "lan", AllowedByACL},
				{alice, h2, OpRead, ResourceTopic, "lan", DeniedNoMatch},
				{bob, h1, OpRead, ResourceTopic, "lan", AllowedByACL},
				{bob, h2, OpRead, ResourceTopic, "lan", DeniedByACL},
				// A literal "*" topic name in a check is just a name.
				{bob, h1, OpRead, ResourceTopic, "*", DeniedNoMatch},
			},
		},
		{
			name: "super users bypass DENY",
			bindings: []Binding{
				deny(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpAll),
				deny(ResourceCluster, ClusterName, PatternLiteral, "User:admin", "*", OpAll),
			},
			opts: Options{SuperUsers: []string{"User:admin"}},
			checks: []check{
				{"User:admin", h1, OpDelete, ResourceTopic, "t", AllowedSuperUser},
				{"User:admin", h1, OpAlter, ResourceCluster, ClusterName, AllowedSuperUser},
				{"User:admin", h1, OpRead, ResourceGroup, "g", AllowedSuperUser},
				{alice, h1, OpRead, ResourceTopic, "t", DeniedByACL},
				{"User:Admin", h1, OpRead, ResourceTopic, "t", DeniedByACL}, // exact, case-sensitive
			},
		},
		{
			name: "allow everyone if no ACL found",
			bindings: []Binding{
				allow(ResourceTopic, "guarded", PatternLiteral, alice, "*", OpRead),
				allow(ResourceTopic, "g.", PatternPrefixed, alice, "*", OpRead),
			},
			opts: Options{AllowEveryoneIfNoACL: true},
			checks: []check{
				{bob, h1, OpWrite, ResourceTopic, "open", AllowedNoACL},
				{bob, h1, OpRead, ResourceGroup, "any", AllowedNoACL},
				{bob, h1, OpRead, ResourceTopic, "guarded", DeniedNoMatch}, // an ACL exists, for someone else
				{bob, h1, OpRead, ResourceTopic, "g.x", DeniedNoMatch},     // a prefixed ACL covers it
				{alice, h1, OpWrite, ResourceTopic, "guarded", DeniedNoMatch},
			},
		},
		{
			name:     "no ACL found, default deny",
			bindings: nil,
			checks: []check{
				{bob, h1, OpRead, ResourceTopic, "open", DeniedNoMatch},
				{bob, h1, OpDescribe, ResourceCluster, ClusterName, DeniedNoMatch},
			},
		},
		{
			name: "cluster and transactional ids",
			bindings: []Binding{
				allow(ResourceCluster, ClusterName, PatternLiteral, alice, "*", OpIdempotentWrite),
				allow(ResourceCluster, ClusterName, PatternLiteral, "User:broker", "*", OpClusterAction),
				allow(ResourceTransactionalID, "tx-", PatternPrefixed, alice, "*", OpWrite),
			},
			checks: []check{
				{alice, h1, OpIdempotentWrite, ResourceCluster, ClusterName, AllowedByACL},
				{alice, h1, OpClusterAction, ResourceCluster, ClusterName, DeniedNoMatch},
				{"User:broker", h1, OpClusterAction, ResourceCluster, ClusterName, AllowedByACL},
				{alice, h1, OpWrite, ResourceTransactionalID, "tx-1", AllowedByACL},
				{alice, h1, OpDescribe, ResourceTransactionalID, "tx-1", AllowedByACL},
				{alice, h1, OpWrite, ResourceTransactionalID, "other", DeniedNoMatch},
			},
		},
		{
			name:     "nonsense checks are denied, never a panic",
			bindings: []Binding{allow(ResourceTopic, "*", PatternLiteral, "User:*", "*", OpAll)},
			checks: []check{
				{alice, h1, OpAny, ResourceTopic, "t", DeniedNoMatch},
				{alice, h1, Operation(99), ResourceTopic, "t", DeniedNoMatch},
				{alice, h1, OpRead, ResourceType(-3), "t", DeniedNoMatch},
				{alice, h1, OpRead, ResourceType(100), "t", DeniedNoMatch},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.bindings, tt.opts)
			for _, c := range tt.checks {
				got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name)
				require.Equal(t, c.want, got, "%s from %s: %v %v %q", c.principal, c.host, c.op, c.rt, c.name)
				require.Equal(t, c.want.Allowed(), got.Allowed())
				if c.op > OpAny && c.op <= OpDescribeTokens && c.rt >= ResourceTopic && c.rt <= ResourceUser {
					require.Equal(t, refAuthorize(tt.bindings, tt.opts, c.principal, c.host, c.op, c.rt, c.name), got.Allowed())
				}
			}
		})
	}
}

func TestInvalidBindingsIgnored(t *testing.T) {
	a := New([]Binding{
		{ResourceType: ResourceAny, ResourceName: "*", PatternType: PatternLiteral, Principal: "User:*", Host: "*", Operation: OpAll, Permission: PermissionAllow},
		{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternMatch, Principal: "User:*", Host: "*", Operation: OpAll, Permission: PermissionAllow},
		{ResourceType: ResourceTopic, ResourceName: "", PatternType: PatternPrefixed, Principal: "User:*", Host: "*", Operation: OpAll, Permission: PermissionAllow},
	}, Options{})
	require.Equal(t, DeniedNoMatch, a.Authorize("User:a", "h", OpRead, ResourceTopic, "t"))
}

func TestAuthorizedOperations(t *testing.T) {
	a := New([]Binding{
		allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpRead),
		allow(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpAlterConfigs),
		deny(ResourceTopic, "t", PatternLiteral, "User:a", "*", OpDescribe),
	}, Options{SuperUsers: []string{"User:root"}})
	got := a.AuthorizedOperations("User:a", "h", ResourceTopic, "t")
	require.Equal(t, int32(1<<OpRead|1<<OpAlterConfigs|1<<OpDescribeConfigs), got)
	var all int32
	for _, op := range SupportedOperations(ResourceCluster) {
		all |= 1 << op
	}
	require.Equal(t, all, a.AuthorizedOperations("User:root", "h", ResourceCluster, ClusterName))
	require.Zero(t, a.AuthorizedOperations("User:b", "h", ResourceTopic, "t"))
}

// TestAuthorizeByResourceType follows Kafka's AuthorizerTest cases for
// authorizeByResourceType.
func TestAuthorizeByResourceType(t *testing.T) {
	const u, h = "User:u", "1.2.3.4"
	tests := []struct {
		name     string
		bindings []Binding
		opts     Options
		want     bool
	}{
		{"no ACLs", nil, Options{}, false},
		{"no ACLs, allow everyone", nil, Options{AllowEveryoneIfNoACL: true}, true},
		{"super user", []Binding{deny(ResourceTopic, "*", PatternLiteral, u, "*", OpAll)}, Options{SuperUsers: []string{u}}, true},
		{"literal allow", []Binding{allow(ResourceTopic, "t", PatternLiteral, u, "*", OpWrite)}, Options{}, true},
		{"ALL allow", []Binding{allow(ResourceTopic, "t", PatternLiteral, u, "*", OpAll)}, Options{}, true},
		{"other op", []Binding{allow(ResourceTopic, "t", PatternLiteral, u, "*", OpRead)}, Options{}, false},
		{"other host", []Binding{allow(ResourceTopic, "t", PatternLiteral, u, "9.9.9.9", OpWrite)}, Options{}, false},
		{"wildcard principal", []Binding{allow(ResourceTopic, "t", PatternLiteral, "User:*", h, OpWrite)}, Options{}, true},
		{"literal denied by literal", []Binding{
			allow(ResourceTopic, "t", PatternLiteral, u, "*", OpWrite),
			deny(ResourceTopic, "t", PatternLiteral, u, "*", OpWrite)}, Options{}, false},
		{"literal denied by prefix", []Binding{
			allow(ResourceTopic, "abc", PatternLiteral, u, "*", OpWrite),
			deny(ResourceTopic, "ab", PatternPrefixed, u, "*", OpWrite)}, Options{}, false},
		{"prefix not denied by longer prefix", []Binding{
			allow(ResourceTopic, "ab", PatternPrefixed, u, "*", OpWrite),
			deny(ResourceTopic, "abc", PatternPrefixed, u, "*", OpWrite)}, Options{}, true},
		{"wildcard deny", []Binding{
			allow(ResourceTopic, "t", PatternLiteral, u, "*", OpWrite),
			deny(ResourceTopic, "*", PatternLiteral, u, "*", OpWrite)}, Options{}, false},
		{"wildcard allow", []Binding{
			allow(ResourceTopic, "*", PatternLiteral, u, "*", OpWrite),
			deny(ResourceTopic, "t", PatternLiteral, u, "*", OpWrite)}, Options{}, true},
		{"other type", []Binding{allow(ResourceGroup, "t", PatternLiteral, u, "*", OpWrite)}, Options{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, New(tt.bindings, tt.opts).AuthorizeByResourceType(u, h, OpWrite, ResourceTopic))
		})
	}
}

// refAuthorize is Kafka's StandardAuthorizer decision written the plain
// way, scanning every binding, to check the index against.
func refAuthorize(bs []Binding, opts Options, principal, host string, op Operation, rt ResourceType, name string) bool {
	for _, su := range opts.SuperUsers {
		if su == principal {
			return true
		}
	}
	found, allowed := false, false
	for _, b := range bs {
		if !usable(b) || b.ResourceType != rt {
			continue
		}
		switch {
		case b.PatternType == PatternLiteral && (b.ResourceName == name || b.ResourceName == WildcardResource):
		case b.PatternType == PatternPrefixed && strings.HasPrefix(name, b.ResourceName):
		default:
			continue
		}
		found = true
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			continue
		}
		if b.Host != WildcardHost && b.Host != host {
			continue
		}
		if b.Operation != OpAll {
			if b.Permission == PermissionAllow {
				switch op {
				case OpDescribe:
					if b.Operation != OpDescribe && b.Operation != OpRead && b.Operation != OpWrite && b.Operation != OpDelete && b.Operation != OpAlter {
						continue
					}
				case OpDescribeConfigs:
					if b.Operation != OpDescribeConfigs && b.Operation != OpAlterConfigs {
						continue
					}
				default:
					if b.Operation != op {
						continue
					}
				}
			} else if b.Operation != op {
				continue
			}
		}
		if b.Permission == PermissionDeny {
			return false
		}
		allowed = true
	}
	return allowed || (!found && opts.AllowEveryoneIfNoACL)
}

// TestAuthorizeAgainstReference compares the index with the plain scan on
// random bindings and checks over a small alphabet (so names, prefixes,
// principals and hosts collide often).
func TestAuthorizeAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		bs := randomBindings(r, 1+r.IntN(40))
		opts := Options{AllowEveryoneIfNoACL: r.IntN(2) == 0}
		if r.IntN(4) == 0 {
			opts.SuperUsers = []string{"User:a"}
		}
		a := New(bs, opts)
		for i := 0; i < 200; i++ {
			p, h, op, rt, name := randomCheck(r)
			require.Equal(t, refAuthorize(bs, opts, p, h, op, rt, name), a.Authorize(p, h, op, rt, name).Allowed(),
				"bindings %+v opts %+v check %s %s %v %v %q", bs, opts, p, h, op, rt, name)
		}
	}
}

var (
	names      = []string{"a", "ab", "abc", "b", "ba", "*", "abd", ""}
	principals = []string{"User:a", "User:b", "User:*", "Group:a"}
	hosts      = []string{"*", "1.1.1.1", "2.2.2.2"}
)

func randomBindings(r *rand.Rand, n int) []Binding {
	bs := make([]Binding, n)
	for i := range bs {
		bs[i] = Binding{
			ResourceType: ResourceType(2 + r.IntN(3)),
			ResourceName: names[r.IntN(len(names))],
			PatternType:  PatternType(3 + r.IntN(2)),
			Principal:    principals[r.IntN(len(principals))],
			Host:         hosts[r.IntN(len(hosts))],
			Operation:    Operation(2 + r.IntN(13)),
			Permission:   Permission(2 + r.IntN(2)),
		}
		if bs[i].ResourceType == ResourceCluster {
			bs[i].ResourceName, bs[i].PatternType = ClusterName, PatternLiteral
		}
	}
	return bs
}

func randomCheck(r *rand.Rand) (string, string, Operation, ResourceType, string) {
	rt := ResourceType(2 + r.IntN(3))
	name := names[r.IntN(len(names)-1)] + names[r.IntN(len(names)-1)]
	if rt == ResourceCluster {
		name = ClusterName
	}
	return principals[r.IntN(len(principals)-2)], hosts[1+r.IntN(2)], Operation(2 + r.IntN(13)), rt, name
}

// FuzzAuthorize builds authorizers from arbitrary bindings and checks:
// never a panic, and always the reference's answer.
func FuzzAuthorize(f *testing.F) {
	f.Add([]byte{2, 0, 3, 0, 0, 3, 3}, "ab", "User:a", "1.1.1.1", byte(3), byte(2))
	f.Add([]byte{2, 5, 4, 2, 1, 2, 2, 3, 2, 3, 1, 0, 2, 3}, "*", "User:*", "*", byte(8), byte(3))
	f.Fuzz(func(t *testing.T, raw []byte, name, principal, host string, op, rt byte) {
		var bs []Binding
		for i := 0; i+6 < len(raw) && len(bs) < 64; i += 7 {
			bs = append(bs, Binding{
				ResourceType: ResourceType(raw[i] % 9),
				ResourceName: names[int(raw[i+1])%len(names)],
				PatternType:  PatternType(raw[i+2] % 6),
				Principal:    principals[int(raw[i+3])%len(principals)],
				Host:         hosts[int(raw[i+4])%len(hosts)],
				Operation:    Operation(raw[i+5] % 16),
				Permission:   Permission(raw[i+6] % 5),
			})
		}
		opts := Options{AllowEveryoneIfNoACL: len(raw)%2 == 0}
		a := New(bs, opts)
		o, r := Operation(op%17), ResourceType(rt%10)
		got := a.Authorize(principal, host, o, r, name)
		if o > OpAny && o <= OpDescribeTokens && r >= ResourceTopic && r <= ResourceUser {
			require.Equal(t, refAuthorize(bs, opts, principal, host, o, r, name), got.Allowed())
		} else {
			require.False(t, got.Allowed())
		}
		_ = a.AuthorizeByResourceType(principal, host, o, r)
		_ = a.AuthorizedOperations(principal, host, r, name)
	})
}

// BenchmarkAuthorize checks against 10,000 bindings: literal, prefixed
// and wildcard, for 1,000 principals, with hosts.
func BenchmarkAuthorize(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	var bs []Binding
	for i := 0; len(bs) < 10000; i++ {
		user := fmt.Sprintf("User:user-%d", i%1000)
		host := "*"
		if i%10 == 0 {
			host = fmt.Sprintf("10.0.%d.%d", i%256, i%7)
		}
		switch i % 5 {
		case 0, 1:
			bs = append(bs, allow(ResourceTopic, fmt.Sprintf("team-%d.topic-%d", i%100, i), PatternLiteral, user, host, OpRead))
		case 2:
			bs = append(bs, allow(ResourceTopic, fmt.Sprintf("team-%d.app-%d.", i%100, i%37), PatternPrefixed, user, host, OpWrite))
		case 3:
			bs = append(bs, allow(ResourceGroup, fmt.Sprintf("team-%d-", i%100), PatternPrefixed, user, host, OpRead))
		case 4:
			if i%50 == 4 {
				bs = append(bs, allow(ResourceTopic, "*", PatternLiteral, user, host, OpDescribe))
			} else {
				bs = append(bs, deny(ResourceTopic, fmt.Sprintf("team-%d.secret", i%100), PatternPrefixed, user, host, OpRead))
			}
		}
	}
	a := New(bs, Options{SuperUsers: []string{"User:admin"}})
	type chk struct {
		p, name string
		op      Operation
		rt      ResourceType
	}
	checks := make([]chk, 1024)
	for i := range checks {
		u := r.IntN(1000)
		switch i % 4 {
		case 0:
			checks[i] = chk{fmt.Sprintf("User:user-%d", u), fmt.Sprintf("team-%d.topic-%d", u%100, u), OpRead, ResourceTopic}
		case 1:
			checks[i] = chk{fmt.Sprintf("User:user-%d", u), fmt.Sprintf("team-%d.app-%d.orders-%d", u%100, u%37, i), OpWrite, ResourceTopic}
		case 2:
			checks[i] = chk{fmt.Sprintf("User:user-%d", u), fmt.Sprintf("team-%d-consumers", u%100), OpRead, ResourceGroup}
		case 3:
			checks[i] = chk{fmt.Sprintf("User:user-%d", u), fmt.Sprintf("team-%d.secret.keys", u%100), OpRead, ResourceTopic}
		}
	}
	allowed := 0
	for _, c := range checks {
		if a.Authorize(c.p, "10.0.0.1", c.op, c.rt, c.name).Allowed() {
			allowed++
		}
	}
	if allowed == 0 || allowed == len(checks) {
		b.Fatalf("%d of %d checks allowed: the benchmark should see both answers", allowed, len(checks))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := checks[i%len(checks)]
		a.Authorize(c.p, "10.0.0.1", c.op, c.rt, c.name)
	}
}
