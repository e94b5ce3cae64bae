package httpapi

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadyzFollowsSetReady(t *testing.T) {
	s, err := Listen(Options{Addr: "127.0.0.1:0", Stats: func() *Stats { return &Stats{Version: "v-test"} }})
	require.NoError(t, err)
	go s.Serve()
	defer s.Close(context.Background())
	base := "http://" + s.Addr().String()

	code, _ := get(t, base+"/healthz")
	require.Equal(t, 200, code)
	code, body := get(t, base+"/readyz")
	require.Equal(t, 503, code)
	require.Contains(t, body, "not ready")
	s.SetReady(true)
	code, _ = get(t, base+"/readyz")
	require.Equal(t, 200, code)
	code, body = get(t, base+"/stats")
	require.Equal(t, 200, code)
	require.Contains(t, body, `"version": "v-test"`)
	code, _ = get(t, base+"/metrics")
	require.Equal(t, 200, code)
	code, _ = get(t, base+"/debug/pprof/")
	require.Equal(t, 404, code)
}

func TestPprofWhenEnabled(t *testing.T) {
	s, err := Listen(Options{Addr: "127.0.0.1:0", Pprof: true})
	require.NoError(t, err)
	go s.Serve()
	defer s.Close(context.Background())
	code, _ := get(t, "http://"+s.Addr().String()+"/debug/pprof/")
	require.Equal(t, 200, code)
}
