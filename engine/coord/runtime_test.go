package coord_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/coord"
	"github.com/moonmq/moonmq/engine/coord/coordtest"
	"github.com/moonmq/moonmq/internal/syncbuf"
)

// kv is a minimal coordinator state: keys set by records, and parked
// waits for a key to be set (as a JoinGroup waits for the rebalance).
type kv struct {
	sh      *coord.Shard
	vals    map[string]string
	waiters map[string][]*coord.Future[string]
	ticks   []time.Time
	skipped int
}

func newKV(sh *coord.Shard) *kv {
	return &kv{sh: sh, vals: map[string]string{}, waiters: map[string][]*coord.Future[string]{}}
}

func (s *kv) Replay(_ time.Time, r coord.Record) bool {
	if string(r.Key) == "bad" {
		s.skipped++
		return false
	}
	s.vals[string(r.Key)] = string(r.Value)
	return true
}

func (s *kv) Activate(time.Time) {}

func (s *kv) Tick(now time.Time) { s.ticks = append(s.ticks, now) }

func (s *kv) Unload(err error) {
	for _, ws := range s.waiters {
		for _, w := range ws {
			w.Complete(s.sh, "unloaded: "+err.Error())
		}
	}
	s.waiters = nil
}

var now0 = time.Unix(1_000_000, 0)

// put appends k=v and applies it; r completes with the previous value.
func (s *kv) put(k, v string, r *coord.Future[string]) {
	if _, err := s.sh.Append(now0, []batch.Record{{Key: []byte(k), Value: []byte(v)}}); err != nil {
		r.Complete(s.sh, "error: "+err.Error())
		return
	}
	prev := s.vals[k]
	s.vals[k] = v
	r.Complete(s.sh, prev)
	for _, w := range s.waiters[k] {
		w.Complete(s.sh, v)
	}
	delete(s.waiters, k)
}

type env struct {
	log *coordtest.MemLog
	rt  *coord.Runtime[*kv]
}

func newEnv(t *testing.T, log *coordtest.MemLog, partitions ...int32) *env {
	t.Helper()
	if log == nil {
		log = coordtest.NewMemLog()
		_, _ = log.Create(t.Context(), 2)
	}
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour,
		Now: func() time.Time { return now0 }}, log, newKV)
	t.Cleanup(rt.Close)
	rt.Start(partitions)
	<-rt.Loaded()
	return &env{log: log, rt: rt}
}

func (e *env) put(t *testing.T, p int32, k, v string) *coord.Future[string] {
	t.Helper()
	r := coord.NewFuture[string]()
	require.NoError(t, e.rt.Do(p, func(s *kv) { s.put(k, v, r) }))
	return r
}

func (e *env) get(t *testing.T, p int32, k string) *coord.Future[string] {
	t.Helper()
	r := coord.NewFuture[string]()
	require.NoError(t, e.rt.Do(p, func(s *kv) { r.Complete(s.sh, s.vals[k]) }))
	return r
}

func wait[T any](t *testing.T, r *coord.Future[T]) T {
	t.Helper()
	return coordtest.MustWait(t, r)
}

