package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/moonmq/moonmq/node"
)

// authzFlags are the authorization settings of `moonmq serve` (issue 15),
// named as the contract says; Kafka's are super.users and
// allow.everyone.if.no.acl.found.
type authzFlags struct {
	superUsers    string
	allowEveryone bool
}

func addAuthzFlags(fs *flag.FlagSet) *authzFlags {
	a := &authzFlags{}
	fs.StringVar(&a.superUsers, "superusers", "",
		"comma-separated principals allowed everything whatever the ACLs say, e.g. User:admin (Kafka's super.users)")
	fs.BoolVar(&a.allowEveryone, "allow-everyone-if-no-acl-found", false,
		"allow operations on resources no ACL names (Kafka's allow.everyone.if.no.acl.found); off, they are denied")
	return a
}

// principals parses --superusers: Type:Name principals, separated by
// commas (Kafka separates super.users with semicolons; both are taken).
func (a *authzFlags) principals() ([]string, error) {
	var out []string
	for _, p := range strings.FieldsFunc(a.superUsers, func(r rune) bool { return r == ',' || r == ';' }) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return nil, fmt.Errorf("superusers %q: want principals such as User:admin (Type:Name), separated by commas", p)
		}
		out = append(out, p)
	}
	return out, nil
}

// config is the node's authorization configuration. authenticates says
// whether the listener authenticates its clients (SASL_*, or SSL with
// client certificates): ACLs are enforced exactly then, since on a
// PLAINTEXT listener everyone is User:ANONYMOUS.
func (a *authzFlags) config(authenticates bool) node.AuthzConfig {
	supers, _ := a.principals() // validate refuses bad ones before this is used
	return node.AuthzConfig{Enabled: authenticates, SuperUsers: supers, AllowEveryoneIfNoACL: a.allowEveryone}
}
