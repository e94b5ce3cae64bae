package kafka

// The tests of a whole broker are in package kafka_test: they start a real
// node in-process, and package node imports this one, so only an external
// test package may import node. What they watch of the running listener's
// internals is exported to them here, in test builds only.

import (
	"net"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Budget is a test's hold on one of a running server's memory budgets.
type Budget struct{ b *memBudget }

// RequestBudget is the budget of request frames (MaxQueuedRequestBytes).
func (s *Server) RequestBudget() Budget { return Budget{s.budget} }

// ResponseBudget is the budget of fetched data not yet written
// (MaxQueuedResponseBytes).
func (s *Server) ResponseBudget() Budget { return Budget{s.respBudget} }

func (b Budget) InUse() int64          { return b.b.inUse() }
func (b Budget) Force(n int64)         { b.b.force(n) }
func (b Budget) Release(n int64)       { b.b.release(n) }
func (b Budget) ReleaseQuiet(n int64)  { b.b.releaseQuiet(n) }
func (b Budget) TryUpTo(n int64) int64 { return b.b.tryUpTo(n) }

// FetchPasses counts partition-read passes of fetches, IdleChecks the
// read loops' wake-ups while waiting for a request, ParkedRequests the
// request continuations parked now.
func (s *Server) FetchPasses() int64    { return s.fetchPasses.Load() }
func (s *Server) IdleChecks() int64     { return s.idleChecks.Load() }
func (s *Server) ParkedRequests() int64 { return s.parkedN.Load() }

// EncodeRequest builds a request body (no size prefix) with its header.
func EncodeRequest(req kmsg.Request, corr int32) []byte { return encodeRequest(req, corr) }

const (
	FirstBodyChunk = firstBodyChunk
	StarvedRetry   = starvedRetry
)

// RequestErrors is moonmq_request_errors_total{api, error} of the server's
// metrics.
func (s *Server) RequestErrors(api, code string) (float64, error) {
	var m dto.Metric
	if err := s.opts.Metrics.requestErrors.WithLabelValues(api, code).Write(&m); err != nil {
		return 0, err
	}
	return m.GetCounter().GetValue(), nil
}

// QuotaThrottles is how many throttles moonmq_quota_throttle_seconds
// observed for a quota label (producer_byte_rate, consumer_byte_rate,
// request_percentage, connection_creation_rate).
func (s *Server) QuotaThrottles(label string) (uint64, error) {
	n, _, err := s.QuotaThrottleTime(label)
	return n, err
}

// QuotaThrottleTime is moonmq_quota_throttle_seconds' count and sum for a
// quota label.
func (s *Server) QuotaThrottleTime(label string) (uint64, time.Duration, error) {
	var m dto.Metric
	h, err := s.opts.Metrics.quotaThrottle.GetMetricWithLabelValues(label)
	if err != nil {
		return 0, 0, err
	}
	if err := h.(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
		return 0, 0, err
	}
	return m.GetHistogram().GetSampleCount(), time.Duration(m.GetHistogram().GetSampleSum() * float64(time.Second)), nil
}

// ConnectionRejects is moonmq_connection_rejects_total{reason}.
func (s *Server) ConnectionRejects(reason string) (float64, error) {
	var m dto.Metric
	if err := s.opts.Metrics.connRejects.WithLabelValues(reason).Write(&m); err != nil {
		return 0, err
	}
	return m.GetCounter().GetValue(), nil
}

// SetPrincipalOf makes f name the principal of every connection accepted
// from now on, in place of authentication, so tests can act as chosen
// principals without SASL or certificates.
func (s *Server) SetPrincipalOf(f func(net.Conn) string) { s.principalOf.Store(&f) }
