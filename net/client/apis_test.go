package client

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestAPIKeyString(t *testing.T) {
	require.Equal(t, "AddPartitionsToTxn", APIAddPartitionsToTxn.String())
	require.Equal(t, "DescribeUserSCRAMCredentials", APIDescribeUserSCRAMCredentials.String())
	require.Equal(t, int16(24), int16(APIAddPartitionsToTxn), "protocol values")
	require.Equal(t, "Unknown(32000)", APIKey(32000).String())
}

func TestAPIVersions(t *testing.T) {
	cl := newTestClient(t)
	apis, err := cl.APIVersions(testCtx(t))
	require.NoError(t, err)
	require.True(t, apis.Supports(APIKey(3)), "every broker implements Metadata")
	require.True(t, apis.Supports(APIFindCoordinator))
	require.Positive(t, apis.Versions[APIKey(3)].Max)
	require.False(t, apis.Supports(APIKey(32000)))
}

// A broker that lacks an API is told apart from one that has it, and a
// subset of the protocol guesses no Kafka release.
func TestAPIVersionsMissingKeys(t *testing.T) {
	requireKfake(t)
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(APIAddPartitionsToTxn), -1)
	v.SetMaxKeyVersion(int16(APICreateACLs), -1)
	cl := newTestClient(t, kfake.MaxVersions(v))
	apis, err := cl.APIVersions(testCtx(t))
	require.NoError(t, err)
	require.False(t, apis.Supports(APIAddPartitionsToTxn))
	require.False(t, apis.Supports(APICreateACLs))
	require.True(t, apis.Supports(APIEndTxn))
	require.Empty(t, apis.KafkaVersion, "a subset is no Kafka release")
}

func TestTopicNamesAndEndOffsets(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	a, b := uniqueTopic(t, "names-a"), uniqueTopic(t, "names-b")
	require.NoError(t, cl.CreateTopic(ctx, a, 2, 1, nil))
	require.NoError(t, cl.CreateTopic(ctx, b, 1, 1, nil))
	_, err := cl.Produce(ctx, a, []Record{{Partition: 1, Value: []byte("x")}, {Partition: 1, Value: []byte("y")}})
	require.NoError(t, err)

	names, err := cl.TopicNames(ctx)
	require.NoError(t, err)
	require.Contains(t, names, a)
	require.Contains(t, names, b)
	require.IsNonDecreasing(t, names)

	missing := uniqueTopic(t, "missing")
	ends, err := cl.EndOffsets(ctx, a, b, missing)
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 0, 1: 2}, ends[a])
	require.Equal(t, map[int32]int64{0: 0}, ends[b])
	require.NotContains(t, ends, missing, "a missing topic is left out, not an error")

	none, err := cl.EndOffsets(ctx)
	require.NoError(t, err)
	require.Empty(t, none)

	cl.Close()
	_, err = cl.EndOffsets(ctx, a)
	require.ErrorIs(t, err, ErrClosed)
	_, err = cl.APIVersions(ctx)
	require.ErrorIs(t, err, ErrClosed)
}

func TestBrokerConfigs(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	info, err := cl.Cluster(ctx)
	require.NoError(t, err)
	cfgs, err := cl.BrokerConfigs(ctx, info.Brokers[0].ID)
	require.NoError(t, err)
	require.NotEmpty(t, cfgs)
	require.IsNonDecreasing(t, func() []string {
		names := make([]string, len(cfgs))
		for i, c := range cfgs {
			names[i] = c.Name
		}
		return names
	}())
}

// NewKgo applies the same option handling as Dial.
func TestNewKgo(t *testing.T) {
	_, err := NewKgo(Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = NewKgo(Options{Addr: "localhost"})
	require.ErrorIs(t, err, ErrInvalidArgument, "no port")

	cl := newTestClient(t)
	k, err := NewKgo(Options{Addr: " " + cl.Addr() + " ,"})
	require.NoError(t, err)
	defer k.Close()
	require.NoError(t, k.Ping(testCtx(t)))
}
