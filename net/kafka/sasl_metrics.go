package kafka

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moonmq/moonmq/net/auth"
)

// addAuth creates the authentication metrics. The mechanism label takes
// only auth.Mechanisms' names (an exchange starts only with an enabled
// one), so it stays bounded; no label ever carries a user name.
func (m *Metrics) addAuth() {
	m.authSuccesses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moonmq_auth_successes_total", Help: "Successful SASL authentications, by mechanism.",
	}, []string{"mechanism"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "moonmq_auth_failures_total", Help: "Failed SASL authentications (wrong password, unknown user, malformed or refused exchange), by mechanism.",
	}, []string{"mechanism"})
	m.authLockouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moonmq_auth_lockouts_total", Help: "IP addresses locked out after --auth-lockout-failures failed authentications within --auth-lockout-window.",
	})
	m.authLockedRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "moonmq_auth_locked_out_refusals_total", Help: "SASL authentications refused because the client's IP was locked out.",
	})
	for _, mech := range auth.Mechanisms {
		m.authSuccesses.WithLabelValues(mech)
		m.authFailures.WithLabelValues(mech)
	}
}
