package main

import (
	"flag"
	"strings"
	"time"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/node"
)

// saslFlags are the SASL authentication settings of `moonmq serve`.
type saslFlags struct {
	mechanisms      mechanismsFlag
	bootstrapUsers  bootstrapUsersFlag
	allowPlain      bool
	lockoutFailures int
	lockoutWindow   time.Duration
	lockoutDuration time.Duration
}

func addSASLFlags(fs *flag.FlagSet) *saslFlags {
	s := &saslFlags{}
	fs.Var(&s.mechanisms, "sasl-mechanisms",
		"SASL mechanisms offered on a SASL_* listener, comma-separated: SCRAM-SHA-256, SCRAM-SHA-512, SCRAM-SHA-256-PLUS, SCRAM-SHA-512-PLUS, PLAIN, EXTERNAL (default SCRAM-SHA-256,SCRAM-SHA-512)")
	fs.Var(&s.bootstrapUsers, "bootstrap-user",
		"NAME:PASSWORD of a user to create with SCRAM-SHA-256 and SCRAM-SHA-512 credentials at start if it has none (repeatable; the password is never logged or printed)")
	fs.BoolVar(&s.allowPlain, "allow-plain-without-tls", false,
		"offer SASL PLAIN on SASL_PLAINTEXT, where passwords cross the network in clear (PLAIN is TLS-only otherwise)")
	fs.IntVar(&s.lockoutFailures, "auth-lockout-failures", auth.DefaultLockoutFailures,
		"failed authentications from one IP within --auth-lockout-window that lock it out (0 = no lockout)")
	fs.DurationVar(&s.lockoutWindow, "auth-lockout-window", auth.DefaultLockoutWindow,
		"span, as a Go duration with its unit (e.g. 1m, 90s; a bare number is not accepted), in which --auth-lockout-failures failures lock an IP out")
	fs.DurationVar(&s.lockoutDuration, "auth-lockout-duration", auth.DefaultLockoutDuration,
		"how long a locked-out IP's authentications are refused, as a Go duration with its unit (e.g. 5m, 1h; not milliseconds)")
	return s
}

// apply sets the node's SASL settings (--security-protocol, in
// main_tls.go, says whether the listener uses them).
func (s *saslFlags) apply(c *node.Config) {
	c.SASL.Mechanisms = s.mechanisms.list
	c.SASL.AllowPlainWithoutTLS = s.allowPlain
	c.SASL.Lockout = auth.LockoutOptions{Failures: s.lockoutFailures, Window: s.lockoutWindow, Duration: s.lockoutDuration}
	c.BootstrapUsers = s.bootstrapUsers.users
}

// mechanismsFlag is --sasl-mechanisms, checked as it is set so a bad name
// is reported with the flag.
type mechanismsFlag struct{ list []string }

func (m *mechanismsFlag) String() string { return strings.Join(m.list, ",") }

func (m *mechanismsFlag) Set(v string) error {
	list, err := auth.ParseMechanisms(v)
	if err != nil {
		return err
	}
	m.list = list
	return nil
}

// bootstrapUsersFlag is --bootstrap-user, repeatable. Its String hides the
// passwords: it is what --help and --print-config show.
type bootstrapUsersFlag struct{ users []node.BootstrapUser }

func (b *bootstrapUsersFlag) String() string {
	names := make([]string, len(b.users))
	for i, u := range b.users {
		names[i] = u.String()
	}
	return strings.Join(names, ",")
}

func (b *bootstrapUsersFlag) Set(v string) error {
	u, err := node.ParseBootstrapUser(v)
	if err != nil {
		return err
	}
	b.users = append(b.users, u)
	return nil
}

// IsSecret tells --print-config not to print the value as a setting.
func (b *bootstrapUsersFlag) IsSecret() bool { return true }
