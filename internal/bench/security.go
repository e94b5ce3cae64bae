package bench

import (
	"flag"
	"fmt"
	"os"

	"github.com/moonmq/moonmq/net/client"
)

// securityFlags adds the toolkit's security flags (--user, --password,
// --mechanism, --tls, --tls-ca, --tls-cert, --tls-key, --client-config;
// net/client.RegisterSecurityFlags) to a bench command.
func securityFlags(fs *flag.FlagSet) *client.SecurityFlags { return client.RegisterSecurityFlags(fs) }

// resolveSecurity turns the parsed security flags into the run's Security
// (and the address, when only the client config names it). The bench has
// no prompt: a user without a password is a usage error.
func resolveSecurity(cmd string, sf *client.SecurityFlags, addr *string, sec *client.Security) error {
	s, err := sf.Resolve(os.Getenv)
	if err != nil {
		return fmt.Errorf("bench %s: %w: %v", cmd, ErrUsage, err)
	}
	if client.NeedsPassword(s) {
		return fmt.Errorf("bench %s: %w: %v", cmd, ErrUsage, client.MissingPasswordError(s))
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("bench %s: %w: %v", cmd, ErrUsage, err)
	}
	if _, err := s.TLSConfig(); err != nil { // unreadable files are usage errors too
		return fmt.Errorf("bench %s: %w: %v", cmd, ErrUsage, err)
	}
	*addr = sf.Addr(*addr)
	*sec = s
	return nil
}
