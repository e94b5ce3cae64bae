// Package quota decides client quotas as Kafka's ClientQuotaManager,
// ClientRequestQuotaManager and ConnectionQuotas do: which quota applies
// to a (user, client-id) pair, how fast that client has been going over
// sampled windows, and how long its next requests must wait (the
// throttle time a response carries, KIP-219). It owns no socket and no
// clock: every call takes the time, so tests drive it deterministically;
// net/kafka records requests into it and mutes connections for the
// throttle times it returns.
//
// Resolution follows Kafka's precedence, per quota key (a user quota of
// producer_byte_rate does not hide a client-id quota of
// consumer_byte_rate):
//
//	/users/<u>/clients/<c>, /users/<u>/clients/<default>, /users/<u>,
//	/users/<default>/clients/<c>, /users/<default>/clients/<default>,
//	/users/<default>, /clients/<c>, /clients/<default>
//
// and the entity that matched decides who shares a rate: a user-level
// quota is shared by all the user's client ids, a client-id-level one by
// all users of that client id, a default quota is a separate rate per user
// (or client id), not one rate shared by everybody. IP quotas
// (connection_creation_rate) are per IP, with the <default> IP's value for
// IPs that have none.
//
// Invariants: rates are Kafka's (samples+1 windows of Window, default 11 of
// 1 s; a rate spans at least samples-1 windows); a rate idle for the whole
// monitored span is dropped (it measures what a new one would, so no
// decision changes), and at most MaxSensors rates are kept: beyond that,
// new clients share one overflow rate per quota (they are throttled
// together, never let through unmeasured). The quotas are rebuilt only
// when their version changes.
package quota

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is a client quota recorded per request.
type Kind uint8

const (
	// Produce is producer_byte_rate: bytes of produce requests per second.
	Produce Kind = iota
	// Fetch is consumer_byte_rate: bytes of fetch responses per second.
	Fetch
	// Request is request_percentage: time spent handling the client's
	// requests, as a percentage of one thread, per window.
	Request
	numKinds
)

// Quota keys (Kafka's names, as AlterClientQuotas sets them).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ConnectionCreationRate = "connection_creation_rate"
)

