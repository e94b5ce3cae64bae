package quota

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// quotas is a test's set of client quotas, synced into a Manager under a
// new version on every change (as the controller's metadata would be).
type quotas struct {
	t       *testing.T
	m       *Manager
	version uint64
	set     map[string]Entry // by describe(entity)
}

func newQuotas(t *testing.T, o Options) *quotas {
	q := &quotas{t: t, m: New(o), set: map[string]Entry{}}
	q.sync()
	return q
}

func (q *quotas) sync() {
	q.version++
	entries := make([]Entry, 0, len(q.set))
	keys := make([]string, 0, len(q.set))
	for k := range q.set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		entries = append(entries, q.set[k])
	}
	require.NoError(q.t, q.m.Sync(q.version, func() []Entry { return entries }))
}

// def is the <default> name.
const def = "\x00default"

// entity builds user/client-id parts: "" leaves the part out, def is the
// default.
func entity(user, client string) []Part {
	var parts []Part
	add := func(typ, name string) {
		switch name {
		case "":
		case def:
			parts = append(parts, Part{Type: typ})
		default:
			parts = append(parts, Part{Type: typ, Name: &name})
		}
	}
	add(EntityUser, user)
	add(EntityClientID, client)
	return parts
}

// put sets (v >= 0) or removes (v < 0) key of an entity.
func (q *quotas) put(parts []Part, key string, v float64) {
	id := describe(parts)
	e, ok := q.set[id]
	if !ok {
		e = Entry{Entity: parts, Values: map[string]float64{}}
	}
	if v < 0 {
		delete(e.Values, key)
	} else {
		e.Values[key] = v
	}
	if len(e.Values) == 0 {
		delete(q.set, id)
	} else {
		q.set[id] = e
	}
	q.sync()
}

// TestQuotaViolation is Kafka's ClientQuotaManagerTest.testQuotaViolation:
// the same records at the same times give the same throttle time.
func TestQuotaViolation(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("", def), ProducerByteRate, 500)
	now := t0
	for range 10 {
		require.Zero(t, q.m.Record(Produce, "ANONYMOUS", "unknown", 400, now))
		now = now.Add(time.Second)
	}
	// 400*10 + 2000 + 300 = 6300 over 10.5 s = 600 B/s;
	// (600-500)/500 * 10.5 s = 2100 ms.
	now = now.Add(500 * time.Millisecond)
	require.Equal(t, 2100*time.Millisecond, q.m.Record(Produce, "ANONYMOUS", "unknown", 2300, now))
	now = now.Add(2100 * time.Millisecond)
	// Delays continue until the burst's sample rolls out of the span.
	for range 10 {
		q.m.Record(Produce, "ANONYMOUS", "unknown", 400, now)
		now = now.Add(time.Second)
	}
	require.Zero(t, q.m.Record(Produce, "ANONYMOUS", "unknown", 0, now))
}

// TestFirstBurstIsMeasuredOverTheWholeSpan: a new client's rate spans
// samples-1 windows at least, so a burst of up to quota*10 is free and one
// byte more is throttled by exactly the formula.
func TestFirstBurstIsMeasuredOverTheWholeSpan(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("", "c"), ProducerByteRate, 100)
	require.Zero(t, q.m.Record(Produce, "u", "c", 1000, t0))
	// 1001 B over 10 s = 100.1 B/s: (100.1-100)/100 * 10 s = 10 ms.
	require.Equal(t, 10*time.Millisecond, q.m.Record(Produce, "u", "c", 1, t0))
	max, ok := q.m.MaxValueInWindow(Produce, "u", "c")
	require.True(t, ok)
	require.Equal(t, 1000.0, max)
	// Another client id has no quota.
	require.Zero(t, q.m.Record(Produce, "u", "other", 1e9, t0))
	_, ok = q.m.MaxValueInWindow(Produce, "u", "other")
	require.False(t, ok)
}

func TestThrottleTimeFormula(t *testing.T) {
	require.Zero(t, ThrottleTime(100, 100, 10*time.Second))
	require.Equal(t, 10*time.Second, ThrottleTime(200, 100, 10*time.Second))
	require.Equal(t, 1500*time.Millisecond, ThrottleTime(150, 100, 3*time.Second))
	require.Equal(t, maxThrottle, ThrottleTime(1, 0, time.Second), "a zero quota refuses everything")
	require.Equal(t, maxThrottle, ThrottleTime(1e12, 1, time.Hour), "capped at what throttle_time_ms can carry")
	require.Zero(t, ThrottleTime(math.NaN(), 1, time.Second))
	require.Equal(t, maxThrottle, ThrottleTime(math.Inf(1), 1, time.Second))
}