// A reply is released only once what its shard appended is durable, also
// a reply that appended nothing itself but may reveal what was.
func TestReplyWaitsForDurability(t *testing.T) {
	e := newEnv(t, nil, 0, 1)
	e.log.SetAutoSync(false)
	put := e.put(t, 0, "a", "1")
	read := e.get(t, 0, "a")
	other := e.get(t, 1, "a")
	for _, r := range []*coord.Future[string]{put, read} {
		_, ok := r.Ready()
		require.False(t, ok)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := r.Wait(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	v, ok := other.Ready()
	require.True(t, ok, "another shard's reply waits for nothing")
	require.Empty(t, v)

	e.log.Sync()
	require.Empty(t, wait(t, put))
	require.Equal(t, "1", wait(t, read))
	v, ok = e.get(t, 0, "a").Ready()
	require.True(t, ok, "known durable: no wait")
	require.Equal(t, "1", v)
}

func TestReplayOnLoad(t *testing.T) {
	e := newEnv(t, nil, 0, 1)
	wait(t, e.put(t, 0, "a", "1"))
	wait(t, e.put(t, 0, "a", "2"))
	wait(t, e.put(t, 1, "b", "3"))
	e.rt.Close()

	e2 := newEnv(t, e.log, 0, 1)
	require.Equal(t, "2", wait(t, e2.get(t, 0, "a")))
	require.Equal(t, "3", wait(t, e2.get(t, 1, "b")))
	require.Empty(t, wait(t, e2.get(t, 1, "a")), "partitions hold their own state")
}

func TestLoadingAndNotCoordinator(t *testing.T) {
	log := coordtest.NewMemLog()
	_, _ = log.Create(t.Context(), 2)
	_, err := log.Append(0, testBatch("a", "1")) // an empty partition is never read
	require.NoError(t, err)
	release := log.GateReads()
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour}, log, newKV)
	defer rt.Close()
	rt.Start([]int32{0})
	require.ErrorIs(t, rt.Do(0, func(*kv) {}), coord.ErrLoading)
	require.True(t, rt.Loading())
	require.ErrorIs(t, rt.Do(1, func(*kv) {}), coord.ErrNotCoordinator, "not hosted")
	release()
	<-rt.Loaded()
	require.NoError(t, rt.Status(0))
	require.False(t, rt.Loading())

	// Leadership moves: load partition 1, unload partition 0.
	require.NoError(t, rt.Load(1))
	require.NoError(t, rt.Status(1))
	rt.Unload(0, errors.New("leadership moved"))
	require.ErrorIs(t, rt.Do(0, func(*kv) {}), coord.ErrNotCoordinator)
	rt.Close()
	require.ErrorIs(t, rt.Do(1, func(*kv) {}), coord.ErrUnavailable, "closed")
}

func testBatch(k, v string) []byte {
	return batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1},
		[]batch.Record{{Key: []byte(k), Value: []byte(v)}})
}

func TestReplaySkipsUndecodableRecords(t *testing.T) {
	log := coordtest.NewMemLog()
	_, _ = log.Create(t.Context(), 1)
	for _, kv := range [][2]string{{"a", "1"}, {"bad", "x"}, {"b", "2"}} {
		_, err := log.Append(0, testBatch(kv[0], kv[1]))
		require.NoError(t, err)
	}
	e := newEnv(t, log, 0)
	require.NoError(t, e.rt.Do(0, func(s *kv) {
		require.Equal(t, map[string]string{"a": "1", "b": "2"}, s.vals)
		require.Equal(t, 1, s.skipped)
	}))
}

// countingReads counts the reads of partition 0.
type countingReads struct {
	*coordtest.MemLog
	reads atomic.Int64
}

func (s *countingReads) Read(p int32, offset int64, maxBytes int) ([]byte, error) {
	if p == 0 {
		s.reads.Add(1)
	}
	return s.MemLog.Read(p, offset, maxBytes)
}

// A partition that cannot be read is down (its state is not served), the
// others serve; rechecks retry it less and less often until it can be.
func TestDownPartitionIsRetriedWithBackoff(t *testing.T) {
	mem := coordtest.NewMemLog()
	_, _ = mem.Create(t.Context(), 2)
	_, err := mem.Append(0, testBatch("a", "1"))
	require.NoError(t, err)
	mem.FailReads(0, errors.New("bad sector"))
	store := &countingReads{MemLog: mem}
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour}, store, newKV)
	defer rt.Close()
	rt.Start([]int32{0, 1})
	<-rt.Loaded()
	require.ErrorIs(t, rt.Status(0), coord.ErrUnavailable)
	require.ErrorContains(t, rt.Status(0), "bad sector")
	require.NoError(t, rt.Status(1))

	var tries []int
	for i := 1; i <= 40; i++ {
		before := store.reads.Load()
		rt.Recheck()
		if store.reads.Load() > before {
			tries = append(tries, i)
		}
	}
	require.Equal(t, []int{1, 3, 7, 15, 31}, tries, "rechecks that retried the replay")

	mem.FailReads(-1, nil)
	for range 30 {
		rt.Recheck()
	}
	require.NoError(t, rt.Status(0))
}

