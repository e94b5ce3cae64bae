package kafka

import dto "github.com/prometheus/client_model/go"

// ConnPrincipals are the principals of the open TLS connections and of their
// verified client certificates, for the TLS tests.
func (s *Server) ConnPrincipals() (principals, certPrincipals []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if !c.tlsDone.Load() {
			continue // still handshaking
		}
		principals = append(principals, c.principal)
		certPrincipals = append(certPrincipals, c.certPrincipal)
	}
	return principals, certPrincipals
}

// TLSHandshakes is moonmq_tls_handshakes_total, TLSHandshakeFailures
// moonmq_tls_handshake_failures_total{reason}.
func (s *Server) TLSHandshakes() float64 {
	var m dto.Metric
	_ = s.metrics.tls.handshakes.Write(&m)
	return m.GetCounter().GetValue()
}

func (s *Server) TLSHandshakeFailures(reason string) float64 {
	var m dto.Metric
	_ = s.metrics.tls.failures.WithLabelValues(reason).Write(&m)
	return m.GetCounter().GetValue()
}
