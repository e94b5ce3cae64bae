// Package topicconfig owns the schema of per-topic configuration: the keys a
// topic accepts, their types, defaults and valid ranges, and the typed view
// (Config) that the storage engine consumes.
//
// The keys are every topic config Kafka 4.x documents (LogConfig and
// TopicConfig), with Kafka's types, defaults and validators, plus MoonMQ's own
// flush.policy and the deprecated message.timestamp.difference.max.ms that
// tools written for Kafka 3.x still send. A key MoonMQ does not act on yet is
// still validated and stored; its Def.NotApplied says why, and DescribeConfigs
// repeats it in the key's documentation.
//
// Invariants: a map that passed Validate always parses with Resolve; Resolve
// fills every key the topic does not override with the broker default, so a
// Config never has a zero value that means "unset". Validation only ever
// widens between releases: the metadata log replays old commands through
// Validate, so a value accepted once must stay accepted.
package topicconfig

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
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
	CleanupPolicy                        = "cleanup.policy"
	CompressionType                      = "compression.type"
	CompressionGzipLevel                 = "compression.gzip.level"
	CompressionLZ4Level                  = "compression.lz4.level"
	CompressionZstdLevel                 = "compression.zstd.level"
	DeleteRetentionMs                    = "delete.retention.ms"
	FileDeleteDelayMs                    = "file.delete.delay.ms"
	FlushMessages                        = "flush.messages"
	FlushMs                              = "flush.ms"
	FlushPolicy                          = "flush.policy" // MoonMQ's own
	FollowerReplicationThrottledReplicas = "follower.replication.throttled.replicas"
	IndexIntervalBytes                   = "index.interval.bytes"
	LeaderReplicationThrottledReplicas   = "leader.replication.throttled.replicas"
	LocalRetentionBytes                  = "local.retention.bytes"
	LocalRetentionMs                     = "local.retention.ms"
	MaxCompactionLagMs                   = "max.compaction.lag.ms"
	MaxMessageBytes                      = "max.message.bytes"
	MessageDownconversionEnable          = "message.downconversion.enable"
	MessageTimestampAfterMaxMs           = "message.timestamp.after.max.ms"
	MessageTimestampBeforeMaxMs          = "message.timestamp.before.max.ms"
	MessageTimestampDifferenceMaxMs      = "message.timestamp.difference.max.ms"
	MessageTimestampType                 = "message.timestamp.type"
	MinCleanableDirtyRatio               = "min.cleanable.dirty.ratio"
	MinCompactionLagMs                   = "min.compaction.lag.ms"
	MinInsyncReplicas                    = "min.insync.replicas"
	Preallocate                          = "preallocate"
	RemoteLogCopyDisable                 = "remote.log.copy.disable"
	RemoteLogDeleteOnDisable             = "remote.log.delete.on.disable"
	RemoteStorageEnable                  = "remote.storage.enable"
	RetentionBytes                       = "retention.bytes"
	RetentionMs                          = "retention.ms"
	SegmentBytes                         = "segment.bytes"
	SegmentIndexBytes                    = "segment.index.bytes"
	SegmentJitterMs                      = "segment.jitter.ms"
	SegmentMs                            = "segment.ms"
	UncleanLeaderElectionEnable          = "unclean.leader.election.enable"
)

// Compression types accepted by compression.type, as Kafka names them.
const (
	CompressionProducer     = "producer" // keep the producer's codec
	CompressionUncompressed = "uncompressed"
	CompressionGzip         = "gzip"
	CompressionSnappy       = "snappy"
	CompressionLZ4          = "lz4"
	CompressionZstd         = "zstd"
)

// Kind is the value type of a key, reported by DescribeConfigs. The values
// are MoonMQ's (append only: they are compared, never stored); net/kafka maps
// them to Kafka's ConfigType codes.
type Kind int

