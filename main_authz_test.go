package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuthzFlags: --superusers and --allow-everyone-if-no-acl-found are
// settings like the others: flag, config-file key and MOONMQ_ variable.
func TestAuthzFlags(t *testing.T) {
	cfg, err := load(t, []string{"--superusers", "User:admin, User:ops;User:broker", "--allow-everyone-if-no-acl-found"}, nil)
	require.NoError(t, err)
	ac := cfg.nodeConfig(nil).Authz
	require.Equal(t, []string{"User:admin", "User:ops", "User:broker"}, ac.SuperUsers)
	require.True(t, ac.AllowEveryoneIfNoACL)
	require.False(t, ac.Enabled, "a PLAINTEXT listener does not authenticate: no ACLs")

	file := writeConfig(t, "superusers = \"User:fromfile\"\nallow_everyone_if_no_acl_found = true\n")
	cfg, err = load(t, []string{"--config", file}, []string{"MOONMQ_SUPERUSERS=User:fromenv"})
	require.NoError(t, err)
	ac = cfg.nodeConfig(nil).Authz
	require.Equal(t, []string{"User:fromfile"}, ac.SuperUsers, "the file beats the environment")
	require.True(t, ac.AllowEveryoneIfNoACL)

	cfg, err = load(t, nil, []string{"MOONMQ_SUPERUSERS=User:fromenv", "MOONMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND=false"})
	require.NoError(t, err)
	ac = cfg.nodeConfig(nil).Authz
	require.Equal(t, []string{"User:fromenv"}, ac.SuperUsers)
	require.False(t, ac.AllowEveryoneIfNoACL)

	cfg, err = load(t, nil, nil)
	require.NoError(t, err)
	require.Empty(t, cfg.nodeConfig(nil).Authz.SuperUsers)
	require.False(t, cfg.nodeConfig(nil).Authz.AllowEveryoneIfNoACL, "denied by default, as Kafka")

	for _, bad := range []string{"admin", "User:", ":admin", "User:a,bob"} {
		_, err := load(t, []string{"--superusers", bad}, nil)
		require.ErrorContains(t, err, "superusers", bad)
	}
	_, err = load(t, nil, []string{"MOONMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND=perhaps"})
	require.ErrorContains(t, err, "MOONMQ_ALLOW_EVERYONE_IF_NO_ACL_FOUND")
}

// FuzzSuperusers: --superusers never panics, and what it accepts are
// Type:Name principals without separators or blanks around them.
func FuzzSuperusers(f *testing.F) {
	for _, s := range []string{"User:admin", "User:a, User:b;Group:c", "", ",,", "admin", "User:", " : "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := (&authzFlags{superUsers: s}).principals()
		if err != nil {
			return
		}
		for _, p := range ps {
			typ, name, ok := strings.Cut(p, ":")
			require.True(t, ok && typ != "" && name != "", "%q from %q", p, s)
			require.NotContains(t, p, ",")
			require.NotContains(t, p, ";")
			require.Equal(t, strings.TrimSpace(p), p)
		}
	})
}
