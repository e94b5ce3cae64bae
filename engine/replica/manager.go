// Package replica owns the partitions hosted on this node: it opens, creates
// and deletes their logs as the metadata says, and implements the single-node
// semantics of produce (validation, idempotent-producer dedup, timestamps,
// durability) and fetch over them. It knows nothing about sockets or the
// Kafka wire format beyond the RecordBatch bytes it stores. A partition owns
// its offsets and rules: readers ask it (Fetch, with the isolation level
// and leader-epoch checks Kafka applies; ListOffset; DeleteRecords; Stats),
// never its log, and the leader epoch it stamps on appends and checks
// requests against is its own state (MakeLeader).
//
// A partition has a replication role (replication.go): alone on its node
// (the default: single node, replication factor 1, exactly the behaviour
// before replication), a replicated leader whose high watermark, acks=all
// and follower fetches are decided by an ISR state machine it is handed
// (BecomeLeader; the ISR interface is what *cluster/replication.Leader
// implements, so this package never imports the cluster), or a follower
// that refuses clients and takes the leader's batches (BecomeFollower,
// AppendAsFollower, TruncateTo). The node decides roles from the
// controller's metadata; net/peer fetches for followers.
//
// Invariants: a partition's appends are serialised by its mutex, which also
// guards its producer state, so sequence checks see the log in write order;
// a Partition value stays valid after its topic is deleted (operations then
// fail with ErrUnknownPartition), so callers never race with deletion.
//
// Partitions that cannot serve are kept, not dropped: one that failed to
// open is offline (ErrPartitionOffline) and one whose log failed an I/O
// operation takes no appends; a healer goroutine retries both with a
// backoff (1s doubling to 30s) and brings them back when the cause (a full
// disk, descriptors, a transient I/O error) has passed, while the rest of
// the node serves. Each open partition holds one file descriptor (its
// active segment); Capacity says how many fit in the descriptor limit, and
// creates beyond it are refused before they are applied (CheckCapacity).
//
// A partition directory is named after its topic's name, which a deleted
// and re-created topic shares; it records the id of the topic it belongs
// to (partition.metadata, as Kafka's), and opening it for another id
// removes the old topic's data first (a delete this node never applied:
// it was down, or stopped before it got to it).
package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/vfs"
)

// Errors of this package.
var (
	// ErrUnknownPartition is returned for a topic or partition this node does not host.
	ErrUnknownPartition = errors.New("unknown topic or partition")
	// ErrPartitionOffline: the partition is hosted here but cannot be opened
	// (or cannot take appends) until its storage problem passes (Kafka
	// KAFKA_STORAGE_ERROR). The healer retries it.
	ErrPartitionOffline = errors.New("partition offline")
	// ErrOverCapacity: hosting more partitions would exceed the file
	// descriptor budget.
	ErrOverCapacity = errors.New("not enough file descriptors for more partitions")
	// ErrInvalidTimestamp: a CreateTime record's timestamp is further from
	// the broker's clock than the topic's message.timestamp.before.max.ms or
	// message.timestamp.after.max.ms allows (Kafka INVALID_TIMESTAMP).
	ErrInvalidTimestamp = errors.New("record timestamp out of range")
)