const (
	KindString  Kind = iota
	KindInt          // 32-bit
	KindLong         // 64-bit
	KindList         // comma-separated
	KindBoolean      // true or false, any case
	KindDouble       // 64-bit float
)

// Def describes one key.
type Def struct {
	Name    string
	Kind    Kind
	Default string
	// Doc is Kafka's documentation of the key, with MoonMQ's differences.
	Doc string
	// NotApplied is empty when MoonMQ acts on the key; otherwise it says why
	// the value is only validated, stored and reported.
	NotApplied string
	// check validates a value that parsed as Kind; nil means any value of
	// Kind. Its error says what is expected, without the key or value.
	check func(string) error
}

// Documentation is what DescribeConfigs reports: Doc, and for a key MoonMQ
// does not act on yet, a sentence saying so and why.
func (d Def) Documentation() string {
	if d.NotApplied == "" {
		return d.Doc
	}
	return d.Doc + " MoonMQ stores this setting but does not act on it yet: " + d.NotApplied
}

const maxLong = "9223372036854775807"

// Reasons shared by several keys.
const (
	noTiering  = "MoonMQ has no tiered storage; every segment stays local and retention.ms and retention.bytes decide when it is deleted."
	noThrottle = "replication is not throttled: followers fetch as fast as the leader serves them."
)