// TestQuotaConfigPrecedence is Kafka's
// ClientQuotaManagerTest.testQuotaConfigPrecedence, step by step.
func TestQuotaConfigPrecedence(t *testing.T) {
	q := newQuotas(t, Options{})
	k := ProducerByteRate
	q.put(entity(def, ""), k, 1000)
	q.put(entity("", def), k, 2000)
	q.put(entity(def, def), k, 3000)
	q.put(entity("userA", ""), k, 4000)
	q.put(entity("userA", "client1"), k, 5000)
	q.put(entity("userB", ""), k, 6000)
	q.put(entity("userB", "client1"), k, 7000)
	q.put(entity("userB", def), k, 8000)
	q.put(entity("userC", ""), k, 10000)
	q.put(entity("", "client1"), k, 9000)

	check := func(user, client string, bound, value float64, throttle bool) {
		t.Helper()
		limit, ok := q.m.Limit(Produce, user, client)
		require.True(t, ok)
		require.Equal(t, bound, limit, "%s/%s", user, client)
		max, _ := q.m.MaxValueInWindow(Produce, user, client)
		require.Equal(t, bound*10, max)
		d := q.m.Record(Produce, user, client, value*11, t0)
		if throttle {
			require.Positive(t, d, "%s/%s should be throttled", user, client)
		} else {
			require.Zero(t, d, "%s/%s should not be throttled", user, client)
		}
	}
	check("userA", "client1", 5000, 4500, false) // <user, client> over <user>
	check("userA", "client2", 4000, 4500, true)  // <user> over <client> and defaults
	check("userA", "client3", 4000, 0, true)     // <user> shared by the user's clients
	check("userA", "client1", 5000, 0, false)    // <user, client> is its own
	check("userB", "client1", 7000, 8000, true)
	check("userB", "client2", 8000, 7000, false) // <user, default client>: one rate per client
	check("userB", "client3", 8000, 7000, false)
	check("userD", "client1", 3000, 3500, true) // <default user, default client>
	check("userD", "client2", 3000, 2500, false)
	check("userE", "client1", 3000, 2500, false)

	q.put(entity(def, def), k, -1)            // back to the <user> default
	check("userD", "client1", 1000, 0, false) // other tags: a new rate
	check("userE", "client4", 1000, 1500, true)
	check("userF", "client4", 1000, 800, false) // <default user> shared by the user's clients
	check("userF", "client5", 1000, 800, true)

	q.put(entity(def, ""), k, -1)             // back to the <client-id> default
	check("userF", "client4", 2000, 0, false) // <default client>: shared by the client id's users
	check("userF", "client5", 2000, 0, false)
	check("userF", "client5", 2000, 2500, true)
	check("userG", "client5", 2000, 0, true)

	q.put(entity("userA", ""), k, 8000)
	q.put(entity("userA", "client1"), k, 10000)
	check("userA", "client2", 8000, 0, false)
	check("userA", "client2", 8000, 4500, true) // the new limit on the rate so far
	check("userA", "client1", 10000, 0, false)
	check("userA", "client1", 10000, 6000, true)
	q.put(entity("userA", "client1"), k, -1)
	check("userA", "client6", 8000, 0, true) // the shared user rate
	q.put(entity("userA", "client6"), k, 11000)
	check("userA", "client6", 11000, 8500, false)
	q.put(entity("userA", def), k, 12000)
	q.put(entity("userA", "client6"), k, -1)
	check("userA", "client6", 12000, 4000, true) // same tags as <userA, client6>: its rate
}

// TestQuotaKeysResolveIndependently: a user's producer quota does not
// hide a client id's consumer quota; each key has its own precedence.
func TestQuotaKeysResolveIndependently(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("alice", ""), ProducerByteRate, 10)
	q.put(entity("", "app"), ConsumerByteRate, 20)
	q.put(entity(def, ""), RequestPercentage, 50)
	l, ok := q.m.Limit(Produce, "alice", "app")
	require.True(t, ok)
	require.Equal(t, 10.0, l)
	l, ok = q.m.Limit(Fetch, "alice", "app")
	require.True(t, ok)
	require.Equal(t, 20.0, l)
	_, ok = q.m.Limit(Produce, "bob", "app")
	require.False(t, ok)
	require.True(t, q.m.Enabled(Request))
	// Request throttles are capped at one window.
	require.Equal(t, time.Second, q.m.Record(Request, "bob", "x", 1e6, t0))
	// Byte-rate throttles are not.
	require.Greater(t, q.m.Record(Produce, "alice", "x", 1e6, t0), time.Hour)
}