// Options configures a Manager.
type Options struct {
	DataDir string
	Logger  *slog.Logger
	// RetentionCheckInterval is how often retention and time-based rolls run.
	RetentionCheckInterval time.Duration
	// Clock is the time of record timestamps, retention, heal backoff and
	// every log's flusher, and runs the housekeeping and healer loops
	// (default clock.Real); it is used from every log's goroutines, so it
	// must be safe for concurrent use.
	Clock clock.Clock
	// GroupCommitWindow is every partition's log.Options.GroupCommitWindow:
	// the shortest time between two fsync rounds of one partition.
	GroupCommitWindow time.Duration
	// NoGroupCommitWindow names the topics whose logs fsync back to back
	// instead (nil: none): the transaction coordinator's, whose writes come
	// one after another within each transaction, each waited for, so a
	// window would only add its length to every transaction's latency.
	NoGroupCommitWindow func(topic string) bool
	// OnFsync observes every partition's fsync rounds (see log.Options).
	OnFsync func(d time.Duration, appends uint64)
	// Cleaner, if set, is the log cleaner (engine/cleaner's Manager):
	// truncation and deletion of a partition abort its cleaning and keep
	// it paused until they are done, and retention of a compact,delete
	// topic skips a partition being cleaned (Kafka's LogManager does both).
	Cleaner CleanerControl
	// ProducerIDExpiration forgets an idempotent producer's sequences when
	// it has not written for this long (Kafka's producer.id.expiration.ms).
	ProducerIDExpiration time.Duration
	// FS is the filesystem of the partition logs (default vfs.OS); tests
	// use a MemFS or a fault-injecting wrapper.
	FS vfs.FS
	// Files is the cache of open segment files every partition shares,
	// bounding their descriptors (default: DefaultFileCacheCapacity).
	Files *log.FileCache
	// FileCacheCapacity is the capacity Files was made with (counted in
	// the descriptor budget).
	FileCacheCapacity int
	// FDLimit is the process's file descriptor limit (default: the soft
	// RLIMIT_NOFILE, which Go raises to the hard limit at start).
	FDLimit int
	// FDReserve is how many descriptors are kept for everything but
	// partitions: client connections, the metadata store, listeners
	// (default 256; the node adds its connection limit).
	FDReserve int
	// Replicated is set on a clustered node, where the metadata gives every
	// partition its role: each partition opens as a follower of nobody,
	// refusing clients (NOT_LEADER_OR_FOLLOWER) until BecomeLeader or
	// BecomeFollower, so nothing is ever appended and acknowledged by a
	// replica that is on its own only because it has not been told its role
	// yet (a leader elected meanwhile would truncate it). Alone, partitions
	// open leading by themselves.
	Replicated bool
	// OnOnline, if set, is called (from the healer's goroutine, with no
	// lock of the manager held) for each partition that was offline and
	// is serving again, so the node can give it its role: on a cluster it
	// opened as a follower of nobody.
	OnOnline func(TopicPartition)
	// HighWatermarkCheckpointInterval is how often replicated partitions
	// persist their high watermark (Kafka's
	// replica.high.watermark.checkpoint.interval.ms; default 5s).
	HighWatermarkCheckpointInterval time.Duration
	// HealInterval is how often the healer looks for partitions to retry
	// (default 1s); MaxHealBackoff caps the wait between retries of one
	// partition (default 30s).
	HealInterval   time.Duration
	MaxHealBackoff time.Duration

	// deleteWaits is a test seam: DeleteTopic calls it when it waits for
	// a heal's open of one of the topic's partitions.
	deleteWaits func()
}

// DefaultFileCacheCapacity is the idle segment files a broker keeps open
// when Options.Files is not set.
const DefaultFileCacheCapacity = 1024

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetentionCheckInterval <= 0 {
		o.RetentionCheckInterval = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = 24 * time.Hour
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Files == nil {
		o.FileCacheCapacity = DefaultFileCacheCapacity
		o.Files = log.NewFileCache(o.FileCacheCapacity)
	}
	if o.FDLimit <= 0 {
		o.FDLimit = fdLimit()
	}
	if o.FDReserve <= 0 {
		o.FDReserve = 256
	}
	if o.HighWatermarkCheckpointInterval <= 0 {
		o.HighWatermarkCheckpointInterval = 5 * time.Second
	}
	if o.HealInterval <= 0 {
		o.HealInterval = time.Second
	}
	if o.MaxHealBackoff <= 0 {
		o.MaxHealBackoff = 30 * time.Second
	}
}