// A served partition whose log was rewritten (a heal dropped what was
// never fsynced) is unloaded, its parked requests answered, and replayed.
func TestRewrittenLogIsReloaded(t *testing.T) {
	e := newEnv(t, nil, 0)
	wait(t, e.put(t, 0, "a", "1"))
	parked := coord.NewFuture[string]()
	require.NoError(t, e.rt.Do(0, func(s *kv) { s.waiters["z"] = append(s.waiters["z"], parked) }))
	e.log.SetAutoSync(false)
	lost := e.put(t, 0, "a", "2")
	e.log.FailWith(errors.New("no space left on device"))
	_, err := lost.Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable)
	e.log.Heal(0)
	e.log.SetAutoSync(true)
	e.rt.Recheck()
	v := wait(t, parked)
	require.Contains(t, v, "unloaded:")
	require.Equal(t, "1", wait(t, e.get(t, 0, "a")), "what the heal dropped is not served")
}

// A failed append fails its reply and every later one of the shard (a
// later append included) until the shard was replayed: the state may
// hold what the failed append was to write (a group coordinator applies a
// rebalance, then appends the group's metadata), which no reply may
// reveal, even once the log works again.
func TestAppendFailure(t *testing.T) {
	e := newEnv(t, nil, 0)
	e.log.FailWith(errors.New("disk on fire"))
	v, err := e.put(t, 0, "a", "1").Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable)
	require.Contains(t, v, "disk on fire", "the value is still given")
	_, err = e.get(t, 0, "a").Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable)
	// Applied first, then appended: the state is ahead of the log.
	require.NoError(t, e.rt.Do(0, func(s *kv) {
		s.vals["x"] = "1"
		_, _ = s.sh.Append(now0, []batch.Record{{Key: []byte("x"), Value: []byte("1")}})
	}))
	e.log.FailWith(nil)
	_, err = e.put(t, 0, "b", "2").Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable, "nothing is appended to the state the log lacks")
	_, err = e.get(t, 0, "x").Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable, "what the failed append held is never revealed")
	e.rt.Recheck()
	require.Empty(t, wait(t, e.get(t, 0, "x")), "replayed from the log")
	require.Empty(t, wait(t, e.get(t, 0, "a")), "the failed put was not applied")
	wait(t, e.put(t, 0, "b", "2"))
}

// A log that reads but cannot be written is not replayed whole at every
// recheck: each failed append after a reload waits longer for the next
// one, and an append that succeeds ends the backoff.
func TestAppendFailureReloadBackoff(t *testing.T) {
	mem := coordtest.NewMemLog()
	_, _ = mem.Create(t.Context(), 1)
	_, err := mem.Append(0, testBatch("a", "1"))
	require.NoError(t, err)
	store := &countingReads{MemLog: mem}
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour}, store, newKV)
	defer rt.Close()
	rt.Start([]int32{0})
	<-rt.Loaded()
	e := &env{log: mem, rt: rt}
	mem.FailWith(errors.New("disk on fire"))

	var tries []int
	for i := 1; i <= 40; i++ {
		e.put(t, 0, "k", "v")
		before := store.reads.Load()
		rt.Recheck()
		if store.reads.Load() > before {
			tries = append(tries, i)
		}
	}
	require.Equal(t, []int{1, 3, 7, 15, 31}, tries, "rechecks that replayed the partition")

	mem.FailWith(nil)
	for range 30 {
		rt.Recheck()
	}
	wait(t, e.put(t, 0, "k", "v"))
	mem.FailWith(errors.New("disk on fire again"))
	e.put(t, 0, "k", "w")
	before := store.reads.Load()
	rt.Recheck()
	require.Greater(t, store.reads.Load(), before, "a successful append reset the backoff")
}

// An operation holding one shard does not hold up another's.
func TestShardsRunInParallel(t *testing.T) {
	e := newEnv(t, nil, 0, 1)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.rt.Do(0, func(*kv) {
			close(inside)
			<-release
		})
	}()
	<-inside
	wait(t, e.put(t, 1, "a", "1"))
	close(release)
	require.NoError(t, <-done)
}