// TestEmptyTagsHaveNoQuota: as in Kafka, a client-level quota does not
// apply to a client with an empty client id (its rate would have no tags).
func TestEmptyTagsHaveNoQuota(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("", def), ProducerByteRate, 1)
	_, ok := q.m.Limit(Produce, "u", "")
	require.False(t, ok)
	_, ok = q.m.Limit(Produce, "u", "c")
	require.True(t, ok)
}

// TestUnrecord: a throttled fetch's bytes come back out of the rate.
func TestUnrecord(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("", "c"), ConsumerByteRate, 100)
	require.Positive(t, q.m.Record(Fetch, "u", "c", 2000, t0))
	q.m.Unrecord(Fetch, "u", "c", 2000, t0)
	require.Zero(t, q.m.Record(Fetch, "u", "c", 1000, t0))
}

func TestSyncRebuildsOnlyOnNewVersion(t *testing.T) {
	m := New(Options{})
	loads := 0
	load := func() []Entry { loads++; return nil }
	require.NoError(t, m.Sync(0, load))
	require.NoError(t, m.Sync(0, load))
	require.Equal(t, 1, loads)
	require.NoError(t, m.Sync(7, load))
	require.NoError(t, m.Sync(7, load))
	require.Equal(t, 2, loads)
	for k := range numKinds {
		require.False(t, m.Enabled(k))
	}
	require.False(t, m.IPQuotasEnabled())
	require.Zero(t, m.Record(Produce, "u", "c", 1e12, t0))
}

func TestBadEntitiesAreSkippedAndReported(t *testing.T) {
	m := New(Options{})
	ip, u := "10.0.0.1", "u"
	err := m.Sync(1, func() []Entry {
		return []Entry{
			{Entity: []Part{{Type: "group", Name: &u}}, Values: map[string]float64{ProducerByteRate: 1}},
			{Entity: []Part{{Type: EntityIP, Name: &ip}, {Type: EntityUser, Name: &u}}, Values: map[string]float64{ConnectionCreationRate: 1}},
			{Entity: []Part{{Type: EntityUser, Name: &u}, {Type: EntityUser}}, Values: map[string]float64{ProducerByteRate: 1}},
			{Entity: nil, Values: map[string]float64{ProducerByteRate: 1}},
			{Entity: []Part{{Type: EntityUser, Name: &u}}, Values: map[string]float64{ProducerByteRate: 5}},
		}
	})
	require.ErrorContains(t, err, `unknown entity type "group"`)
	require.ErrorContains(t, err, "ip combined with user")
	require.ErrorContains(t, err, "user given twice")
	require.ErrorContains(t, err, "empty entity")
	l, ok := m.Limit(Produce, "u", "c")
	require.True(t, ok, "the good entry is used")
	require.Equal(t, 5.0, l)
	require.False(t, m.IPQuotasEnabled())
}

// TestRatesExpireWhenIdle: a rate idle for the whole monitored span is
// dropped, and a client coming back is measured as new (which the span's
// purge would do anyway).
func TestRatesExpireWhenIdle(t *testing.T) {
	q := newQuotas(t, Options{})
	q.put(entity("", def), ProducerByteRate, 100)
	for i := range 100 {
		q.m.Record(Produce, "u", fmt.Sprint("client-", i), 10, t0)
	}
	require.Equal(t, 100, q.m.Rates())
	later := t0.Add(11 * time.Second)
	require.Zero(t, q.m.Record(Produce, "u", "client-0", 1000, later))
	require.Equal(t, 1, q.m.Rates())
}

// TestRatesAreBounded: beyond MaxSensors, new clients share one rate per
// quota, so a spray of client ids neither grows memory nor escapes the
// quota.
func TestRatesAreBounded(t *testing.T) {
	q := newQuotas(t, Options{MaxSensors: 10})
	q.put(entity("", def), ProducerByteRate, 100)
	for i := range 10 {
		require.Zero(t, q.m.Record(Produce, "u", fmt.Sprint("c", i), 900, t0))
	}
	require.Zero(t, q.m.Record(Produce, "u", "spray-1", 900, t0))
	require.Positive(t, q.m.Record(Produce, "u", "spray-2", 900, t0), "the overflow rate is shared")
	require.Equal(t, 11, q.m.Rates())
	require.Equal(t, int64(2), q.m.Overflowed())
}

