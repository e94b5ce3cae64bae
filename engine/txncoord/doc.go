// Package txncoord is the transaction coordinator (KIP-98, with the
// server-side defenses of KIP-890): for every transactional id whose
// __transaction_state partition this node leads, it owns the producer id
// and epoch, the transaction's state (Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort), the partitions in it, its
// timeout and start time, and the end-transaction markers still to be
// written to those partitions. It is built on engine/coord as the group
// coordinator is: one shard per __transaction_state partition, replayed
// from the log when this node becomes its leader, every transition
// appended as one record (Kafka's TransactionLogKey/Value, so Kafka's tools
// read them) and applied in the same operation, replies released only once
// the record is durable on the ISR.
//
// Invariants:
//   - A transition is applied in memory in the operation that appends its
//     record; an append that fails reloads the shard from its log (the
//     runtime), so memory never holds a transition the log lost.
//   - Markers of a PrepareCommit or PrepareAbort are handed to the marker
//     writer only once that Prepare record is durable: a crash can never
//     leave markers for a decision the log does not hold. A shard that
//     loads a Prepare* (after a failover) sends its markers again, with its
//     own coordinator epoch (the leader epoch of its partition).
//   - CompleteCommit / CompleteAbort is written only once every partition
//     of the transaction acknowledged its marker (durably). It starts no
//     fsync of its own: losing it only replays the Prepare*.
//   - An AddPartitions of the producer (same id and epoch) that arrives
//     while its previous transaction writes markers is held, a bounded
//     number per id for a bounded time, and applied only after Complete*,
//     in the same operation; never before.
//   - The epoch only grows for a producer id; a producer id whose epoch is
//     exhausted is replaced by a new one.
//   - __transaction_state is compacted: a replay may see only the latest
//     record of each transactional id, so an id's state is its latest
//     record, and an id is forgotten (expired) only by a tombstone.
//   - Time is an input (now), as in every state machine of MoonMQ: the
//     timeouts and expirations run from Tick.
package txncoord
