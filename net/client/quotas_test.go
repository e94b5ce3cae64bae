package client

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuotas: set, list (all, filtered, the default entity), remove; and
// the refusals made before anything is sent.
func TestQuotas(t *testing.T) {
	requireKfake(t)
	cl := newTestClient(t)
	ctx := testCtx(t)
	alice := QuotaEntity{{Type: QuotaUser, Name: "alice"}}
	def := QuotaEntity{{Type: QuotaClientID, Default: true}}
	require.NoError(t, cl.SetQuotas(ctx, alice, map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}, nil))
	require.NoError(t, cl.SetQuotas(ctx, def, map[string]float64{"request_percentage": 12.5}, nil))

	all, err := cl.ListQuotas(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []Quota{
		{Entity: def, Key: "request_percentage", Value: 12.5},
		{Entity: alice, Key: "consumer_byte_rate", Value: 2048},
		{Entity: alice, Key: "producer_byte_rate", Value: 1024},
	}, all)
	only, err := cl.ListQuotas(ctx, def)
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, "client-id=<default>", only[0].Entity.String())

	require.NoError(t, cl.SetQuotas(ctx, alice, nil, []string{"consumer_byte_rate"}))
	after, err := cl.ListQuotas(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, []Quota{{Entity: alice, Key: "producer_byte_rate", Value: 1024}}, after)

	for _, tc := range []struct {
		e    QuotaEntity
		set  map[string]float64
		want string
	}{
		{nil, map[string]float64{"producer_byte_rate": 1}, "no quota entity"},
		{QuotaEntity{{Type: "group", Name: "g"}}, map[string]float64{"producer_byte_rate": 1}, `quota entity type "group"`},
		{QuotaEntity{{Type: QuotaUser, Name: "a"}, {Type: QuotaUser, Name: "b"}}, map[string]float64{"producer_byte_rate": 1}, "names user twice"},
		{QuotaEntity{{Type: QuotaUser, Name: "a"}, {Type: QuotaIP, Name: "1.2.3.4"}}, map[string]float64{"connection_creation_rate": 1}, "cannot be combined"},
		{QuotaEntity{{Type: QuotaUser}}, map[string]float64{"producer_byte_rate": 1}, "empty user name"},
		{alice, nil, "no quota to set or remove"},
		{alice, map[string]float64{"producer_byte_rate": -1}, "must be a positive number"},
		{alice, map[string]float64{"producer_byte_rate": math.NaN()}, "must be a positive number"},
	} {
		err := cl.SetQuotas(ctx, tc.e, tc.set, nil)
		require.ErrorIs(t, err, ErrInvalidArgument, tc.want)
		require.ErrorContains(t, err, tc.want)
	}
}
