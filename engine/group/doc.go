// Package group is MoonMQ's group coordinator: consumer group membership,
// partition assignment and committed offsets, for both of Kafka's group
// protocols.
//
//   - Classic groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the
//     broker elects a leader, relays the members' subscriptions to it and
//     its assignment back to everyone. Eager and cooperative clients, static
//     membership (group.instance.id), MEMBER_ID_REQUIRED, rebalance and
//     session timeouts behave as in Kafka's GroupCoordinator.
//   - Consumer groups (KIP-848, ConsumerGroupHeartbeat): the broker computes
//     the target assignment with a server-side assignor ("uniform" or
//     "range") and reconciles each member towards it, revoking partitions
//     before handing them to their next owner.
//
// A group uses one protocol at a time: an empty group of one kind becomes
// the other on its first join; a non-empty one refuses the other protocol.
//
// The state machines (Classic, Consumer and the offsets of a Group) are
// pure and deterministic: every method takes the current time as an
// argument and performs no I/O, so tests drive join/sync/heartbeat/timeout
// sequences with a fake clock. Parked requests (a JoinGroup waiting for the
// rebalance, a SyncGroup waiting for the leader) are callbacks that the
// state machine invokes exactly once, synchronously, from whichever method
// completes them.
//
// The Coordinator owns every group, serialises all state-machine calls
// under one mutex, runs a small driver goroutine that feeds the clock
// (Tick) and the offset-retention sweep, and makes state durable in the
// internal __consumer_offsets topic through the Storage interface: offset
// commits and group metadata are appended as RecordBatch v2 records with
// Kafka's own key/value schemas (OffsetCommitKey/Value, GroupMetadataKey/
// Value), and replayed on start.
//
// Invariants:
//   - A response that reveals coordinator state (a commit acknowledgement,
//     fetched offsets, a join or sync result) is sent only after every
//     record appended before it is durable (Coordinator.Barrier), so a
//     crash never takes back what a client was told.
//   - In-memory state is applied in log order, the same order replay uses,
//     so a restart rebuilds exactly the acknowledged state.
//   - Bad input (unknown group, wrong generation or epoch, stale member,
//     oversized metadata, a full group) is answered with the Kafka error
//     and never disturbs another group.
//   - engine/group imports nothing from net/ or cluster/; main wires it to
//     the broker's partitions and the metadata controller through Storage
//     and SetTopics.
package group