var defs = []Def{
	{
		Name: CleanupPolicy, Kind: KindList, Default: "delete",
		Doc: "The retention policy to use on log segments. The \"delete\" policy (the default) discards old segments " +
			"when their retention time or size limit has been reached. The \"compact\" policy enables log compaction, " +
			"which retains the latest value for each key. Both may be given as a comma-separated list " +
			"(\"compact,delete\"): old segments are then discarded per the retention time and size configuration " +
			"while retained segments are compacted. \"compact\" alone turns age and size retention off, as in " +
			"Kafka; \"delete,compact\" is the same as \"compact,delete\". A record without a key is refused on a " +
			"compacted topic (INVALID_RECORD), as in Kafka. The policy may be changed at run time: the cleaner and " +
			"retention read it before each pass.",
		check: checkCleanup,
	},
	{
		Name: CompressionType, Kind: KindString, Default: CompressionProducer,
		Doc: "The final compression type for the topic: one of the standard codecs ('gzip', 'snappy', 'lz4', " +
			"'zstd'), 'uncompressed' (no compression), or 'producer' (retain the codec the producer chose). A batch " +
			"produced with a different codec is recompressed by the broker before it is stored, as in Kafka.",
		check: oneOf(CompressionUncompressed, CompressionZstd, CompressionLZ4, CompressionSnappy, CompressionGzip, CompressionProducer),
	},
	{
		Name: CompressionGzipLevel, Kind: KindInt, Default: "-1",
		Doc:   "The compression level to use if compression.type is set to gzip (-1: the codec's default).",
		check: gzipLevel,
	},
	{
		Name: CompressionLZ4Level, Kind: KindInt, Default: "9",
		Doc: "The compression level to use if compression.type is set to lz4. The default, 9, uses the fast " +
			"compressor and any other level the high-compression one, as in Kafka; MoonMQ's high-compression " +
			"encoder has levels 1 to 9, so levels above 9 compress as 9.",
		check: between(1, 17),
	},
	{
		Name: CompressionZstdLevel, Kind: KindInt, Default: "3",
		Doc: "The compression level to use if compression.type is set to zstd. MoonMQ's zstd encoder maps the " +
			"level to its nearest speed (fastest below 3, default 3 to 5, better 6 to 9, best above).",
		check: between(-131072, 22),
	},
	{
		Name: DeleteRetentionMs, Kind: KindLong, Default: "86400000",
		Doc: "The amount of time to retain delete tombstone markers for log compacted topics. This setting also " +
			"bounds the time in which a consumer must complete a read if it begins from offset 0 to be sure of a " +
			"valid snapshot of the final state (otherwise tombstones may be collected before it completes its scan).",
		check: atLeast(0),
	},
	{
		Name: FileDeleteDelayMs, Kind: KindLong, Default: "60000",
		Doc:        "The time to wait before deleting a file from the filesystem.",
		NotApplied: "a segment deleted by retention is removed at once; readers that hold it open finish their reads, so no delay is needed.",
		check:      atLeast(0),
	},
	{
		Name: FlushMessages, Kind: KindLong, Default: maxLong,
		Doc: "An interval, in messages, at which an fsync of data written to the log is forced: 1 fsyncs after every " +
			"message, 5 after every five. In MoonMQ it applies with flush.policy=interval (an fsync starts once this " +
			"many messages are not yet on disk, besides every flush.ms); flush.policy=always already fsyncs every " +
			"append before acknowledging it.",
		check: atLeast(1),
	},
	{
		Name: FlushMs, Kind: KindLong, Default: "1000",
		Doc: "A time interval at which an fsync of data written to the log is forced. In MoonMQ it applies with " +
			"flush.policy=interval: data is fsynced every flush.ms milliseconds and acknowledged before it is on " +
			"disk. MoonMQ's default is 1000 and its minimum 1 (Kafka's default is never, relying on replication).",
		check: atLeast(1),
	},
	{
		Name: FlushPolicy, Kind: KindString, Default: "always",
		Doc: "MoonMQ's durability policy (not a Kafka key): always fsyncs before acknowledging a produce " +
			"(group commit shares one fsync between concurrent producers); interval fsyncs every flush.ms " +
			"(or every flush.messages messages) and acknowledges at once.",
		check: oneOf("always", "interval"),
	},
	{
		Name: FollowerReplicationThrottledReplicas, Kind: KindList, Default: "",
		Doc: "A list of replicas for which log replication should be throttled on the follower side, in the form " +
			"[PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..., or the wildcard '*' to throttle all replicas " +
			"of the topic.",
		NotApplied: noThrottle,
		check:      throttledReplicas,
	},
	{
		Name: IndexIntervalBytes, Kind: KindInt, Default: "4096",
		Doc: "How frequently an entry is added to the offset index: the default indexes a batch roughly every " +
			"4096 bytes. More indexing lets reads jump closer to the exact position in the log but makes the " +
			"index larger.",
		check: atLeast(0),
	},
	{
		Name: LeaderReplicationThrottledReplicas, Kind: KindList, Default: "",
		Doc: "A list of replicas for which log replication should be throttled on the leader side, in the form " +
			"[PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..., or the wildcard '*' to throttle all replicas " +
			"of the topic.",
		NotApplied: noThrottle,
		check:      throttledReplicas,
	},
	{
		Name: LocalRetentionBytes, Kind: KindLong, Default: "-2",
		Doc: "With tiered storage, the maximum size local log segments of a partition can grow to before the " +
			"oldest are deleted locally. -2 means the value of retention.bytes. The effective value should be at " +
			"most retention.bytes.",
		NotApplied: noTiering,
		check:      atLeast(-2),
	},
	{
		Name: LocalRetentionMs, Kind: KindLong, Default: "-2",
		Doc: "With tiered storage, the number of milliseconds to keep a local log segment before it is deleted " +
			"locally. -2 means the value of retention.ms. The effective value should be at most retention.ms.",
		NotApplied: noTiering,
		check:      atLeast(-2),
	},
	{
		Name: MaxCompactionLagMs, Kind: KindLong, Default: maxLong,
		Doc: "The maximum time a message will remain ineligible for compaction in the log. Only applicable for " +
			"logs that are being compacted. Must not be below min.compaction.lag.ms.",
		check: atLeast(1),
	},
	{
		Name: MaxMessageBytes, Kind: KindInt, Default: "1048588",
		Doc: "The largest record batch size allowed (after compression if compression is enabled); a larger batch " +
			"is refused with MESSAGE_TOO_LARGE.",
		check: atLeast(0),
	},
	{
		Name: MessageDownconversionEnable, Kind: KindBoolean, Default: "true",
		Doc: "Deprecated: down-conversion of message formats for old consumers is not possible in Apache Kafka 4.0 " +
			"and newer, so this setting has no effect there and is deprecated for removal in Kafka 5.0. MoonMQ " +
			"stores every batch in record format v2 and never down-converts either.",
		NotApplied: "there is nothing to down-convert: only record format v2 is stored and served.",
	},
	{
		Name: MessageTimestampAfterMaxMs, Kind: KindLong, Default: "3600000",
		Doc: "The allowable difference between a message's timestamp and the broker's clock when the message is " +
			"later: a produce whose record timestamp is more than this many milliseconds in the future is refused " +
			"with INVALID_TIMESTAMP. Ignored if message.timestamp.type=LogAppendTime. Kafka 4.0 lowered the " +
			"default to one hour.",
		check: atLeast(0),
	},
	{
		Name: MessageTimestampBeforeMaxMs, Kind: KindLong, Default: maxLong,
		Doc: "The allowable difference between the broker's clock and a message's timestamp when the message is " +
			"earlier: a produce whose record timestamp is more than this many milliseconds in the past is refused " +
			"with INVALID_TIMESTAMP. Ignored if message.timestamp.type=LogAppendTime.",
		check: atLeast(0),
	},
	{
		Name: MessageTimestampDifferenceMaxMs, Kind: KindLong, Default: maxLong,
		Doc: "[DEPRECATED] The maximum difference allowed between the timestamp when a broker receives a message " +
			"and the timestamp specified in the message. Kafka 3.6 replaced it with message.timestamp.before.max.ms " +
			"and message.timestamp.after.max.ms and Kafka 4.0 removed it; MoonMQ still accepts it for tools " +
			"written against Kafka 3.x and, as Kafka 3.x did, applies it as either bound the topic does not set " +
			"itself.",
		check: atLeast(0),
	},
	{
		Name: MessageTimestampType, Kind: KindString, Default: "CreateTime",
		Doc: "Whether the timestamp in the message is the message create time (set by the producer) or the log " +
			"append time (set by the broker when it stores the batch).",
		check: oneOf("CreateTime", "LogAppendTime"),
	},
	{
		Name: MinCleanableDirtyRatio, Kind: KindDouble, Default: "0.5",
		Doc: "How frequently the log compactor will attempt to clean the log: a log is not cleaned while less than " +
			"this fraction of it is dirty (uncompacted). A higher ratio means fewer, more efficient cleanings but " +
			"more wasted space. With max.compaction.lag.ms or min.compaction.lag.ms the log is eligible as soon " +
			"as the ratio is met and it has had dirty records for min.compaction.lag.ms, or once it has had dirty " +
			"records for max.compaction.lag.ms.",
		check: betweenFloat(0, 1),
	},
	{
		Name: MinCompactionLagMs, Kind: KindLong, Default: "0",
		Doc: "The minimum time a message will remain uncompacted in the log. Only applicable for logs that are " +
			"being compacted. Must not exceed max.compaction.lag.ms.",
		check: atLeast(0),
	},
	{
		Name: MinInsyncReplicas, Kind: KindInt, Default: "1",
		Doc: "When a producer sets acks to \"all\" (or \"-1\"), the minimum number of replicas that must acknowledge " +
			"a write for it to succeed; otherwise the producer gets NOT_ENOUGH_REPLICAS. MoonMQ's default is a " +
			"majority of the topic's replication factor (1 for one replica, 2 for two or three, 3 for five), not " +
			"Kafka's 1, " +
			"so an acknowledged write survives the loss of any minority of its replicas.",
		check: atLeast(1),
	},
	{
		Name: Preallocate, Kind: KindBoolean, Default: "false",
		Doc: "True if the segment file should be preallocated on disk when a new log segment is created.",
		NotApplied: "segment files grow as batches are appended; recovery relies on a segment file ending at its " +
			"last whole batch, which a preallocated file would not.",
	},
	{
		Name: RemoteLogCopyDisable, Kind: KindBoolean, Default: "false",
		Doc: "With tiered storage, whether the topic's tiered data should become read only, with no more data " +
			"uploaded; local retention then no longer applies and data expires by retention.ms and retention.bytes.",
		NotApplied: noTiering,
	},
	{
		Name: RemoteLogDeleteOnDisable, Kind: KindBoolean, Default: "false",
		Doc: "With tiered storage, whether the topic's tiered data should be deleted after tiered storage is " +
			"disabled on the topic; it must be true to set remote.storage.enable from true to false.",
		NotApplied: noTiering,
	},
	{
		Name: RemoteStorageEnable, Kind: KindBoolean, Default: "false",
		Doc: "Set to true to enable tiered storage for the topic. MoonMQ has no tiered storage, so, like a Kafka " +
			"broker without remote.log.storage.system.enable, it accepts only false.",
		check: remoteStorage,
	},
	{
		Name: RetentionBytes, Kind: KindLong, Default: "-1",
		Doc: "The maximum size a partition can grow to before old log segments are discarded to free up space, if " +
			"the \"delete\" retention policy is used. By default (-1, as any negative value) there is no size limit, " +
			"only a time limit. Since the limit is enforced per partition, multiply it by the number of partitions " +
			"to compute the topic's retention in bytes.",
	},
	{
		Name: RetentionMs, Kind: KindLong, Default: "604800000",
		Doc: "The maximum time a log is retained before old log segments are discarded to free up space, if the " +
			"\"delete\" retention policy is used. It is an SLA on how soon consumers must read their data. If set " +
			"to -1, no time limit is applied.",
		check: atLeast(-1),
	},
	{
		Name: SegmentBytes, Kind: KindInt, Default: "1073741824",
		Doc: "The segment file size of the log. Retention and cleaning are always done a file at a time, so a larger " +
			"segment size means fewer files but less granular control over retention. MoonMQ's minimum is 1024 bytes.",
		check: atLeast(1024),
	},
	{
		Name: SegmentIndexBytes, Kind: KindInt, Default: "10485760",
		Doc: "The size of the index that maps offsets to file positions: when a segment's offset index (8 bytes an " +
			"entry) or time index (12 bytes an entry) would outgrow it, the log rolls to a new segment. You " +
			"generally should not need to change this setting.",
		check: atLeast(4),
	},
	{
		Name: SegmentJitterMs, Kind: KindLong, Default: "0",
		Doc: "The maximum random jitter subtracted from the scheduled segment roll time (segment.ms), to avoid " +
			"thundering herds of segment rolling.",
		check: atLeast(0),
	},
	{
		Name: SegmentMs, Kind: KindLong, Default: "604800000",
		Doc: "The period of time after which the log is rolled even if the segment file is not full, so that " +
			"retention can delete or compact old data.",
		check: atLeast(1),
	},
	{
		Name: UncleanLeaderElectionEnable, Kind: KindBoolean, Default: "false",
		Doc: "Whether replicas not in the ISR may be elected as leader as a last resort, even though doing so may " +
			"result in data loss.",
		NotApplied: "MoonMQ never elects a replica outside the ISR: a partition whose in-sync replicas are all " +
			"gone stays offline until one of them returns.",
	},
}