// Validate reports a misconfiguration.
func (o *Options) Validate() error {
	if o.DataDir == "" {
		return errors.New("broker: data directory is required")
	}
	return nil
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Manager is the set of partitions on this node.
type Manager struct {
	opts Options

	mu      sync.RWMutex
	parts   map[TopicPartition]*Partition
	offline map[TopicPartition]*offlinePartition
	closed  bool

	lock   io.Closer  // flock on <data>/.lock, held until Close
	healMu sync.Mutex // one heal pass at a time (the healer, HealNow)

	stop chan struct{}
	wg   sync.WaitGroup
}

// offlinePartition is a partition the metadata assigns here that could not
// be opened; the healer retries it.
type offlinePartition struct {
	overrides map[string]string
	// epoch is the leader epoch the partition is led in; a heal stamps it
	// on the opened partition (MakeLeader), so appends after the heal
	// carry the epoch the metadata gave.
	epoch int32
	// id is the topic id the partition is opened for (zero: unchecked).
	id   TopicID
	err  error
	heal backoff
	// opening is set while the healer opens the partition without the
	// broker lock; it is closed when that attempt is over, so a delete of
	// the topic waits for it instead of racing it on the same files.
	opening chan struct{}
}

// backoff spaces out retries: 1 HealInterval, doubling up to MaxHealBackoff.
type backoff struct {
	next  time.Time
	delay time.Duration
}

func (b *backoff) due(now time.Time) bool { return !now.Before(b.next) }

func (b *backoff) failed(now time.Time, first, limit time.Duration) {
	b.delay = min(max(2*b.delay, first), limit)
	b.next = now.Add(b.delay)
}

// Open prepares the data directory. Partitions are opened by EnsurePartition,
// driven by metadata; directories that metadata no longer names are left
// alone until RemoveOrphans is called with the full topic list.
func Open(opts Options) (*Manager, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	_, statErr := opts.FS.Stat(opts.DataDir)
	if err := opts.FS.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: create data dir: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new data directory survives a power cut only once its parent's
		// entry is durable.
		if err := log.SyncDir(opts.FS, filepath.Dir(filepath.Clean(opts.DataDir))); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	lock, err := lockDataDir(opts.FS, opts.DataDir)
	if err != nil {
		return nil, err
	}
	b := &Manager{opts: opts, parts: make(map[TopicPartition]*Partition), offline: map[TopicPartition]*offlinePartition{},
		lock: lock, stop: make(chan struct{})}
	b.wg.Add(3)
	go b.every(opts.RetentionCheckInterval, b.housekeeping)
	go b.every(opts.HighWatermarkCheckpointInterval, b.checkpointHighWatermarks)
	// The healer retries offline partitions and failed logs, each on its
	// own backoff.
	go b.every(opts.HealInterval, func() { b.heal(false) })
	return b, nil
}

// DataDir is the directory holding every partition.
func (b *Manager) DataDir() string { return b.opts.DataDir }

// Dir is the directory of one partition's log.
func (b *Manager) Dir(tp TopicPartition) string {
	return filepath.Join(b.opts.DataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// EnsurePartition opens (creating if needed) a partition's log with the
// topic's config overrides, keeping the leader epoch it has (0 for a new
// one). It is idempotent; an already open partition gets the configs
// applied. A partition that cannot be opened (or would not fit in the
// descriptor budget) is registered offline, reported, and retried by the
// healer; the error wraps ErrPartitionOffline. It does not check which
// topic id the directory belongs to (EnsureLeader and EnsureFollower do).
func (b *Manager) EnsurePartition(tp TopicPartition, overrides map[string]string) (*Partition, error) {
	return b.ensure(tp, TopicID{}, overrides, keepEpoch)
}

// EnsureLeader is EnsurePartition for a partition of the topic with id
// that this node leads in epoch: the partition stamps epoch on its appends
// (MakeLeader), and so does it once healed if it has to wait offline. A
// directory left by an earlier topic of the same name (another id) is
// removed before the partition is created.
func (b *Manager) EnsureLeader(tp TopicPartition, id TopicID, overrides map[string]string, epoch int32) (*Partition, error) {
	return b.ensure(tp, id, overrides, max(epoch, 0))
}

// EnsureFollower is EnsureLeader for a replica this node does not lead: it
// keeps the leader epoch the partition has.
func (b *Manager) EnsureFollower(tp TopicPartition, id TopicID, overrides map[string]string) (*Partition, error) {
	return b.ensure(tp, id, overrides, keepEpoch)
}

// TopicID is a topic's id (a UUID), which tells a topic from an earlier
// one of the same name.
type TopicID = [16]byte

// keepEpoch asks ensure to leave the leader epoch as it is.
const keepEpoch = -1

func (b *Manager) ensure(tp TopicPartition, id TopicID, overrides map[string]string, epoch int32) (*Partition, error) {
	cfg, err := topicconfig.Resolve(overrides)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, log.ErrClosed
	}
	if p, ok := b.parts[tp]; ok {
		if epoch != keepEpoch {
			p.MakeLeader(epoch)
		}
		return p, p.setConfig(cfg)
	}
	if o, ok := b.offline[tp]; ok {
		o.overrides = overrides
		if epoch != keepEpoch {
			o.epoch = epoch
		}
		if id != (TopicID{}) {
			o.id = id
		}
		return nil, b.offlineErr(tp, o)
	}
	epoch = max(epoch, 0)
	if n := len(b.parts); n >= b.capacity() {
		err := fmt.Errorf("%w: %d partitions open, the budget is %d", ErrOverCapacity, n, b.capacity())
		return nil, b.markOffline(tp, id, overrides, epoch, err)
	}
	p, err := b.openLocked(tp, id, cfg)
	if err != nil {
		return nil, b.markOffline(tp, id, overrides, epoch, err)
	}
	p.MakeLeader(epoch)
	return p, nil
}

// openLocked opens a partition and adds it. Caller holds b.mu.
func (b *Manager) openLocked(tp TopicPartition, id TopicID, cfg topicconfig.Config) (*Partition, error) {
	p, err := b.open(tp, id, cfg)
	if err != nil {
		return nil, err
	}
	b.parts[tp] = p
	return p, nil
}

// open opens (creating if needed) a partition's log, making a new
// directory durable; with an id, the directory is the topic's
// (claimDir). It takes no broker lock.
func (b *Manager) open(tp TopicPartition, id TopicID, cfg topicconfig.Config) (*Partition, error) {
	dir := b.Dir(tp)
	_, statErr := b.opts.FS.Stat(dir)
	if id != (TopicID{}) {
		if err := b.claimDir(tp, dir, id); err != nil {
			return nil, err
		}
	}
	p, err := openPartition(tp, dir, cfg, b.opts)
	if err != nil {
		return nil, err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new partition directory is durable only once its parent's
		// entry is: fsync the data directory.
		if err := log.SyncDir(b.opts.FS, b.opts.DataDir); err != nil {
			_ = p.log.Close()
			return nil, fmt.Errorf("sync data dir: %w", err)
		}
	}
	return p, nil
}

// markOffline records a partition that could not be opened. Caller holds b.mu.
func (b *Manager) markOffline(tp TopicPartition, id TopicID, overrides map[string]string, epoch int32, cause error) error {
	o := &offlinePartition{overrides: overrides, epoch: epoch, id: id, err: cause}
	o.heal.failed(b.opts.Clock.Now(), b.opts.HealInterval, b.opts.MaxHealBackoff)
	b.offline[tp] = o
	b.opts.Logger.Error("partition offline: cannot open it; retrying, the rest of the node serves",
		"topic", tp.Topic, "partition", tp.Partition, "err", cause)
	return b.offlineErr(tp, o)
}

func (b *Manager) offlineErr(tp TopicPartition, o *offlinePartition) error {
	return fmt.Errorf("%w: %s-%d: %w", ErrPartitionOffline, tp.Topic, tp.Partition, o.err)
}

// Capacity is how many partitions this node can hold open within its file
// descriptor limit: each pins one descriptor (its active segment's .log);
// FDReserve and the segment file cache take the rest.
func (b *Manager) Capacity() int { return b.capacity() }

func (b *Manager) capacity() int {
	return max(b.opts.FDLimit-b.opts.FDReserve-b.opts.FileCacheCapacity, 0)
}

// CheckCapacity refuses (ErrOverCapacity, with what to do) hosting n more
// partitions when they would not fit in the descriptor budget. Creates call
// it before they are applied, so a create is never half done.
func (b *Manager) CheckCapacity(n int) error {
	b.mu.RLock()
	have := len(b.parts) + len(b.offline)
	b.mu.RUnlock()
	limit := b.capacity()
	if have+n <= limit {
		return nil
	}
	return fmt.Errorf("%w: this node holds %d partitions and can hold %d with its file descriptor limit of %d "+
		"(%d kept for connections and the metadata store, %d for the segment file cache); "+
		"raise the limit (ulimit -n, systemd LimitNOFILE) or lower --max-connections",
		ErrOverCapacity, have, limit, b.opts.FDLimit, b.opts.FDReserve, b.opts.FileCacheCapacity)
}

// UpdateConfigs applies new config overrides to every open partition of a topic.
func (b *Manager) UpdateConfigs(topic string, overrides map[string]string) error {
	cfg, err := topicconfig.Resolve(overrides)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for tp, p := range b.parts {
		if tp.Topic == topic {
			errs = append(errs, p.setConfig(cfg))
		}
	}
	for tp, o := range b.offline {
		if tp.Topic == topic {
			o.overrides = overrides
		}
	}
	return errors.Join(errs...)
}

// DeleteTopic closes and removes every partition of a topic.
func (b *Manager) DeleteTopic(topic string) error {
	b.mu.Lock()
	// A heal opening one of its partitions finishes first: it must not
	// work on files this delete removes (or a re-created topic reuses).
	for {
		var busy chan struct{}
		for tp, o := range b.offline {
			if tp.Topic == topic && o.opening != nil {
				busy = o.opening
				break
			}
		}
		if busy == nil {
			break
		}
		b.mu.Unlock()
		if b.opts.deleteWaits != nil {
			b.opts.deleteWaits()
		}
		<-busy
		b.mu.Lock()
	}
	var victims []*Partition
	for tp, p := range b.parts {
		if tp.Topic == topic {
			victims = append(victims, p)
			delete(b.parts, tp)
		}
	}
	for tp := range b.offline {
		if tp.Topic == topic {
			delete(b.offline, tp)
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, p := range victims {
		// No cleaning may work on files the delete removes.
		resume := b.opts.pauseCleaning(p.tp)
		errs = append(errs, p.delete())
		resume()
	}
	// Remove directories of partitions that were never opened (e.g. metadata
	// deleted while this node was down).
	errs = append(errs, b.removeDirs(func(tp TopicPartition) bool { return tp.Topic == topic }))
	return errors.Join(errs...)
}

// RemoveOrphans deletes partition directories that metadata does not name,
// e.g. a topic deleted by the controller while this node was down. keep
// reports whether a partition is still wanted.
func (b *Manager) RemoveOrphans(keep func(TopicPartition) bool) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.removeDirs(func(tp TopicPartition) bool {
		_, open := b.parts[tp]
		_, offline := b.offline[tp]
		return !open && !offline && !keep(tp)
	})
}

func (b *Manager) removeDirs(match func(TopicPartition) bool) error {
	entries, err := b.opts.FS.ReadDir(b.opts.DataDir)
	if err != nil {
		return fmt.Errorf("broker: list data dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		tp, ok := parseDirName(e.Name)
		if !e.IsDir || !ok || !match(tp) {
			continue
		}
		b.opts.Logger.Info("removing partition directory", "dir", e.Name)
		errs = append(errs, b.opts.FS.RemoveAll(filepath.Join(b.opts.DataDir, e.Name)))
	}
	return errors.Join(errs...)
}

// parseDirName splits "<topic>-<partition>"; topic names may contain '-'.
func parseDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(n)}, true
}

// Partition returns an open partition; one that is offline answers
// ErrPartitionOffline.
func (b *Manager) Partition(tp TopicPartition) (*Partition, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.parts[tp]
	if !ok {
		if o, off := b.offline[tp]; off {
			return nil, b.offlineErr(tp, o)
		}
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tp.Topic, tp.Partition)
	}
	return p, nil
}

// StorageFailure is why a partition hosted here cannot take appends: it
// could not be opened (the error wraps ErrPartitionOffline) or its log
// failed an I/O operation (log.Failure); nil while it serves, or when it
// is not hosted here. It is PartitionStates for one partition without the
// statistics, cheap enough to poll: the node reports each replica's
// storage to the controller as it changes.
func (b *Manager) StorageFailure(tp TopicPartition) error {
	b.mu.RLock()
	p, ok := b.parts[tp]
	o, off := b.offline[tp]
	var err error
	if off {
		err = b.offlineErr(tp, o)
	}
	b.mu.RUnlock()
	if ok {
		return p.log.Failure()
	}
	return err
}

// Partitions lists the open partitions, sorted.
func (b *Manager) Partitions() []*Partition {
	b.mu.RLock()
	out := make([]*Partition, 0, len(b.parts))
	for _, p := range b.parts {
		out = append(out, p)
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		return out[i].tp.Partition < out[j].tp.Partition
	})
	return out
}