func TestTickFeedsTime(t *testing.T) {
	e := newEnv(t, nil, 0, 1)
	at := now0.Add(time.Minute)
	e.rt.Tick(at)
	var got []string
	e.rt.Each(func(p int32, s *kv) { got = append(got, fmt.Sprint(p, s.ticks)) })
	want := fmt.Sprint([]time.Time{at})
	require.Equal(t, []string{"0 " + want, "1 " + want}, got)
}

func TestBatchTooLarge(t *testing.T) {
	log := coordtest.NewMemLog()
	_, _ = log.Create(t.Context(), 1)
	rt := coord.New(coord.Config{Topic: "__state", MaxBatchBytes: 100, TickInterval: time.Hour, RecheckInterval: time.Hour}, log, newKV)
	defer rt.Close()
	rt.Start([]int32{0})
	<-rt.Loaded()
	var err error
	require.NoError(t, rt.Do(0, func(s *kv) {
		_, err = s.sh.Append(now0, []batch.Record{{Key: []byte("k"), Value: make([]byte, 200)}})
	}))
	require.ErrorIs(t, err, coord.ErrBatchTooLarge)
}

// A reply whose records a heal dropped is never acknowledged, even when
// the offsets it waits for are filled again by later appends and fsynced
// before the driver's recheck reloads the shard (nor is a reply revealing
// the dropped state).
func TestHealBeforeRecheckFailsReplies(t *testing.T) {
	e := newEnv(t, nil, 0)
	wait(t, e.put(t, 0, "a", "1"))
	e.log.SetAutoSync(false)
	lost := e.put(t, 0, "a", "2")
	e.log.Heal(0) // the unsynced "a=2" is dropped; no recheck ran yet
	reveal := e.get(t, 0, "a")
	later := e.put(t, 0, "b", "3") // refills the dropped offset
	e.log.Sync()
	_, err := later.Wait(t.Context())
	require.ErrorIs(t, err, coord.ErrUnavailable, "the shard's state is not its log's any more")
	for _, r := range []*coord.Future[string]{lost, reveal} {
		_, ok := r.Ready()
		require.False(t, ok)
		_, err := r.Wait(t.Context())
		require.ErrorIs(t, err, coord.ErrUnavailable)
	}
	e.rt.Recheck()
	require.Equal(t, "1", wait(t, e.get(t, 0, "a")))
}

// txnKV is a kv that also records the producers of its records and the
// transaction markers replay hands it.
type txnKV struct {
	*kv
	seen []string
}

func (s *txnKV) Replay(now time.Time, r coord.Record) bool {
	s.seen = append(s.seen, fmt.Sprintf("record %s@%d producer %d/%d txn %v", r.Key, r.Offset, r.ProducerID, r.ProducerEpoch, r.Transactional))
	return s.kv.Replay(now, r)
}

func (s *txnKV) ReplayMarker(_ time.Time, offset, pid int64, epoch int16, commit bool) {
	s.seen = append(s.seen, fmt.Sprintf("marker @%d producer %d/%d commit %v", offset, pid, epoch, commit))
}