// DefaultMinInsyncReplicas is min.insync.replicas for a topic that does not
// set it: a majority of its replication factor (RF 1 -> 1, 3 -> 2, 5 -> 3).
func DefaultMinInsyncReplicas(replicationFactor int) int {
	return max(replicationFactor, 1)/2 + 1
}

// MinInsyncReplicasOf is a topic's min.insync.replicas: its override when it
// has a valid one, else DefaultMinInsyncReplicas.
func MinInsyncReplicasOf(overrides map[string]string, replicationFactor int) int {
	if v, ok := overrides[MinInsyncReplicas]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
			return n
		}
	}
	return DefaultMinInsyncReplicas(replicationFactor)
}

// removed explains keys a Kafka of another version accepted but Kafka 4.x
// and MoonMQ refuse, so the error says why rather than only "unknown".
var removed = map[string]string{
	"message.format.version": "it was removed in Kafka 4.0 (KIP-724): every batch is stored in record format v2, " +
		"so the setting has nothing to choose; drop it from the topic's configs",
}

var byName = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		m[defs[i].Name] = &defs[i]
	}
	return m
}()

// Canonical is how a valid value of d is shown: as Kafka's DescribeConfigs
// shows the parsed value, trimmed, with booleans in lower case ("TRUE" is
// accepted and stored as given, and shown as "true").
func (d Def) Canonical(v string) string {
	v = strings.TrimSpace(v)
	if d.Kind == KindBoolean {
		return strings.ToLower(v)
	}
	return v
}

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