// FileCacheStats describes the segment file cache shared by the partitions.
func (b *Manager) FileCacheStats() log.FileCacheStats { return b.opts.Files.Stats() }

// PartitionState is what an operator needs to know about one partition the
// metadata assigns to this node.
type PartitionState struct {
	TopicPartition
	// Online: the partition takes appends and serves reads. When it does
	// not, Error says why (it could not be opened, or its log failed an
	// I/O operation) and the healer is retrying it.
	Online bool
	Error  string
	// CorruptRanges are damaged stretches of an online partition's log:
	// their offsets answer a corruption error, everything else is served.
	CorruptRanges []log.CorruptRange
	Stats         log.Stats // zero for a partition that could not be opened
	// Following is set while the replica follows a leader it has had a
	// fetch answer from (in the current leadership); FollowerLag is then
	// its lag behind that leader in offsets (Partition.FollowerLag).
	Following   bool
	FollowerLag int64
	// LastStable is the last stable offset (the high watermark unless a
	// transaction holds it back) and OpenTransactions how many
	// transactions are open on the partition.
	LastStable       int64
	OpenTransactions int
}

// PartitionStates describes every partition hosted here, online or not,
// sorted by topic and partition.
func (b *Manager) PartitionStates() []PartitionState {
	var out []PartitionState
	for _, p := range b.Partitions() {
		st := PartitionState{TopicPartition: p.tp, Online: true, Stats: p.Stats(), CorruptRanges: p.log.CorruptRanges()}
		if err := p.log.Failure(); err != nil {
			st.Online, st.Error = false, err.Error()
		}
		st.FollowerLag, st.Following = p.FollowerLag()
		st.LastStable, st.OpenTransactions = p.TxnState()
		out = append(out, st)
	}
	b.mu.RLock()
	for tp, o := range b.offline {
		out = append(out, PartitionState{TopicPartition: tp, Error: o.err.Error()})
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// every runs fn every interval until Close (a background loop of the broker).
func (b *Manager) every(interval time.Duration, fn func()) {
	defer b.wg.Done()
	t := b.opts.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C():
			fn()
		}
	}
}

