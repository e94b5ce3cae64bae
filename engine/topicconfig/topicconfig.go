// Package topicconfig owns the schema of per-topic configuration: the keys a
// topic accepts, their types, defaults and valid ranges, and the typed view
// (Config) that the storage engine consumes.
//
// Invariants: a map that passed Validate always parses with Resolve; Resolve
// fills every key the topic does not override with the broker default, so a
// Config never has a zero value that means "unset".
package topicconfig

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every validation failure, so callers can map it to
// INVALID_CONFIG without string matching.
var ErrInvalid = errors.New("invalid topic config")

// Key names, as Kafka spells them.
const (
	CleanupPolicy        = "cleanup.policy"
	CompressionType      = "compression.type"
	DeleteRetentionMs    = "delete.retention.ms"
	FileDeleteDelayMs    = "file.delete.delay.ms"
	FlushMs              = "flush.ms"
	FlushPolicy          = "flush.policy"
	IndexIntervalBytes   = "index.interval.bytes"
	MaxMessageBytes      = "max.message.bytes"
	MessageTimestampType = "message.timestamp.type"
	MinCompactionLagMs   = "min.compaction.lag.ms"
	MinInsyncReplicas    = "min.insync.replicas"
	RetentionBytes       = "retention.bytes"
	RetentionMs          = "retention.ms"
	SegmentBytes         = "segment.bytes"
	SegmentMs            = "segment.ms"
)

// Kind is the value type of a key, reported by DescribeConfigs.
type Kind int

const (
	KindString Kind = iota
	KindInt
	KindLong
	KindList
)

// Def describes one key.
type Def struct {
	Name    string
	Kind    Kind
	Default string
	Doc     string
	// check validates a non-default value; nil means any value of Kind.
	check func(string) error
}

var defs = []Def{
	{Name: CleanupPolicy, Kind: KindList, Default: "delete", Doc: "delete, compact, or compact,delete", check: checkCleanup},
	{Name: CompressionType, Kind: KindString, Default: "producer", Doc: "only 'producer' (batches are stored as the producer compressed them)", check: oneOf("producer")},
	{Name: DeleteRetentionMs, Kind: KindLong, Default: "86400000", Doc: "how long tombstones are kept in compacted topics", check: atLeast(0)},
	{Name: FileDeleteDelayMs, Kind: KindLong, Default: "60000", Doc: "delay before a deleted segment file is removed", check: atLeast(0)},
	{Name: FlushMs, Kind: KindLong, Default: "1000", Doc: "fsync interval when flush.policy=interval", check: atLeast(1)},
	{Name: FlushPolicy, Kind: KindString, Default: "always", Doc: "always: fsync before acknowledging; interval: fsync every flush.ms", check: oneOf("always", "interval")},
	{Name: IndexIntervalBytes, Kind: KindInt, Default: "4096", Doc: "bytes between offset index entries", check: atLeast(0)},
	{Name: MaxMessageBytes, Kind: KindInt, Default: "1048588", Doc: "largest record batch accepted", check: atLeast(0)},
	{Name: MessageTimestampType, Kind: KindString, Default: "CreateTime", Doc: "CreateTime or LogAppendTime", check: oneOf("CreateTime", "LogAppendTime")},
	{Name: MinCompactionLagMs, Kind: KindLong, Default: "0", Doc: "minimum age before a record may be compacted", check: atLeast(0)},
	{Name: MinInsyncReplicas, Kind: KindInt, Default: "1", Doc: "replicas that must acknowledge an acks=all write", check: atLeast(1)},
	{Name: RetentionBytes, Kind: KindLong, Default: "-1", Doc: "size limit per partition before old segments are deleted; -1 is unlimited", check: atLeast(-1)},
	{Name: RetentionMs, Kind: KindLong, Default: "604800000", Doc: "age limit before old segments are deleted; -1 is unlimited", check: atLeast(-1)},
	{Name: SegmentBytes, Kind: KindInt, Default: "1073741824", Doc: "segment file size before rolling", check: atLeast(1024)},
	{Name: SegmentMs, Kind: KindLong, Default: "604800000", Doc: "segment age before rolling", check: atLeast(1)},
}

var byName = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		m[defs[i].Name] = &defs[i]
	}
	return m
}()

// Defs returns every key, sorted by name.
func Defs() []Def {
	out := append([]Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the definition of a key.
func Lookup(name string) (Def, bool) {
	d, ok := byName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// ValidateOne checks a single key and value.
func ValidateOne(name, value string) error {
	d, ok := byName[name]
	if !ok {
		return fmt.Errorf("%w: unknown key %q", ErrInvalid, name)
	}
	switch d.Kind {
	case KindInt:
		if _, err := strconv.ParseInt(value, 10, 32); err != nil {
			return fmt.Errorf("%w: %s=%q is not a 32-bit integer", ErrInvalid, name, value)
		}
	case KindLong:
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return fmt.Errorf("%w: %s=%q is not an integer", ErrInvalid, name, value)
		}
	}
	if d.check != nil {
		if err := d.check(value); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, name, value, err)
		}
	}
	return nil
}

// Validate checks every key of a topic's overrides.
func Validate(overrides map[string]string) error {
	names := make([]string, 0, len(overrides))
	for k := range overrides {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := ValidateOne(k, overrides[k]); err != nil {
			return err
		}
	}
	return nil
}

// Config is the typed view of a topic's effective configuration.
type Config struct {
	CleanupDelete      bool
	CleanupCompact     bool
	DeleteRetention    time.Duration
	FlushInterval      time.Duration
	FlushAlways        bool
	IndexIntervalBytes int
	MaxMessageBytes    int
	LogAppendTime      bool
	MinInsyncReplicas  int
	RetentionBytes     int64         // -1: unlimited
	Retention          time.Duration // negative: unlimited
	SegmentBytes       int64
	SegmentAge         time.Duration
}

// Resolve merges overrides over the defaults and returns the typed config.
func Resolve(overrides map[string]string) (Config, error) {
	if err := Validate(overrides); err != nil {
		return Config{}, err
	}
	get := func(k string) string {
		if v, ok := overrides[k]; ok {
			return v
		}
		return byName[k].Default
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(get(k), 10, 64) // validated above
		return n
	}
	ms := func(k string) time.Duration {
		n := num(k)
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Millisecond
	}
	policy := get(CleanupPolicy)
	return Config{
		CleanupDelete:      strings.Contains(policy, "delete"),
		CleanupCompact:     strings.Contains(policy, "compact"),
		DeleteRetention:    ms(DeleteRetentionMs),
		FlushInterval:      ms(FlushMs),
		FlushAlways:        get(FlushPolicy) == "always",
		IndexIntervalBytes: int(num(IndexIntervalBytes)),
		MaxMessageBytes:    int(num(MaxMessageBytes)),
		LogAppendTime:      get(MessageTimestampType) == "LogAppendTime",
		MinInsyncReplicas:  int(num(MinInsyncReplicas)),
		RetentionBytes:     num(RetentionBytes),
		Retention:          ms(RetentionMs),
		SegmentBytes:       num(SegmentBytes),
		SegmentAge:         ms(SegmentMs),
	}, nil
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		if n < min {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

func checkCleanup(v string) error {
	seen := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p != "delete" && p != "compact" {
			return errors.New("must be delete, compact, or compact,delete")
		}
		seen[p] = true
	}
	if len(seen) == 0 {
		return errors.New("must not be empty")
	}
	return nil
}