// Replay hands a coordinator the records of transactional batches with
// their producer, and end-transaction markers in log order; a control
// batch of another kind is skipped, and so is a marker the log cleaner
// emptied (compaction keeps one as its producer's last batch), silently.
// The start-up summary counts what the replay read.
func TestReplayTransactionalRecordsAndMarkers(t *testing.T) {
	log := coordtest.NewMemLog()
	_, _ = log.Create(t.Context(), 1)
	plain := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Key: []byte("a"), Value: []byte("1")}})
	txn := batch.Build(batch.Header{Attributes: batch.TransactionalBit, ProducerID: 7, ProducerEpoch: 2},
		[]batch.Record{{Key: []byte("b"), Value: []byte("2")}, {OffsetDelta: 1, Key: []byte("c"), Value: []byte("3")}})
	leaderChange := batch.Build(batch.Header{Attributes: batch.ControlBit, ProducerID: -1, BaseSequence: -1},
		[]batch.Record{{Key: []byte{0, 0, 0, 2}, Value: []byte{0, 0}}})
	cleaned, err := batch.ParseHeader(batch.BuildEndTxnMarker(8, 0, batch.EndTxnMarker{}, 0))
	require.NoError(t, err)
	emptied := batch.Build(cleaned, nil)
	size := 0
	for _, b := range [][]byte{plain, txn, batch.BuildEndTxnMarker(7, 2, batch.EndTxnMarker{Commit: true, CoordinatorEpoch: 3}, 0), leaderChange, emptied} {
		_, err := log.Append(0, b)
		require.NoError(t, err)
		size += len(b)
	}
	var state *txnKV
	var logged syncbuf.Buffer
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		log, func(sh *coord.Shard) *txnKV { state = &txnKV{kv: newKV(sh)}; return state })
	t.Cleanup(rt.Close)
	rt.Start([]int32{0})
	<-rt.Loaded()
	require.NoError(t, rt.Status(0))
	require.Equal(t, []string{
		"record a@0 producer -1/-1 txn false",
		"record b@1 producer 7/2 txn true",
		"record c@2 producer 7/2 txn true",
		"marker @3 producer 7/2 commit true",
	}, state.seen)
	require.NotContains(t, logged.String(), "level=WARN")
	require.Contains(t, logged.String(), fmt.Sprintf(`msg="coordinator loaded" topic=__state partitions=1 partitions_unavailable=0 records=5 bytes=%d`, size))
}

// deferredLog is a MemLog that can append without starting an fsync
// round (coord.DeferredStorage); it counts those appends.
type deferredLog struct {
	*coordtest.MemLog
	deferred atomic.Int64
}

func (d *deferredLog) AppendDeferred(p int32, b []byte) (int64, error) {
	d.deferred.Add(1)
	return d.MemLog.Append(p, b)
}

// Shard.AppendDeferred goes to a storage's AppendDeferred when it has one
// (else to Append), and what it appended is replayed and waited for like
// any append: a reply after it is released only once it is durable.
func TestAppendDeferred(t *testing.T) {
	mem := coordtest.NewMemLog()
	_, _ = mem.Create(t.Context(), 1)
	mem.SetAutoSync(false)
	dl := &deferredLog{MemLog: mem}
	rt := coord.New(coord.Config{Topic: "__state", TickInterval: time.Hour, RecheckInterval: time.Hour,
		Now: func() time.Time { return now0 }}, dl, newKV)
	t.Cleanup(rt.Close)
	rt.Start([]int32{0})
	<-rt.Loaded()

	r := coord.NewFuture[string]()
	require.NoError(t, rt.Do(0, func(s *kv) {
		_, err := s.sh.AppendDeferred(now0, []batch.Record{{Key: []byte("k"), Value: []byte("v")}})
		require.NoError(t, err)
		s.vals["k"] = "v"
		r.Complete(s.sh, "done")
	}))
	require.EqualValues(t, 1, dl.deferred.Load())
	_, ok := r.Ready()
	require.False(t, ok, "the reply waits for the deferred append's durability")
	mem.Sync()
	require.Equal(t, "done", wait(t, r))

	// Replayed like any record.
	rt.Unload(0, errors.New("moved"))
	require.NoError(t, rt.Load(0))
	got := coord.NewFuture[string]()
	require.Eventually(t, func() bool {
		return rt.Do(0, func(s *kv) { got.Complete(s.sh, s.vals["k"]) }) == nil
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, "v", wait(t, got))

	// A storage without AppendDeferred appends as usual.
	e := newEnv(t, nil, 0)
	plain := coord.NewFuture[string]()
	require.NoError(t, e.rt.Do(0, func(s *kv) {
		_, err := s.sh.AppendDeferred(now0, []batch.Record{{Key: []byte("x"), Value: []byte("1")}})
		require.NoError(t, err)
		plain.Complete(s.sh, "ok")
	}))
	require.Equal(t, "ok", wait(t, plain))
	_, end, err := e.log.Bounds(0)
	require.NoError(t, err)
	require.EqualValues(t, 1, end, "the record was appended")
}
