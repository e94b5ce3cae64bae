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
// sequences with a fake clock. A group's protocol is its kind (the kind
// interface: *Classic or *Consumer, later share groups); only the
// protocol's own requests look at the concrete type. Parked requests (a
// JoinGroup waiting for the rebalance, a SyncGroup waiting for the
// leader) are callbacks that the state machine invokes exactly once,
// synchronously, from whichever method completes them.
//
// Groups live in shards, one per partition of the internal
// __consumer_offsets topic, run by engine/coord: a shard replays its
// partition on load (offset commits and group metadata are RecordBatch v2
// records with Kafka's own key/value schemas, OffsetCommitKey/Value and
// GroupMetadataKey/Value), serialises its groups' operations under its own
// lock, appends what they change, runs their timers and the offset
// retention sweep (Tick), and is unloaded (its parked requests answered)
// when it stops serving. The Coordinator only routes a request to the
// shard of PartitionFor(group) and keeps the node-wide view: the topic's
// existence, the cluster's topics, listings across shards. The requests
// of the group protocols and of offsets return a Reply, which the runtime
// releases once what it reveals is durable; the admin views (ListGroups,
// DescribeGroups, ConsumerGroupDescribe, Stats) read the shards' current
// state at once, as before. testdata/datadriven holds scenarios (TestDataDriven) that drive
// the coordinator command by command and show each reply and record.
//
// Invariants:
//   - A response that reveals coordinator state (a commit acknowledgement,
//     fetched offsets, a join or sync result) is sent only after every
//     record its shard appended before it is durable: the reply is a
//     coord.Future, so no handler can skip the wait. After a failed
//     append the shard answers COORDINATOR_NOT_AVAILABLE until the runtime
//     replays it: a rebalance is applied before its metadata is appended,
//     so memory may hold what the log lacks.
//   - In-memory state is applied in log order, the same order replay uses,
//     so a restart rebuilds exactly the acknowledged state.
//   - __consumer_offsets is compacted (cleanup.policy=compact): replay may
//     see only the latest record of each key, with gaps between offsets,
//     tombstones gone after delete.retention.ms, aborted transactional
//     commits and their markers gone. So the state is a function of each
//     key's latest record: whatever removes an offset or a group (expiry,
//     OffsetDelete, DeleteGroups, a deleted topic, a classic group turning
//     KIP-848) writes a tombstone and applies it as replay does (forget),
//     and nothing depends on a superseded record or on a marker outliving
//     its transaction's records (engine/log removes markers only after).
//   - A group is served only from a shard replayed from the whole of its
//     partition: while it loads (and at start, until every partition is
//     replayed, since a group may live outside its hash partition after
//     the topic grew) its requests are answered
//     COORDINATOR_LOAD_IN_PROGRESS, while its partition cannot be read
//     COORDINATOR_NOT_AVAILABLE (and the replay is retried with backoff),
//     and for a partition this node does not host NOT_COORDINATOR.
//   - Bad input (unknown group, wrong generation or epoch, stale member,
//     oversized metadata, a full group) is answered with the Kafka error
//     and never disturbs another group.
//   - engine/group imports nothing from net/ or cluster/; main wires it to
//     the broker's partitions and the metadata controller through Storage
//     and SetTopics.
package group