// ValidateOne checks a single key and value: the key must exist, the value
// must parse as the key's Kind (after trimming surrounding spaces, as Kafka
// does) and pass the key's validator. The error names the key, the value and
// what is expected.
func ValidateOne(name, value string) error {
	d, ok := byName[name]
	if !ok {
		if why, ok := removed[name]; ok {
			return fmt.Errorf("%w: %s is not a topic config: %s", ErrInvalid, name, why)
		}
		return fmt.Errorf("%w: unknown key %q", ErrInvalid, name)
	}
	v := strings.TrimSpace(value)
	if err := parseKind(d.Kind, v); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, name, value, err)
	}
	if d.check != nil {
		if err := d.check(v); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, name, value, err)
		}
	}
	return nil
}

// parseKind checks that v (already trimmed) is a value of kind k, with
// Kafka's ConfigDef parsing rules.
func parseKind(k Kind, v string) error {
	switch k {
	case KindInt:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return fmt.Errorf("expected a number of type INT (a 32-bit integer, %d to %d)", math.MinInt32, math.MaxInt32)
		}
	case KindLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("expected a number of type LONG (a 64-bit integer, %d to %d)", int64(math.MinInt64), int64(math.MaxInt64))
		}
	case KindBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return errors.New("expected a value of type BOOLEAN (true or false)")
		}
	case KindDouble:
		if _, err := parseDouble(v); err != nil {
			return err
		}
	}
	return nil
}

