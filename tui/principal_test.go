package tui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHeaderShowsPrincipal: the header says whom the dashboard is
// connected as (what ACLs and quotas apply to), right after the address.
func TestHeaderShowsPrincipal(t *testing.T) {
	r := demoRunner(t, 120, 24)
	require.NotContains(t, r.screen(), " as ")
	r.m.opts.Principal = "User:alice"
	header := strings.SplitN(r.screen(), "\n", 2)[0]
	require.Contains(t, header, "127.0.0.1:9092  as User:alice")
}