// Key is the quota key of k.
func (k Kind) Key() string {
	switch k {
	case Produce:
		return ProducerByteRate
	case Fetch:
		return ConsumerByteRate
	case Request:
		return RequestPercentage
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Entity types.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"
)

// Part is one component of a quota entity; Name nil is the type's default.
type Part struct {
	Type string
	Name *string
}

// Entry is the quota values of one entity.
type Entry struct {
	Entity []Part
	Values map[string]float64
}

// Options are the windows and bounds of a Manager.
type Options struct {
	// Window is one sample's span (Kafka's quota.window.size.seconds,
	// default 1 s) and Samples how many are kept (quota.window.num,
	// default 11).
	Window  time.Duration
	Samples int
	// MaxSensors bounds the per-client rates kept (default 65536).
	MaxSensors int
	// BrokerConnectionRate is the broker-wide connection creation rate
	// per second (Kafka's max.connection.creation.rate); 0 is unlimited.
	BrokerConnectionRate float64
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Window <= 0 {
		o.Window = time.Second
	}
	if o.Samples <= 0 {
		o.Samples = 11
	}
	if o.MaxSensors <= 0 {
		o.MaxSensors = 1 << 16
	}
}

// Manager holds the quotas and the clients' rates. It is safe for
// concurrent use.
type Manager struct {
	p               params
	window          time.Duration
	maxSensors      int
	brokerConnLimit float64
	synced          atomic.Uint64 // version+1 of the quotas built, 0 before the first
	on              [numKinds]atomic.Bool
	ipOn            atomic.Bool
	mu              sync.Mutex
	kinds           [numKinds]levels
	ipLimits        map[string]float64
	ipDefault       float64
	ipHasDefault    bool
	sensors         map[sensorKey]*sensor
	ipSensors       map[string]*sensor
	broker          sensor
	lastSweep       int64
	overflowed      int64 // records that went to an overflow rate (tests, metrics)
}

// New returns a Manager with no quotas.
func New(o Options) *Manager {
	o.EnsureDefaults()
	return &Manager{
		p:      params{windowMs: max(o.Window.Milliseconds(), 1), samples: o.Samples},
		window: o.Window, maxSensors: o.MaxSensors, brokerConnLimit: o.BrokerConnectionRate,
		sensors: make(map[sensorKey]*sensor), ipSensors: make(map[string]*sensor),
	}
}

// level is one of Kafka's eight places a client quota may be set, in
// precedence order.
type level uint8

const (
	lvUserClient       level = iota // /users/<u>/clients/<c>
	lvUserDefClient                 // /users/<u>/clients/<default>
	lvUser                          // /users/<u>
	lvDefUserClient                 // /users/<default>/clients/<c>
	lvDefUserDefClient              // /users/<default>/clients/<default>
	lvDefUser                       // /users/<default>
	lvClient                        // /clients/<c>
	lvDefClient                     // /clients/<default>
	numLevels
)

// levels is one quota key's values by entity.
type levels struct {
	set    uint16 // bit l: some entity of level l has this key
	values map[entityKey]float64
}

// entityKey names an entity of a level: the user and client id it names
// ("" where the level has a default or no such part).
type entityKey struct {
	lv           level
	user, client string
}

// sensorKey names a rate: the quota kind and the metric tags Kafka gives
// it (user "" for client-level quotas, client "" for user-level ones).
type sensorKey struct {
	kind         Kind
	user, client string
}

type sensor struct {
	r    rate
	last int64 // ms of the last record, for expiry
}

// Sync rebuilds the quotas from load() when version differs from the one
// built; the same version costs one atomic load. It returns what was
// wrong with entries that were skipped (an unknown entity type, ip with
// another part), nil when all were used or nothing was rebuilt.
func (m *Manager) Sync(version uint64, load func() []Entry) error {
	if m.synced.Load() == version+1 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.synced.Load() == version+1 {
		return nil
	}
	err := m.build(load())
	m.synced.Store(version + 1)
	return err
}

// build replaces the quotas. m.mu is held. The clients' rates are kept:
// a changed limit applies to the rate measured so far, as in Kafka.
func (m *Manager) build(entries []Entry) error {
	var kinds [numKinds]levels
	ipLimits := map[string]float64{}
	var ipDefault float64
	var ipHasDefault bool
	var errs []error
	for _, e := range entries {
		var user, client, ip *Part
		bad := ""
		for i := range e.Entity {
			p := &e.Entity[i]
			switch p.Type {
			case EntityUser:
				if user != nil {
					bad = "user given twice"
				}
				user = p
			case EntityClientID:
				if client != nil {
					bad = "client-id given twice"
				}
				client = p
			case EntityIP:
				if ip != nil {
					bad = "ip given twice"
				}
				ip = p
			default:
				bad = fmt.Sprintf("unknown entity type %q", p.Type)
			}
		}
		switch {
		case bad != "":
		case ip != nil && (user != nil || client != nil):
			bad = "ip combined with user or client-id"
		case ip == nil && user == nil && client == nil:
			bad = "empty entity"
		}
		if bad != "" {
			errs = append(errs, fmt.Errorf("quota entity %s: %s", describe(e.Entity), bad))
			continue
		}
		if ip != nil {
			if v, ok := e.Values[ConnectionCreationRate]; ok {
				if ip.Name == nil {
					ipDefault, ipHasDefault = v, true
				} else {
					ipLimits[normalizeIP(*ip.Name)] = v
				}
			}
			continue
		}
		k := keyOf(user, client)
		for kind := range numKinds {
			v, ok := e.Values[kind.Key()]
			if !ok {
				continue
			}
			lv := &kinds[kind]
			if lv.values == nil {
				lv.values = make(map[entityKey]float64)
			}
			lv.values[k] = v
			lv.set |= 1 << k.lv
		}
	}
	m.kinds, m.ipLimits, m.ipDefault, m.ipHasDefault = kinds, ipLimits, ipDefault, ipHasDefault
	for kind := range numKinds {
		m.on[kind].Store(kinds[kind].set != 0)
	}
	m.ipOn.Store(len(ipLimits) > 0 || ipHasDefault)
	return errors.Join(errs...)
}

// keyOf places a user/client-id entity (either may be nil, not both) at
// its level.
func keyOf(user, client *Part) entityKey {
	name := func(p *Part) string {
		if p == nil || p.Name == nil {
			return ""
		}
		return *p.Name
	}
	u, c := name(user), name(client)
	switch {
	case user == nil && client.Name == nil:
		return entityKey{lv: lvDefClient}
	case user == nil:
		return entityKey{lv: lvClient, client: c}
	case client == nil && user.Name == nil:
		return entityKey{lv: lvDefUser}
	case client == nil:
		return entityKey{lv: lvUser, user: u}
	case user.Name == nil && client.Name == nil:
		return entityKey{lv: lvDefUserDefClient}
	case user.Name == nil:
		return entityKey{lv: lvDefUserClient, client: c}
	case client.Name == nil:
		return entityKey{lv: lvUserDefClient, user: u}
	}
	return entityKey{lv: lvUserClient, user: u, client: c}
}

func describe(parts []Part) string {
	s := "{"
	for i, p := range parts {
		if i > 0 {
			s += ", "
		}
		n := "<default>"
		if p.Name != nil {
			n = *p.Name
		}
		s += p.Type + "=" + n
	}
	return s + "}"
}

// normalizeIP spells an address as the connection's host is spelled
// (IPv4-mapped IPv6 as IPv4), so "::ffff:10.0.0.1" and "10.0.0.1" match.
func normalizeIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}

