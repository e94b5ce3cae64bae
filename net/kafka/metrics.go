package kafka

import (
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the Kafka front end's Prometheus metrics. Label values are
// bounded: API names come from the supported-API table, error names from
// kerr, topics from metadata (only topics that exist are counted).
type Metrics struct {
	requests        *prometheus.CounterVec   // api
	requestErrors   *prometheus.CounterVec   // api, error
	requestDuration *prometheus.HistogramVec // api
	bytesIn         *prometheus.CounterVec   // topic
	bytesOut        *prometheus.CounterVec   // topic
	recordsIn       *prometheus.CounterVec   // topic
	recordsOut      *prometheus.CounterVec   // topic
	connections     prometheus.Gauge
	connRejects     *prometheus.CounterVec   // reason
	quotaThrottle   *prometheus.HistogramVec // quota

	authSuccesses      *prometheus.CounterVec // mechanism
	authFailures       *prometheus.CounterVec // mechanism
	authLockouts       prometheus.Counter
	authLockedRefusals prometheus.Counter
	tls                *tlsMetrics // security.go
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, useful in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_requests_total", Help: "Kafka requests handled, by API.",
		}, []string{"api"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_request_errors_total", Help: "Error codes returned in Kafka responses, by API and error name (one per failing partition/resource).",
		}, []string{"api", "error"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "moonmq_request_duration_seconds", Help: "Time from reading a request to writing its response, by API (includes long-poll and fsync waits).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs .. ~13s
		}, []string{"api"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_topic_bytes_in_total", Help: "Record batch bytes appended, by topic.",
		}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_topic_bytes_out_total", Help: "Record batch bytes returned by Fetch, by topic.",
		}, []string{"topic"}),
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_topic_records_in_total", Help: "Records appended, by topic.",
		}, []string{"topic"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_topic_records_out_total", Help: "Records returned by Fetch, by topic (whole batches).",
		}, []string{"topic"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "moonmq_connections", Help: "Open Kafka client connections.",
		}),
		connRejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "moonmq_connection_rejects_total", Help: "Connections refused or not accepted, by reason (max_connections, max_connections_per_ip, connection_creation_rate, out_of_file_descriptors, accept_error).",
		}, []string{"reason"}),
		quotaThrottle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "moonmq_quota_throttle_seconds", Help: "Throttle times applied to clients over a quota, by quota (producer_byte_rate, consumer_byte_rate, request_percentage: the connection is muted that long; connection_creation_rate: a refused connection's delayed close, or the acceptor's pause).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms .. ~33s
		}, []string{"quota"}),
		tls: newTLSMetrics(),
	}
	for _, q := range []string{quotaLabelProduce, quotaLabelFetch, quotaLabelRequest, quotaLabelConnection} {
		m.quotaThrottle.WithLabelValues(q)
	}
	m.addAuth()
	// Every reason exists from the start, at 0, so a rate() or an alert
	// on it has a series before the first rejection.
	for _, reason := range []string{rejectMaxConnections, rejectMaxConnectionsPerIP, rejectConnectionRate, rejectOutOfFDs, rejectAcceptError} {
		m.connRejects.WithLabelValues(reason)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.requestErrors, m.requestDuration, m.bytesIn, m.bytesOut,
			m.recordsIn, m.recordsOut, m.connections, m.connRejects, m.quotaThrottle,
			m.authSuccesses, m.authFailures, m.authLockouts, m.authLockedRefusals)
		reg.MustRegister(m.tls.collectors()...)
	}
	return m
}

// Reasons of moonmq_connection_rejects_total.
const (
	rejectMaxConnections      = "max_connections"
	rejectMaxConnectionsPerIP = "max_connections_per_ip"
	rejectConnectionRate      = "connection_creation_rate"
	rejectOutOfFDs            = "out_of_file_descriptors"
	rejectAcceptError         = "accept_error"
)

// observe records one answered request.
func (m *Metrics) observe(r *request, resp kmsg.Response) {
	api := apiName(r.key)
	m.requests.WithLabelValues(api).Inc()
	m.requestDuration.WithLabelValues(api).Observe(time.Since(r.received).Seconds())
	if resp == nil {
		return
	}
	if av, ok := resp.(*kmsg.ApiVersionsResponse); ok && av.ErrorCode == kerr.UnsupportedVersion.Code {
		// Version negotiation (KIP-511): a client asking for a newer
		// ApiVersions than we serve retries at ours. Not an error.
		return
	}
	forEachErrorCode(resp, func(code int16) {
		m.requestErrors.WithLabelValues(api, errorName(code)).Inc()
	})
}

// DeleteTopic drops a deleted topic's series so label sets stay bounded by
// the live topics.
func (m *Metrics) DeleteTopic(topic string) {
	for _, v := range []*prometheus.CounterVec{m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut} {
		v.DeleteLabelValues(topic)
	}
}

func apiName(key int16) string {
	if _, ok := apis[key]; ok {
		return kmsg.NameForKey(key)
	}
	return "Unsupported"
}

func errorName(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return "UNKNOWN_CODE_" + strconv.Itoa(int(code))
}

// errorCodeFields caches, per response struct type, the paths to its
// ErrorCode fields, so walking a response costs no reflection lookups by
// name on the hot path.
var errorCodeFields sync.Map // reflect.Type -> *codeWalker

type codeWalker struct {
	codes  []int // indexes of int16 ErrorCode fields in this struct
	nested []int // indexes of struct or slice-of-struct fields
}

// forEachErrorCode calls fn for every non-zero ErrorCode anywhere in a
// response (top level, per topic, per partition ...).
func forEachErrorCode(resp kmsg.Response, fn func(int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	walkCodes(v, fn)
}

func walkCodes(v reflect.Value, fn func(int16)) {
	w := walkerFor(v.Type())
	for _, i := range w.codes {
		if c := int16(v.Field(i).Int()); c != 0 {
			fn(c)
		}
	}
	for _, i := range w.nested {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			walkCodes(f, fn)
		case reflect.Slice:
			for j := 0; j < f.Len(); j++ {
				walkCodes(f.Index(j), fn)
			}
		}
	}
}

func walkerFor(t reflect.Type) *codeWalker {
	if w, ok := errorCodeFields.Load(t); ok {
		return w.(*codeWalker)
	}
	w := &codeWalker{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch {
		case f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16:
			w.codes = append(w.codes, i)
		case f.Type.Kind() == reflect.Struct:
			w.nested = append(w.nested, i)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			w.nested = append(w.nested, i)
		}
	}
	errorCodeFields.Store(t, w)
	return w
}
