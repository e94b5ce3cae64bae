package kafka

import dto "github.com/prometheus/client_model/go"

// AuthCounts are the server's authentication counters: failures (all
// mechanisms), lockouts, refusals of locked-out IPs, and successes.
func (s *Server) AuthCounts() (failures, lockouts, refusals, successes float64) {
	m := s.opts.Metrics
	var d dto.Metric
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "SCRAM-SHA-256-PLUS", "SCRAM-SHA-512-PLUS", "EXTERNAL"} {
		_ = m.authFailures.WithLabelValues(mech).Write(&d)
		failures += d.GetCounter().GetValue()
		_ = m.authSuccesses.WithLabelValues(mech).Write(&d)
		successes += d.GetCounter().GetValue()
	}
	_ = m.authLockouts.Write(&d)
	lockouts = d.GetCounter().GetValue()
	_ = m.authLockedRefusals.Write(&d)
	refusals = d.GetCounter().GetValue()
	return
}