// resolve finds the quota of kind for user and clientID and the tags of
// the rate it is measured by. m.mu is held.
func (m *Manager) resolve(kind Kind, user, clientID string) (limit float64, tags sensorKey, ok bool) {
	lv := &m.kinds[kind]
	if lv.set == 0 {
		return 0, sensorKey{}, false
	}
	try := func(k entityKey) bool {
		if lv.set&(1<<k.lv) == 0 {
			return false
		}
		limit, ok = lv.values[k]
		return ok
	}
	both := sensorKey{kind: kind, user: user, client: clientID}
	switch {
	case try(entityKey{lv: lvUserClient, user: user, client: clientID}),
		try(entityKey{lv: lvUserDefClient, user: user}):
		tags = both
	case try(entityKey{lv: lvUser, user: user}):
		tags = sensorKey{kind: kind, user: user}
	case try(entityKey{lv: lvDefUserClient, client: clientID}),
		try(entityKey{lv: lvDefUserDefClient}):
		tags = both
	case try(entityKey{lv: lvDefUser}):
		tags = sensorKey{kind: kind, user: user}
	case try(entityKey{lv: lvClient, client: clientID}),
		try(entityKey{lv: lvDefClient}):
		tags = sensorKey{kind: kind, client: clientID}
	default:
		return 0, sensorKey{}, false
	}
	if tags.user == "" && tags.client == "" {
		// Kafka finds no quota for empty tags (an anonymous user name
		// and an empty client id under a client-level quota).
		return 0, sensorKey{}, false
	}
	return limit, tags, true
}

// Enabled reports whether any quota of kind is set (cheap: callers skip
// measuring what no quota needs).
func (m *Manager) Enabled(kind Kind) bool { return kind < numKinds && m.on[kind].Load() }

// AnyEnabled reports whether a quota of any kind (produce, fetch, request)
// is set: when none is, a reply has nothing to be recorded against.
func (m *Manager) AnyEnabled() bool {
	for k := range m.on {
		if m.on[k].Load() {
			return true
		}
	}
	return false
}