// parseDouble parses a DOUBLE: a finite decimal or exponent number. NaN and
// infinities parse in Java but compare false against every bound, so Kafka
// would store a ratio of NaN; MoonMQ refuses them.
func parseDouble(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("expected a number of type DOUBLE (such as 0.5)")
	}
	return f, nil
}

// Validate checks every key of a topic's overrides, then the constraints
// between keys that Kafka checks (LogConfig.validateValues).
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
	r := resolver(overrides)
	if lo, hi := r.long(MinCompactionLagMs), r.long(MaxCompactionLagMs); lo > hi {
		return fmt.Errorf("%w: conflicting topic configs: %s (%d) is greater than %s (%d)",
			ErrInvalid, MinCompactionLagMs, lo, MaxCompactionLagMs, hi)
	}
	return nil
}

// Config is the typed view of a topic's effective configuration: the keys
// MoonMQ acts on.
type Config struct {
	// CleanupDelete runs retention (retention.ms, retention.bytes);
	// CleanupCompact runs the log cleaner and refuses keyless records.
	// "compact,delete" sets both: retention deletes old segments and the
	// cleaner compacts the retained ones.
	CleanupDelete  bool
	CleanupCompact bool
	// DeleteRetention is delete.retention.ms: how long a tombstone
	// outlives the cleaning that reached it.
	DeleteRetention time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: a compacted log
	// is cleaned once this fraction of its cleanable bytes is dirty.
	MinCleanableDirtyRatio float64
	// MinCompactionLag and MaxCompactionLag are min.compaction.lag.ms and
	// max.compaction.lag.ms: a record younger than the first is never
	// cleaned; a log with dirty records older than the second is cleaned
	// whatever its dirty ratio. MaxCompactionLag saturates at
	// math.MaxInt64 (Long.MAX_VALUE, the default, is "never forced").
	MinCompactionLag   time.Duration
	MaxCompactionLag   time.Duration
	FlushInterval      time.Duration
	FlushAlways        bool
	FlushMessages      int64 // with FlushAlways off: fsync once this many offsets are not durable; math.MaxInt64 never
	IndexIntervalBytes int
	MaxMessageBytes    int
	LogAppendTime      bool
	MinInsyncReplicas  int
	RetentionBytes     int64         // negative: unlimited
	Retention          time.Duration // negative: unlimited
	SegmentBytes       int64
	SegmentAge         time.Duration
	SegmentJitter      time.Duration // 0: none
	SegmentIndexBytes  int
	// Compression is compression.type: CompressionProducer keeps the
	// producer's codec; any other value is the codec batches are stored
	// with. CompressionLevel is that codec's level (gzip -1 is its default;
	// 0 for codecs without levels).
	Compression      string
	CompressionLevel int
	// TimestampBeforeMaxMs and TimestampAfterMaxMs bound how far a
	// CreateTime record's timestamp may be behind or ahead of the broker's
	// clock (math.MaxInt64: unbounded). Unused with LogAppendTime.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
}

