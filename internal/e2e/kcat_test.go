package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// TestKcat drives librdkafka: auto-created topic, keyed produce, consume
// to the end, metadata listing and offset query by time.
func TestKcat(t *testing.T) {
	b := testbroker.Start(t, "--auto-create-topics", "--default-partitions", "3")
	testbroker.Kcat(t, "k1:hello\nk2:world\nk3:again\n", "-b", b.Addr, "-P", "-t", "greetings", "-K:", "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all")
	out := testbroker.Kcat(t, "", "-b", b.Addr, "-C", "-t", "greetings", "-p", "0", "-o", "beginning", "-e", "-f", "%o %k=%s\n")
	require.Equal(t, "0 k1=hello\n1 k2=world\n2 k3=again\n", out)

	// Unpinned produce spreads over the partitions; consume everything.
	testbroker.Kcat(t, "a\nb\nc\nd\ne\nf\n", "-b", b.Addr, "-P", "-t", "greetings")
	out = testbroker.Kcat(t, "", "-b", b.Addr, "-C", "-t", "greetings", "-o", "beginning", "-e", "-f", "%s\n")
	require.Len(t, strings.Fields(out), 9)

	meta := testbroker.Kcat(t, "", "-b", b.Addr, "-L", "-t", "greetings")
	require.Contains(t, meta, `topic "greetings" with 3 partitions`)
	require.Contains(t, meta, b.Addr)

	ts := time.Now().Add(-time.Hour).UnixMilli()
	q := testbroker.Kcat(t, "", "-b", b.Addr, "-Q", "-t", "greetings:0:"+strconv.FormatInt(ts, 10))
	require.Contains(t, q, "offset 0")
}
