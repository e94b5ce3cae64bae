package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// The cluster port cuts off what it cannot read: an unknown protocol
// byte, a frame longer than the limit, a frame that is not JSON; and
// refuses an unknown operation with ErrInvalidRequest. None of it
// disturbs the controller.
func TestClusterPortRefusesBadInput(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.awaitReady()
	addr := tc.peers[0].Addr
	ctx := testCtx(t)

	closedAfter := func(t *testing.T, send []byte) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write(send)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.ReadAll(conn)
		// Closed by the server (a reset, if it left our bytes unread),
		// not timed out.
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "still open: %v", err)
	}
	t.Run("unknown protocol", func(t *testing.T) { closedAfter(t, []byte("GET / HTTP/1.1\r\n\r\n")) })
	t.Run("oversized frame", func(t *testing.T) {
		closedAfter(t, binary.BigEndian.AppendUint32([]byte{muxRPC}, maxRPCRequest+1))
	})
	t.Run("not json", func(t *testing.T) {
		closedAfter(t, append(binary.BigEndian.AppendUint32([]byte{muxRPC}, 3), "{{{"...))
	})
	t.Run("unknown operation", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := call(cctx, dialTCP, addr, "drop_everything", struct{}{}, nil)
		require.ErrorIs(t, err, metadata.ErrInvalidRequest)
	})

	c := tc.nodes[0]
	_, err := c.CreateTopic(ctx, "still-fine", 1, 1, nil, false)
	require.NoError(t, err)
}

// Sentinels survive the encoding, several at once.
func TestRPCErrorsKeepTheirSentinels(t *testing.T) {
	err := toRPCError(invalidConfig(fmt.Errorf("%w: bad", topicconfig.ErrInvalid))).toError()
	require.ErrorIs(t, err, metadata.ErrInvalidConfig)
	require.ErrorIs(t, err, topicconfig.ErrInvalid)
	require.NotErrorIs(t, err, metadata.ErrUnknownTopic)
	err = (&rpcError{Msg: "x", Codes: []string{"fenced_leader_epoch", "from_a_newer_release"}}).toError()
	require.ErrorIs(t, err, metadata.ErrFencedLeaderEpoch)
	require.Equal(t, "x", err.Error())
}
