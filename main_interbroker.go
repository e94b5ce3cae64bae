package main

import (
	"encoding/base64"
	"flag"
	"fmt"
	"strings"

	"github.com/moonmq/moonmq/node"
)

// interBrokerFlags are how the nodes of a secured cluster trust each
// other beyond TLS: the user they log in to each other's SASL listeners as,
// and the key their gossip is encrypted with.
type interBrokerFlags struct {
	user      interBrokerUserFlag
	mechanism string
	gossipKey gossipKeyFlag
}

func addInterBrokerFlags(fs *flag.FlagSet) *interBrokerFlags {
	f := &interBrokerFlags{}
	fs.Var(&f.user, "inter-broker-user",
		"NAME:PASSWORD the nodes of a SASL_SSL cluster log in to each other's listeners as (the same on every node; created at start like a --bootstrap-user, and a super user)")
	fs.StringVar(&f.mechanism, "inter-broker-mechanism", "",
		"SASL mechanism of --inter-broker-user: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (default: SCRAM-SHA-512 when --sasl-mechanisms offers it, else SCRAM-SHA-256)")
	fs.Var(&f.gossipKey, "gossip-key",
		"base64 of 16, 24 or 32 random bytes (e.g. `openssl rand -base64 32`) that encrypt the cluster's gossip; the same on every node; required on an SSL or SASL_SSL cluster")
	return f
}

func (f *interBrokerFlags) apply(c *node.Config) {
	c.InterBroker = node.InterBrokerConfig{User: f.user.u.Name, Password: f.user.u.Password, Mechanism: strings.ToUpper(f.mechanism)}
	c.GossipKey = f.gossipKey.key
}

// interBrokerUserFlag is --inter-broker-user; its String hides the
// password (--help, --print-config).
type interBrokerUserFlag struct{ u node.BootstrapUser }

func (b *interBrokerUserFlag) String() string {
	if b == nil || b.u.Name == "" {
		return ""
	}
	return b.u.String()
}

func (b *interBrokerUserFlag) Set(v string) error {
	u, err := node.ParseBootstrapUser(v)
	if err != nil {
		return err
	}
	b.u = u
	return nil
}

// IsSecret tells --print-config not to print the value as a setting.
func (b *interBrokerUserFlag) IsSecret() bool { return true }

// gossipKeyFlag is --gossip-key, base64.
type gossipKeyFlag struct{ key []byte }

func (g *gossipKeyFlag) String() string {
	if g == nil || len(g.key) == 0 {
		return ""
	}
	return "<redacted>"
}

func (g *gossipKeyFlag) Set(v string) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not base64: %v", err)
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("%d bytes: want 16, 24 or 32 (openssl rand -base64 32)", n)
	}
	g.key = key
	return nil
}

// IsSecret tells --print-config not to print the value as a setting.
func (g *gossipKeyFlag) IsSecret() bool { return true }