// Resolve merges overrides over the defaults and returns the typed config.
func Resolve(overrides map[string]string) (Config, error) {
	if err := Validate(overrides); err != nil {
		return Config{}, err
	}
	r := resolver(overrides)
	policy := splitList(r.get(CleanupPolicy))
	c := Config{
		CleanupDelete:      slices.Contains(policy, "delete"),
		CleanupCompact:     slices.Contains(policy, "compact"),
		DeleteRetention:    r.ms(DeleteRetentionMs),
		MinCompactionLag:   r.ms(MinCompactionLagMs),
		MaxCompactionLag:   r.ms(MaxCompactionLagMs),
		FlushInterval:      r.ms(FlushMs),
		FlushAlways:        r.get(FlushPolicy) == "always",
		FlushMessages:      r.long(FlushMessages),
		IndexIntervalBytes: int(r.long(IndexIntervalBytes)),
		MaxMessageBytes:    int(r.long(MaxMessageBytes)),
		LogAppendTime:      r.get(MessageTimestampType) == "LogAppendTime",
		MinInsyncReplicas:  int(r.long(MinInsyncReplicas)),
		RetentionBytes:     r.long(RetentionBytes),
		Retention:          r.ms(RetentionMs),
		SegmentBytes:       r.long(SegmentBytes),
		SegmentAge:         r.ms(SegmentMs),
		SegmentJitter:      r.ms(SegmentJitterMs),
		SegmentIndexBytes:  int(r.long(SegmentIndexBytes)),
		Compression:        r.get(CompressionType),
	}
	c.MinCleanableDirtyRatio, _ = parseDouble(r.get(MinCleanableDirtyRatio)) // validated
	switch c.Compression {
	case CompressionGzip:
		c.CompressionLevel = int(r.long(CompressionGzipLevel))
	case CompressionLZ4:
		c.CompressionLevel = int(r.long(CompressionLZ4Level))
	case CompressionZstd:
		c.CompressionLevel = int(r.long(CompressionZstdLevel))
	}
	// The deprecated difference applies to each bound the topic leaves at
	// its default, as Kafka 3.x did (keyed on the override rather than on the
	// default's value, since Kafka 4.0 gave the two bounds different defaults).
	c.TimestampBeforeMaxMs, c.TimestampAfterMaxMs = r.long(MessageTimestampBeforeMaxMs), r.long(MessageTimestampAfterMaxMs)
	if _, ok := overrides[MessageTimestampDifferenceMaxMs]; ok {
		diff := r.long(MessageTimestampDifferenceMaxMs)
		if _, ok := overrides[MessageTimestampBeforeMaxMs]; !ok {
			c.TimestampBeforeMaxMs = diff
		}
		if _, ok := overrides[MessageTimestampAfterMaxMs]; !ok {
			c.TimestampAfterMaxMs = diff
		}
	}
	return c, nil
}