func ipEntry(ip *string, rate float64) Entry {
	return Entry{Entity: []Part{{Type: EntityIP, Name: ip}}, Values: map[string]float64{ConnectionCreationRate: rate}}
}

// TestConnectionCreationRate follows ConnectionQuotas: each IP has its
// rate (its own quota, or the <default> IP's), a refused connection is not
// counted, and the delay is capped at one window.
func TestConnectionCreationRate(t *testing.T) {
	m := New(Options{})
	slow, fast := "10.0.0.1", "::ffff:10.0.0.2"
	require.NoError(t, m.Sync(1, func() []Entry {
		return []Entry{ipEntry(nil, 2), ipEntry(&slow, 1), ipEntry(&fast, 100)}
	}))
	require.True(t, m.IPQuotasEnabled())
	// 1 connection/s over a 10 s span: ten at once are fine, the eleventh
	// is refused, for (1.1-1)/1 * 10 s = 1 s (the cap).
	for range 10 {
		require.Zero(t, m.RecordConnection("10.0.0.1", t0))
	}
	require.Equal(t, time.Second, m.RecordConnection("10.0.0.1", t0))
	require.Equal(t, time.Second, m.RecordConnection("10.0.0.1", t0), "a refused connection was not counted")
	// An IP with no quota of its own has the default's: 20 in the span.
	for range 20 {
		require.Zero(t, m.RecordConnection("10.0.0.3", t0))
	}
	require.Positive(t, m.RecordConnection("10.0.0.3", t0))
	// The mapped spelling of the quota matches the connection's.
	for range 100 {
		require.Zero(t, m.RecordConnection("10.0.0.2", t0))
	}
	// The span is a budget: the ten connections count until their window
	// leaves it, 11 s later (Kafka's arithmetic, padding included).
	require.Positive(t, m.RecordConnection("10.0.0.1", t0.Add(2*time.Second)))
	require.Zero(t, m.RecordConnection("10.0.0.1", t0.Add(11*time.Second)))
}

func TestBrokerConnectionRate(t *testing.T) {
	m := New(Options{BrokerConnectionRate: 5})
	for range 50 {
		require.Zero(t, m.RecordBrokerConnection(t0))
	}
	d := m.RecordBrokerConnection(t0)
	require.Positive(t, d)
	require.LessOrEqual(t, d, time.Second)
	require.Zero(t, New(Options{}).RecordBrokerConnection(t0))
}

// TestRateWindows pins the sampled-window arithmetic: windows roll, idle
// samples are purged, and the span pads to samples-1 windows.
func TestRateWindows(t *testing.T) {
	p := params{windowMs: 1000, samples: 11}
	var r rate
	ms := t0.UnixMilli()
	r.record(p, 100, ms)
	require.Equal(t, int64(10000), r.windowSize(p, ms))
	require.InDelta(t, 10.0, r.measure(p, ms), 1e-9)
	for i := 1; i <= 20; i++ {
		r.record(p, 100, ms+int64(i)*1000)
	}
	require.LessOrEqual(t, len(r.samples), 12, "a ring of samples+1")
	now := ms + 20*1000
	// The ring holds the windows of 9..20 s; the one of 9 s saw its last
	// value 11 s ago and is purged: 11 x 100 over the 10 s since 10 s.
	require.InDelta(t, 110.0, r.measure(p, now), 1e-9)
	require.True(t, r.idle(p, now+11000))
	require.False(t, r.idle(p, now+10999))
	require.Zero(t, r.measure(p, now+11000))
}

// BenchmarkRecord is the cost per request of a client with a quota: the
// resolution (a client-id quota: the levels before it are skipped by the
// set mask) and the rate update under the manager's lock.
func BenchmarkRecord(b *testing.B) {
	m := New(Options{})
	c := "app"
	_ = m.Sync(1, func() []Entry {
		return []Entry{{Entity: []Part{{Type: EntityClientID, Name: &c}}, Values: map[string]float64{ProducerByteRate: 1e12}}}
	})
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
		}
		m.Record(Produce, "ANONYMOUS", c, 1000, now)
	}
}

// BenchmarkNoQuota is the cost when no quota of the kind exists.
func BenchmarkNoQuota(b *testing.B) {
	m := New(Options{})
	_ = m.Sync(1, func() []Entry { return nil })
	b.ReportAllocs()
	for b.Loop() {
		_ = m.Sync(1, nil)
		m.Record(Produce, "ANONYMOUS", "app", 1000, t0)
	}
}
