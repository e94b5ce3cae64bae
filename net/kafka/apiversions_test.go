package kafka_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/node"
)

func apiVersions(t *testing.T, rc *rawConn, version int16, edit func(*kmsg.ApiVersionsRequest)) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "moonmq-test", "1.0.0"
	if edit != nil {
		edit(req)
	}
	rc.send(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = min(version, req.MaxVersion())
	rc.recv(resp)
	return resp
}

// Every ApiVersions version clients send is served (franz-go and MoonMQ's
// own tools start at v4), with Kafka's checks; a newer one is negotiated
// down without counting as a request error.
func TestApiVersionsVersions(t *testing.T) {
	s := startServer(t, node.Config{})
	rc := dialRaw(t, s)
	for v := int16(0); v <= 5; v++ {
		resp := apiVersions(t, rc, v, nil)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		var served *kmsg.ApiVersionsResponseApiKey
		for i := range resp.ApiKeys {
			if resp.ApiKeys[i].ApiKey == kmsg.ApiVersions.Int16() {
				served = &resp.ApiKeys[i]
			}
		}
		require.NotNil(t, served, "v%d lists ApiVersions", v)
		require.EqualValues(t, 5, served.MaxVersion)
	}

	resp := apiVersions(t, rc, 4, func(r *kmsg.ApiVersionsRequest) { r.ClientSoftwareName = "bad name!" })
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "Kafka's software-name rule")

	// v5 (KIP-1242): the cluster and node the client means to reach.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	rc.send(md)
	mdResp := md.ResponseKind().(*kmsg.MetadataResponse)
	rc.recv(mdResp)
	require.NotNil(t, mdResp.ClusterID)
	us := *mdResp.ClusterID
	resp = apiVersions(t, rc, 5, func(r *kmsg.ApiVersionsRequest) { r.ClusterID, r.NodeID = &us, 1 })
	require.Zero(t, resp.ErrorCode)
	other := "another-cluster"
	resp = apiVersions(t, rc, 5, func(r *kmsg.ApiVersionsRequest) { r.ClusterID, r.NodeID = &other, 1 })
	require.Equal(t, kerr.RebootstrapRequired.Code, resp.ErrorCode)
	resp = apiVersions(t, rc, 5, func(r *kmsg.ApiVersionsRequest) { r.ClusterID, r.NodeID = &us, 7 })
	require.Equal(t, kerr.RebootstrapRequired.Code, resp.ErrorCode, "another node of this cluster")
	resp = apiVersions(t, rc, 5, func(r *kmsg.ApiVersionsRequest) { r.ClusterID, r.NodeID = &us, -1 })
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "both or neither")

	// A version past ours: the v0 answer with our range, which is
	// negotiation, not an error.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 6
	req.ClientSoftwareName, req.ClientSoftwareVersion = "moonmq-test", "1.0.0"
	rc.send(req)
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	rc.recv(resp)
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
	require.NotEmpty(t, resp.ApiKeys)
	require.Zero(t, requestErrors(t, s, "ApiVersions", "UNSUPPORTED_VERSION"), "negotiation is not an error")
	require.EqualValues(t, 2, requestErrors(t, s, "ApiVersions", "INVALID_REQUEST"), "real errors are counted")
}

func requestErrors(t *testing.T, s *server, api, code string) float64 {
	t.Helper()
	v, err := s.k.RequestErrors(api, code)
	require.NoError(t, err)
	return v
}