// resolver reads effective values (override, else default) of validated
// overrides.
type resolver map[string]string

func (r resolver) get(k string) string {
	if v, ok := r[k]; ok {
		return strings.TrimSpace(v)
	}
	return byName[k].Default
}

func (r resolver) long(k string) int64 {
	n, _ := strconv.ParseInt(r.get(k), 10, 64) // validated
	return n
}

// ms converts a millisecond key to a Duration: negative values are -1
// (unlimited where the key allows it) and values too large for a Duration
// (about 292 years) saturate rather than wrap, so retention.ms set to
// Long.MAX_VALUE, as some tools write for "forever", keeps data forever.
func (r resolver) ms(k string) time.Duration {
	n := r.long(k)
	switch {
	case n < 0:
		return -1
	case n > int64(math.MaxInt64/time.Millisecond):
		return math.MaxInt64
	}
	return time.Duration(n) * time.Millisecond
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("expected one of: %s", strings.Join(allowed, ", "))
	}
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("expected an integer")
		}
		if n < min {
			return fmt.Errorf("value must be at least %d", min)
		}
		return nil
	}
}

func between(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("expected an integer")
		}
		if n < lo || n > hi {
			return fmt.Errorf("value must be between %d and %d (inclusive)", lo, hi)
		}
		return nil
	}
}

func betweenFloat(lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := parseDouble(v)
		if err != nil {
			return err
		}
		if f < lo || f > hi {
			return fmt.Errorf("value must be between %g and %g (inclusive)", lo, hi)
		}
		return nil
	}
}

// gzipLevel is Kafka's GZIP level validator: 1 (fastest) to 9 (smallest),
// or -1 for the codec's default.
func gzipLevel(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return errors.New("expected an integer")
	}
	if n != -1 && (n < 1 || n > 9) {
		return errors.New("value must be between 1 and 9 or equal to -1")
	}
	return nil
}

// checkCleanup accepts a list of delete and compact. Kafka 4.0 would also
// take an empty list (no cleanup at all); MoonMQ has always refused it.
func checkCleanup(v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return errors.New("must not be empty: use delete, compact, or compact,delete")
	}
	for _, p := range items {
		if p != "delete" && p != "compact" {
			return fmt.Errorf("%q is not a cleanup policy: use delete, compact, or compact,delete", p)
		}
	}
	return nil
}

// throttledReplica is one [partitionId]:[brokerId] entry.
var throttledReplica = regexp.MustCompile(`^[0-9]+:[0-9]+$`)

// throttledReplicas is Kafka's ThrottledReplicaListValidator: the literal *
// or a list of partitionId:brokerId pairs (empty allowed).
func throttledReplicas(v string) error {
	items := splitList(v)
	if strings.Join(items, "") == "*" {
		return nil
	}
	for _, item := range items {
		if !throttledReplica.MatchString(item) {
			return fmt.Errorf("%q is not a replica: the value must be the literal '*' or a list of replicas "+
				"in the form [partitionId]:[brokerId],[partitionId]:[brokerId],...", item)
		}
	}
	return nil
}

// remoteStorage refuses enabling tiered storage with the reason Kafka gives
// when the broker has no remote log storage system.
func remoteStorage(v string) error {
	if strings.EqualFold(v, "true") {
		return errors.New("tiered storage functionality is disabled in the broker (MoonMQ has no tiered storage): " +
			"the topic cannot be configured with remote log storage")
	}
	return nil
}

// splitList splits a LIST value as Kafka does: on commas, items trimmed, an
// all-blank value is the empty list.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