// housekeeping enforces retention and time-based segment rolls, and
// forgets idle producers.
func (b *Manager) housekeeping() {
	b.EnforceRetention()
	b.expireProducers()
}

// HealNow retries every offline partition and failed log at once, ignoring
// their backoff (tests; an operator's nudge). It returns how many are still
// not serving.
func (b *Manager) HealNow() int { return b.heal(true) }

func (b *Manager) heal(force bool) (stillDown int) {
	b.healMu.Lock()
	defer b.healMu.Unlock()
	now := b.opts.Clock.Now()
	// Offline partitions are opened without the broker lock (recovery can
	// take a while; produce, fetch and /readyz must not wait for it), then
	// added if their topic still exists.
	type retry struct {
		tp TopicPartition
		o  *offlinePartition
	}
	var due []retry
	b.mu.Lock()
	for tp, o := range b.offline {
		if b.closed || o.opening != nil || (!force && !o.heal.due(now)) {
			stillDown++
			continue
		}
		due = append(due, retry{tp, o})
	}
	b.mu.Unlock()
	var online []TopicPartition
	defer func() {
		if b.opts.OnOnline != nil {
			for _, tp := range online {
				b.opts.OnOnline(tp)
			}
		}
	}()
	for _, r := range due {
		// Marked opening only now, just before its own open: a topic
		// delete waits for the opens of its own partitions, never for a
		// queue of others' (it runs in the metadata reconciler).
		b.mu.Lock()
		if b.closed || b.offline[r.tp] != r.o {
			if b.closed {
				stillDown++
			} // else deleted meanwhile: gone, not down
			b.mu.Unlock()
			continue
		}
		r.o.opening = make(chan struct{})
		cfg, err := topicconfig.Resolve(r.o.overrides)
		if err == nil && len(b.parts) >= b.capacity() {
			err = fmt.Errorf("%w: %d partitions open, the budget is %d", ErrOverCapacity, len(b.parts), b.capacity())
		}
		b.mu.Unlock()
		var p *Partition
		if err == nil {
			p, err = b.open(r.tp, r.o.id, cfg)
		}
		b.mu.Lock()
		close(r.o.opening)
		r.o.opening = nil
		switch {
		case b.closed:
			b.mu.Unlock()
			if p != nil {
				_ = p.close() // shutting down: keep the data
			}
			stillDown++
			continue
		case err != nil:
			r.o.err = err
			r.o.heal.failed(now, b.opts.HealInterval, b.opts.MaxHealBackoff)
			stillDown++
		default:
			if cfgNow, cerr := topicconfig.Resolve(r.o.overrides); cerr == nil {
				_ = p.setConfig(cfgNow) // changed while it was opening
			}
			p.MakeLeader(r.o.epoch) // as the metadata said, maybe while it was opening
			delete(b.offline, r.tp)
			b.parts[r.tp] = p
			online = append(online, r.tp)
			b.opts.Logger.Info("partition online again", "topic", r.tp.Topic, "partition", r.tp.Partition)
		}
		b.mu.Unlock()
	}
	for _, p := range b.Partitions() {
		if p.log.Failure() == nil {
			continue
		}
		if !force && !p.heal.due(now) {
			stillDown++
			continue
		}
		if err := p.healLog(); err != nil {
			p.heal.failed(now, b.opts.HealInterval, b.opts.MaxHealBackoff)
			b.opts.Logger.Warn("partition still offline", "topic", p.tp.Topic, "partition", p.tp.Partition,
				"err", err, "retry_in", p.heal.delay)
			stillDown++
			continue
		}
		p.heal = backoff{}
	}
	return stillDown
}

