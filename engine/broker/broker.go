// Package broker owns the partitions hosted on this node: it opens, creates
// and deletes their logs as the metadata says, and implements the single-node
// semantics of produce (validation, idempotent-producer dedup, timestamps,
// durability) and fetch over them. It knows nothing about sockets or the
// Kafka wire format beyond the RecordBatch bytes it stores.
//
// Invariants: a partition's appends are serialised by its mutex, which also
// guards its producer state, so sequence checks see the log in write order;
// a Partition value stays valid after its topic is deleted (operations then
// fail with ErrUnknownPartition), so callers never race with deletion.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/vfs"
)

// Errors of this package.
var (
	// ErrUnknownPartition is returned for a topic or partition this node does not host.
	ErrUnknownPartition = errors.New("unknown topic or partition")
	// ErrTransactionsUnsupported rejects transactional batches until
	// transactions are implemented.
	ErrTransactionsUnsupported = errors.New("transactions are not supported yet")
)

// Options configures a Broker.
type Options struct {
	DataDir string
	Logger  *slog.Logger
	// RetentionCheckInterval is how often retention and time-based rolls run.
	RetentionCheckInterval time.Duration
	Now                    func() time.Time
	// GroupCommitWindow is every partition's log.Options.GroupCommitWindow:
	// the shortest time between two fsync rounds of one partition.
	GroupCommitWindow time.Duration
	// OnFsync observes every partition's fsync rounds (see log.Options).
	OnFsync func(d time.Duration, appends uint64)
	// ProducerIDExpiration forgets an idempotent producer's sequences when
	// it has not written for this long (Kafka's producer.id.expiration.ms).
	ProducerIDExpiration time.Duration
	// FS is the filesystem of the partition logs (default vfs.OS); tests
	// use a MemFS or a fault-injecting wrapper.
	FS vfs.FS
	// Files is the cache of open segment files every partition shares,
	// bounding their descriptors (default: DefaultFileCacheCapacity).
	Files *log.FileCache
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ProducerIDExpiration <= 0 {
		o.ProducerIDExpiration = 24 * time.Hour
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Files == nil {
		o.Files = log.NewFileCache(DefaultFileCacheCapacity)
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

// Broker is the set of partitions on this node.
type Broker struct {
	opts Options

	mu     sync.RWMutex
	parts  map[TopicPartition]*Partition
	closed bool

	lock *os.File // flock on <data>/.lock, held until Close

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open prepares the data directory. Partitions are opened by EnsurePartition,
// driven by metadata; directories that metadata no longer names are left
// alone until RemoveOrphans is called with the full topic list.
func Open(opts Options) (*Broker, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: create data dir: %w", err)
	}
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: opts, parts: make(map[TopicPartition]*Partition), lock: lock, stop: make(chan struct{})}
	b.wg.Add(1)
	go b.housekeeping()
	return b, nil
}

// DataDir is the directory holding every partition.
func (b *Broker) DataDir() string { return b.opts.DataDir }

// Dir is the directory of one partition's log.
func (b *Broker) Dir(tp TopicPartition) string {
	return filepath.Join(b.opts.DataDir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// EnsurePartition opens (creating if needed) a partition's log with the
// topic's config overrides. It is idempotent; an already open partition gets
// the configs applied.
func (b *Broker) EnsurePartition(tp TopicPartition, overrides map[string]string) (*Partition, error) {
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
		return p, p.setConfig(cfg)
	}
	_, statErr := os.Stat(b.Dir(tp))
	p, err := openPartition(tp, b.Dir(tp), cfg, b.opts)
	if err != nil {
		return nil, fmt.Errorf("broker: open %s-%d: %w", tp.Topic, tp.Partition, err)
	}
	if os.IsNotExist(statErr) {
		// A new partition directory is durable only once its parent's
		// entry is: fsync the data directory.
		if err := log.SyncDir(b.opts.FS, b.opts.DataDir); err != nil {
			_ = p.log.Close()
			return nil, fmt.Errorf("broker: sync data dir: %w", err)
		}
	}
	b.parts[tp] = p
	return p, nil
}

// UpdateConfigs applies new config overrides to every open partition of a topic.
func (b *Broker) UpdateConfigs(topic string, overrides map[string]string) error {
	cfg, err := topicconfig.Resolve(overrides)
	if err != nil {
		return err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	var errs []error
	for tp, p := range b.parts {
		if tp.Topic == topic {
			errs = append(errs, p.setConfig(cfg))
		}
	}
	return errors.Join(errs...)
}

// DeleteTopic closes and removes every partition of a topic.
func (b *Broker) DeleteTopic(topic string) error {
	b.mu.Lock()
	var victims []*Partition
	for tp, p := range b.parts {
		if tp.Topic == topic {
			victims = append(victims, p)
			delete(b.parts, tp)
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, p := range victims {
		errs = append(errs, p.delete())
	}
	// Remove directories of partitions that were never opened (e.g. metadata
	// deleted while this node was down).
	errs = append(errs, b.removeDirs(func(tp TopicPartition) bool { return tp.Topic == topic }))
	return errors.Join(errs...)
}

// RemoveOrphans deletes partition directories that metadata does not name,
// e.g. a topic deleted by the controller while this node was down. keep
// reports whether a partition is still wanted.
func (b *Broker) RemoveOrphans(keep func(TopicPartition) bool) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.removeDirs(func(tp TopicPartition) bool {
		_, open := b.parts[tp]
		return !open && !keep(tp)
	})
}

func (b *Broker) removeDirs(match func(TopicPartition) bool) error {
	entries, err := os.ReadDir(b.opts.DataDir)
	if err != nil {
		return fmt.Errorf("broker: list data dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		tp, ok := parseDirName(e.Name())
		if !e.IsDir() || !ok || !match(tp) {
			continue
		}
		b.opts.Logger.Info("removing partition directory", "dir", e.Name())
		errs = append(errs, os.RemoveAll(filepath.Join(b.opts.DataDir, e.Name())))
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

// Partition returns an open partition.
func (b *Broker) Partition(tp TopicPartition) (*Partition, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.parts[tp]
	if !ok {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, tp.Topic, tp.Partition)
	}
	return p, nil
}

// Partitions lists the open partitions, sorted.
func (b *Broker) Partitions() []*Partition {
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

// housekeeping enforces retention and time-based segment rolls.
func (b *Broker) housekeeping() {
	defer b.wg.Done()
	t := time.NewTicker(b.opts.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.EnforceRetention()
			b.expireProducers()
		}
	}
}

// EnforceRetention runs retention on every partition now. It is called
// periodically; tests call it directly.
func (b *Broker) EnforceRetention() {
	for _, p := range b.Partitions() {
		n, err := p.log.EnforceRetention()
		if err != nil && !errors.Is(err, log.ErrClosed) {
			b.opts.Logger.Warn("retention failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
		} else if n > 0 {
			b.opts.Logger.Debug("retention deleted segments", "topic", p.tp.Topic, "partition", p.tp.Partition, "segments", n)
		}
	}
}

func (b *Broker) expireProducers() {
	now := b.opts.Now().UnixMilli()
	for _, p := range b.Partitions() {
		p.mu.Lock()
		p.producers.Expire(now, b.opts.ProducerIDExpiration.Milliseconds())
		p.mu.Unlock()
	}
}

// Close flushes and closes every partition, writing clean-shutdown checkpoints.
func (b *Broker) Close() error {
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
	all = append(all, b.lock.Close()) // releases the flock
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