// Limit is the quota of kind that applies to user and clientID.
func (m *Manager) Limit(kind Kind, user, clientID string) (float64, bool) {
	if !m.Enabled(kind) {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	limit, _, ok := m.resolve(kind, user, clientID)
	return limit, ok
}

// Record adds value (bytes, or for Request a percentage of one thread's
// time: nanoseconds*100/1e9) to the client's rate at now and returns how
// long the client must wait before its rate is back within its quota, 0
// if it is within or has no quota. Request throttles are capped at one
// window, as Kafka caps them; byte-rate throttles are not.
func (m *Manager) Record(kind Kind, user, clientID string, value float64, now time.Time) time.Duration {
	if !m.Enabled(kind) {
		return 0
	}
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	limit, tags, ok := m.resolve(kind, user, clientID)
	if !ok {
		return 0
	}
	s := m.sensor(tags, ms)
	s.r.record(m.p, value, ms)
	s.last = ms
	d := ThrottleTime(s.r.measure(m.p, ms), limit, time.Duration(s.r.windowSize(m.p, ms))*time.Millisecond)
	if kind == Request {
		d = min(d, m.window)
	}
	return d
}

// Unrecord takes value back out of the client's rate: a throttled fetch
// is answered empty, so its bytes were not sent.
func (m *Manager) Unrecord(kind Kind, user, clientID string, value float64, now time.Time) {
	if !m.Enabled(kind) {
		return
	}
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, tags, ok := m.resolve(kind, user, clientID); ok {
		m.sensor(tags, ms).r.record(m.p, -value, ms)
	}
}

// MaxValueInWindow is the most a client may record at once without being
// throttled on an otherwise empty rate (quota x (samples-1) windows):
// fetches are cut to it so one response does not always throttle.
func (m *Manager) MaxValueInWindow(kind Kind, user, clientID string) (float64, bool) {
	limit, ok := m.Limit(kind, user, clientID)
	if !ok {
		return 0, false
	}
	return limit * float64(m.p.samples-1) * m.window.Seconds(), true
}

// sensor returns the rate of tags, creating it (or, at MaxSensors, the
// kind's shared overflow rate). m.mu is held.
func (m *Manager) sensor(tags sensorKey, ms int64) *sensor {
	if ms-m.lastSweep >= m.p.windowMs*int64(m.p.samples) {
		m.sweep(ms)
	}
	if s, ok := m.sensors[tags]; ok {
		return s
	}
	if len(m.sensors) >= m.maxSensors {
		m.sweep(ms)
		if len(m.sensors) >= m.maxSensors {
			m.overflowed++
			tags = sensorKey{kind: tags.kind, client: overflowClient}
			if s, ok := m.sensors[tags]; ok {
				return s
			}
		}
	}
	s := &sensor{last: ms}
	m.sensors[tags] = s
	return s
}

// overflowClient tags the rate shared by clients beyond MaxSensors (a
// client id cannot contain NUL on the wire of any real client).
const overflowClient = "\x00overflow"

// sweep drops the rates idle for the whole monitored span. m.mu is held.
func (m *Manager) sweep(ms int64) {
	m.lastSweep = ms
	for k, s := range m.sensors {
		if s.r.idle(m.p, ms) {
			delete(m.sensors, k)
		}
	}
	for k, s := range m.ipSensors {
		if s.r.idle(m.p, ms) {
			delete(m.ipSensors, k)
		}
	}
}

// IPQuotasEnabled reports whether any connection_creation_rate is set.
func (m *Manager) IPQuotasEnabled() bool { return m.ipOn.Load() }

// RecordConnection counts a new connection from ip at now against the
// IP's connection_creation_rate. A positive result means the connection
// must be refused (closed after that long, as Kafka delays the close so
// the client does not reconnect at once); it is then not counted.
// Capped at one window, as Kafka caps it.
func (m *Manager) RecordConnection(ip string, now time.Time) time.Duration {
	if !m.ipOn.Load() {
		return 0
	}
	ip = normalizeIP(ip)
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	limit, ok := m.ipLimits[ip]
	if !ok {
		if !m.ipHasDefault {
			return 0
		}
		limit = m.ipDefault
	}
	if ms-m.lastSweep >= m.p.windowMs*int64(m.p.samples) {
		m.sweep(ms)
	}
	s, ok := m.ipSensors[ip]
	if !ok {
		if len(m.ipSensors) >= m.maxSensors {
			m.sweep(ms)
		}
		if len(m.ipSensors) >= m.maxSensors {
			// Too many addresses to track each: refuse rather than let a
			// spray of addresses through unmeasured.
			m.overflowed++
			return m.window
		}
		s = &sensor{}
		m.ipSensors[ip] = s
	}
	s.r.record(m.p, 1, ms)
	s.last = ms
	d := ThrottleTime(s.r.measure(m.p, ms), limit, time.Duration(s.r.windowSize(m.p, ms))*time.Millisecond)
	if d > 0 {
		s.r.record(m.p, -1, ms)
	}
	return min(d, m.window)
}

// RecordBrokerConnection counts a new connection against the broker-wide
// connection creation rate and returns how long the acceptor must wait
// before taking it (capped at one window), 0 when unlimited.
func (m *Manager) RecordBrokerConnection(now time.Time) time.Duration {
	if m.brokerConnLimit <= 0 {
		return 0
	}
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.broker.r.record(m.p, 1, ms)
	d := ThrottleTime(m.broker.r.measure(m.p, ms), m.brokerConnLimit, time.Duration(m.broker.r.windowSize(m.p, ms))*time.Millisecond)
	return min(d, m.window)
}

// Rates is how many client and IP rates are kept (tests: idle ones go).
func (m *Manager) Rates() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sensors) + len(m.ipSensors)
}

// Overflowed counts records that went to the shared overflow rate or
// were refused because MaxSensors rates were in use.
func (m *Manager) Overflowed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overflowed
}