// CleanerControl pauses the log cleaner's work on a partition.
type CleanerControl interface {
	// AbortAndPause stops any cleaning of the partition, returns once
	// none runs, and keeps it from being cleaned until resume is called.
	AbortAndPause(topic string, partition int32) (resume func())
	// TryPause pauses the partition unless a cleaning of it runs (ok
	// false).
	TryPause(topic string, partition int32) (resume func(), ok bool)
}

// pauseCleaning aborts and pauses the cleaning of tp, if there is a
// cleaner; the returned resume is never nil.
func (o *Options) pauseCleaning(tp TopicPartition) (resume func()) {
	if o.Cleaner == nil {
		return func() {}
	}
	return o.Cleaner.AbortAndPause(tp.Topic, tp.Partition)
}

// EnforceRetention runs retention on every partition now. It is called
// periodically; tests call it directly.
func (b *Manager) EnforceRetention() {
	for _, p := range b.Partitions() {
		n, err := p.enforceRetention()
		if err != nil && !errors.Is(err, log.ErrClosed) {
			b.opts.Logger.Warn("retention failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
		} else if n > 0 {
			b.opts.Logger.Debug("retention deleted segments", "topic", p.tp.Topic, "partition", p.tp.Partition, "segments", n)
		}
		p.snapshotIfRolled()
	}
}

// checkpointHighWatermarks persists the high watermark of every replicated
// partition that moved (see log.CheckpointHighWatermark); a failure costs
// only a lower high watermark after a restart, so it is logged.
func (b *Manager) checkpointHighWatermarks() {
	for _, p := range b.Partitions() {
		if err := p.log.CheckpointHighWatermark(); err != nil {
			b.opts.Logger.Warn("high watermark not checkpointed", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
		}
	}
}

func (b *Manager) expireProducers() {
	now := b.opts.Clock.Now().UnixMilli()
	for _, p := range b.Partitions() {
		p.mu.Lock()
		p.producers.Expire(now, b.opts.ProducerIDExpiration.Milliseconds())
		if v := p.stable.Load(); v != nil && len(v.Unreplicated) > 0 {
			p.publishStable() // forget completed transactions below the HW
		}
		p.mu.Unlock()
	}
}

// Close flushes and closes every partition, writing clean-shutdown checkpoints.
func (b *Manager) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	parts := b.parts
	b.parts = map[TopicPartition]*Partition{}
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()

	var wg sync.WaitGroup
	errs := make(chan error, len(parts))
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.close()
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if b.lock != nil {
		all = append(all, b.lock.Close()) // releases the flock
	}
	return errors.Join(all...)
}

// WaitAny blocks until any of the channels fires or ctx ends. Long-poll
// fetch uses it over the Changed() channels of the partitions it reads.
// One select over all of them (no goroutine per channel), so a fetch of
// thousands of partitions costs one goroutine while it waits.
func WaitAny(ctx context.Context, chans []<-chan struct{}) {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
		case <-ctx.Done():
		}
		return
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	reflect.Select(cases)
}
