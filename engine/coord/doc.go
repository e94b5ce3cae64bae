// Package coord is MoonMQ's coordinator runtime: the machinery a
// coordinator whose state lives in an internal, partitioned topic needs,
// independent of what the state is. The group coordinator
// (__consumer_offsets) runs on it; a transaction coordinator
// (__transaction_state) is meant to.
//
// A Runtime owns one shard per internal partition this node hosts. A shard
// holds the state machine (a State) built from its partition's records and
// is loaded and unloaded on its own, as leadership of the partition moves:
//
//   - Load replays the partition into a fresh State, with no lock held,
//     and serves it only if the whole partition could be read. A partition
//     that cannot be (offline, unreadable) is down: its operations fail
//     with ErrUnavailable and Recheck replays it again, less and less often
//     while it keeps failing. Until its replay is done a shard answers
//     ErrLoading; a partition with no shard answers ErrNotCoordinator.
//   - Recheck also reloads a served shard whose log was rewritten under it
//     (Storage.Generation changed: a heal dropped what was never fsynced),
//     or whose append failed: its State may have applied what the log
//     lacks, so until then the shard appends nothing and releases no
//     reply. Replaying is how its state is rolled back.
//   - Unload fails what the State has parked (State.Unload) and forgets it.
//
// Every call into a State is an operation, run under its shard's own lock
// (never a runtime-wide one), so shards run in parallel and a State needs
// no locking of its own. During an operation the State appends records to
// its partition through Shard.Append: the records hit the page cache, in
// operation order, which is also the order replay applies them in. A reply
// is a Future completed during an operation; the runtime releases it only
// once everything the shard appended by the end of that operation is
// durable. That write → wait-durable → reply sequence is the runtime's, as
// in Kafka's CoordinatorRuntime, so no caller can answer a client with
// state a crash could take back. An operation that appends nothing still
// waits for the shard's earlier appends, since its reply may reveal them.
//
// Time is an input: operations and Tick take it from the caller, and only
// the driver goroutine (Start) reads the clock (Config.Now), so tests need
// no real clock.
//
// Invariants:
//   - A Future's value is returned by Wait only after the records appended
//     by its shard up to its completion are durable in the log the shard
//     was replayed from; a failed append or fsync, or a rewrite of the log
//     (a heal) before the fsync, turns it into ErrUnavailable.
//   - A shard's State is touched only under the shard's lock; the
//     runtime's own lock guards the shard map and is never held during I/O
//     or an operation.
//   - A State is served only when replayed from the whole of its partition
//     at the Storage generation the shard records.
//   - Replay takes a compacted partition as it is: offsets with gaps, and
//     control batches the cleaner emptied (a removed marker kept as its
//     producer's last batch), which hand the State nothing.
//   - engine/coord imports no MoonMQ package but engine/batch.
package coord
