package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/net/protoext"
)

// metadataPoll is how often we re-read metadata while waiting for a topic
// change (create, delete, add partitions) to become visible.
const metadataPoll = 25 * time.Millisecond

// TopicInfo is one row of ListTopics.
type TopicInfo struct {
	Name       string `json:"name"`
	ID         string `json:"id,omitempty"`
	Partitions int    `json:"partitions"`
	// Replicas is the replication factor (replicas of the first partition).
	Replicas int  `json:"replicas"`
	Internal bool `json:"internal"`
	// Records is the sum over partitions of (end offset - log start offset),
	// i.e. records currently retained; -1 if offsets could not be listed.
	// For compacted topics it counts offsets, not surviving records.
	Records int64 `json:"records"`
	// Bytes is the size on disk of the leader replicas, from
	// DescribeLogDirs; -1 if the broker does not support it.
	Bytes int64 `json:"bytes"`
	// CleanupPolicy is the topic's cleanup.policy (delete, compact or
	// both, as the broker spells it); "" when it could not be read (a
	// broker without DescribeConfigs, or no DESCRIBE_CONFIGS permission).
	CleanupPolicy string `json:"cleanup_policy,omitempty"`
	// DirtyRatio is, for a compacted topic, the largest dirty ratio of
	// its partitions' leader replicas (Compaction.DirtyRatio): how much of
	// the topic waits for the log cleaner. -1 when no partition reports
	// it (not compacted, a broker that does not say, such as Kafka, or a
	// partition the cleaner has not looked at yet).
	DirtyRatio float64 `json:"dirty_ratio"`
}

// Compacted reports whether the topic's cleanup policy includes compact.
func (t TopicInfo) Compacted() bool { return PolicyCompacts(t.CleanupPolicy) }

// PolicyCompacts reports whether a cleanup.policy value includes compact
// ("compact", "compact,delete", "delete,compact").
func PolicyCompacts(policy string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == "compact" {
			return true
		}
	}
	return false
}

// PartitionInfo is one partition of DescribeTopic.
type PartitionInfo struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline,omitempty"`
	// LogStart is the first retained offset, -1 if unknown.
	LogStart int64 `json:"log_start"`
	// HighWatermark is the end offset readers see (one past the last
	// committed record), -1 if unknown.
	HighWatermark int64 `json:"high_watermark"`
	// LastStable is the last stable offset: the high watermark, or the
	// first offset of the oldest transaction still open on the partition
	// (read_committed readers stop there). -1 if unknown.
	LastStable int64 `json:"last_stable"`
	// Bytes is the leader replica's size on disk, -1 if unknown.
	Bytes int64 `json:"bytes"`
	// State is "online"; "offline" when it has no leader or its leader's
	// replica cannot serve (MoonMQ: it could not be opened, or its log
	// failed an I/O operation, and the broker retries it; Storage says
	// why); "damaged" when it serves but parts of its log are damaged
	// (Corrupt lists them: their offsets answer CORRUPT_MESSAGE); or
	// "under-replicated" when it serves but some replicas are not in the
	// ISR (down, or catching up).
	State   string         `json:"state"`
	Storage string         `json:"storage_error,omitempty"`
	Corrupt []CorruptRange `json:"corrupt,omitempty"`
	// Compaction is what the log cleaner of the leader's broker knows of
	// a partition of a compacted topic; nil when the broker does not say
	// (Kafka keeps it in broker metrics, off the wire) or its cleaner has
	// not looked at the partition yet.
	Compaction *Compaction `json:"compaction,omitempty"`
	// Err is the partition's load error, if any (e.g. no leader).
	Err error `json:"-"`
}

// CorruptRange is a damaged stretch of a partition's log on its leader:
// offsets [FromOffset, ToOffset) are not served (ToOffset -1: to the end
// of its segment).
type CorruptRange struct {
	FromOffset int64  `json:"from_offset"`
	ToOffset   int64  `json:"to_offset"`
	Reason     string `json:"reason"`
}

// Compaction is the log cleaner's state of a compacted partition's
// leader replica, as a MoonMQ broker reports it in DescribeLogDirs
// (protoext.PartitionCompaction): as of the cleaner's last look at the
// partition and its last cleaning.
type Compaction struct {
	// DirtyRatio is the share, in [0, 1], of the cleanable bytes not
	// cleaned yet (the partition is cleaned once it exceeds
	// min.cleanable.dirty.ratio), DirtyBytes those bytes.
	DirtyRatio float64 `json:"dirty_ratio"`
	DirtyBytes int64   `json:"dirty_bytes"`
	// CompactionDelay is how far past max.compaction.lag.ms the oldest
	// dirty record is (0: within it).
	CompactionDelay time.Duration `json:"compaction_delay"`
	// Cleanings counts the cleanings that ended well since the broker
	// started; LastCleaned is when the last ended (zero: none) and
	// LastDuration how long it took.
	Cleanings    int64         `json:"cleanings"`
	LastCleaned  time.Time     `json:"last_cleaned"`
	LastDuration time.Duration `json:"last_duration"`
	// Cleaning is set while a cleaning runs.
	Cleaning bool `json:"cleaning,omitempty"`
	// Uncleanable says why cleaning the partition failed (the broker does
	// not retry it until it is truncated, re-created or restarted).
	Uncleanable string `json:"uncleanable,omitempty"`
}

func compactionOf(pc protoext.PartitionCompaction) *Compaction {
	c := &Compaction{DirtyRatio: pc.DirtyRatio, DirtyBytes: pc.DirtyBytes,
		CompactionDelay: time.Duration(pc.CompactionDelayMs) * time.Millisecond, Cleanings: pc.Cleanings,
		LastDuration: time.Duration(pc.LastDurationMs) * time.Millisecond, Cleaning: pc.Cleaning, Uncleanable: pc.Uncleanable}
	if pc.LastCleanedMs >= 0 {
		c.LastCleaned = time.UnixMilli(pc.LastCleanedMs)
	}
	return c
}

// partitionState derives PartitionInfo.State from the standard metadata
// and, from a MoonMQ broker, its storage health.
func partitionState(p PartitionInfo, h *protoext.PartitionHealth) string {
	switch {
	case p.Leader < 0 || slices.Contains(p.Offline, p.Leader) || (h != nil && h.Offline):
		return "offline"
	case h != nil && len(h.Corrupt) > 0:
		return "damaged"
	case len(p.ISR) < len(p.Replicas):
		return "under-replicated"
	default:
		return "online"
	}
}

// ConfigEntry is one config of a topic.
type ConfigEntry struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Source is where the value comes from: "topic" (set on this topic),
	// "broker", "cluster", "static-broker", "default", or "unknown".
	Source string `json:"source"`
	// Default is true when the topic does not override the value.
	Default bool `json:"default"`
	// Sensitive values are not returned by the broker (Value is "").
	Sensitive bool `json:"sensitive,omitempty"`
}

// TopicDescription is the result of DescribeTopic.
type TopicDescription struct {
	Name       string          `json:"name"`
	ID         string          `json:"id,omitempty"`
	Internal   bool            `json:"internal"`
	Partitions []PartitionInfo `json:"partitions"`
	// Configs is sorted by name; nil if the broker does not support
	// DescribeConfigs.
	Configs []ConfigEntry `json:"configs"`
}

// CleanupPolicy is the topic's cleanup.policy, "" when the configs could
// not be read.
func (d TopicDescription) CleanupPolicy() string {
	c, _ := d.Config("cleanup.policy")
	return c.Value
}

// Compacted reports whether the topic's cleanup policy includes compact.
func (d TopicDescription) Compacted() bool { return PolicyCompacts(d.CleanupPolicy()) }

// Config returns the named config entry, if present.
func (d TopicDescription) Config(name string) (ConfigEntry, bool) {
	for _, c := range d.Configs {
		if c.Name == name {
			return c, true
		}
	}
	return ConfigEntry{}, false
}

// Records returns sum(high watermark - log start) over partitions with known
// offsets.
func (d TopicDescription) Records() int64 {
	var n int64
	for _, p := range d.Partitions {
		if p.LogStart >= 0 && p.HighWatermark >= p.LogStart {
			n += p.HighWatermark - p.LogStart
		}
	}
	return n
}

// CreateTopic creates a topic. partitions and replicas may be -1 for the
// broker's defaults. It returns once the topic is visible in metadata with a
// leader for every partition (or RequestTimeout passed), so an immediate
// Produce works.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions int32, replicas int16, configs map[string]string) error {
	const op = "create topic"
	if name == "" {
		return invalid(op, "empty topic name")
	}
	if partitions == 0 || partitions < -1 {
		return invalid(op, "partitions must be at least 1 (or -1 for the broker default), got %d", partitions)
	}
	if replicas == 0 || replicas < -1 {
		return invalid(op, "replicas must be at least 1 (or -1 for the broker default), got %d", replicas)
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	defer cancel()
	var cfg map[string]*string
	if len(configs) > 0 {
		cfg = make(map[string]*string, len(configs))
		for k, v := range configs {
			cfg[k] = kadm.StringPtr(v)
		}
	}
	resp, err := c.adm.CreateTopic(ctx, partitions, replicas, cfg, name)
	if err != nil {
		return wrapDetail(op, topicRes(name), err, resp.ErrMessage)
	}
	c.waitTopic(ctx, name, func(td kadm.TopicDetail, exists bool) bool {
		if !exists || len(td.Partitions) == 0 {
			return false
		}
		if resp.NumPartitions > 0 && int32(len(td.Partitions)) < resp.NumPartitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		return true
	})
	return nil
}

// DropTopic deletes a topic. It returns once metadata no longer lists the
// topic (or RequestTimeout passed), so re-creating it right away works.
func (c *Client) DropTopic(ctx context.Context, name string) error {
	const op = "drop topic"
	if name == "" {
		return invalid(op, "empty topic name")
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	defer cancel()
	resp, err := c.adm.DeleteTopic(ctx, name)
	if err != nil {
		return wrapDetail(op, topicRes(name), err, resp.ErrMessage)
	}
	c.cl.PurgeTopicsFromClient(name)
	c.waitTopic(ctx, name, func(_ kadm.TopicDetail, exists bool) bool { return !exists })
	return nil
}

// AddPartitions adds add partitions to a topic (Kafka can only grow a
// topic). It returns once metadata shows the new count (or RequestTimeout
// passed).
func (c *Client) AddPartitions(ctx context.Context, name string, add int) error {
	const op = "add partitions to"
	if add <= 0 {
		return invalid(op, "number of partitions to add must be positive, got %d", add)
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	defer cancel()
	before, err := c.topicDetail(ctx, name)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	want := len(before.Partitions) + add
	resps, err := c.adm.UpdatePartitions(ctx, want, name)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	r, err := resps.On(name, nil)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return wrapDetail(op, topicRes(name), err, r.ErrMessage)
	}
	c.waitTopic(ctx, name, func(td kadm.TopicDetail, exists bool) bool {
		return exists && len(td.Partitions) >= want
	})
	c.cl.ForceMetadataRefresh()
	return nil
}

// ListTopics lists every topic, internal ones included (see
// TopicInfo.Internal), sorted by name.
func (c *Client) ListTopics(ctx context.Context) ([]TopicInfo, error) {
	const op = "list topics"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	tds, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	names := tds.Names()
	out := make([]TopicInfo, 0, len(names))
	if len(names) == 0 {
		return out, nil
	}
	starts, ends := c.listStartEnd(ctx, names...)
	dirs := c.leaderDirs(ctx, tds)
	policies := c.cleanupPolicies(ctx, names)
	for _, name := range names {
		td := tds[name]
		if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			continue // deleted between listing and describing
		}
		ti := TopicInfo{
			Name:       name,
			Partitions: len(td.Partitions),
			Replicas:   td.Partitions.NumReplicas(),
			Internal:   td.IsInternal,
			Records:    0,
			Bytes:      -1,
			DirtyRatio: -1,
			// Every topic has a policy: a missing one was not read.
			CleanupPolicy: policies[name],
		}
		if td.ID != (kadm.TopicID{}) {
			ti.ID = td.ID.String()
		}
		for p := range td.Partitions {
			s, okS := starts.Lookup(name, p)
			e, okE := ends.Lookup(name, p)
			if !okS || !okE || s.Err != nil || e.Err != nil || s.Offset < 0 || e.Offset < 0 {
				ti.Records = -1
				break
			}
			ti.Records += max(e.Offset-s.Offset, 0)
		}
		if ps, ok := dirs[name]; ok {
			ti.Bytes = 0
			for _, rd := range ps {
				ti.Bytes += max(rd.size, 0)
				if rd.compaction != nil {
					ti.DirtyRatio = max(ti.DirtyRatio, rd.compaction.DirtyRatio)
				}
			}
		}
		out = append(out, ti)
	}
	return out, nil
}

// DescribeTopic returns a topic's partitions (leader, replicas, ISR, log
// start, high watermark, last stable offset, size; from a MoonMQ broker,
// storage health and, when compacted, the cleaner's state) and configs.
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicDescription, error) {
	const op = "describe topic"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return TopicDescription{}, wrap(op, topicRes(name), err)
	}
	defer cancel()
	td, err := c.topicDetail(ctx, name)
	if err != nil {
		return TopicDescription{}, wrap(op, topicRes(name), err)
	}
	desc := TopicDescription{Name: name, Internal: td.IsInternal}
	if td.ID != (kadm.TopicID{}) {
		desc.ID = td.ID.String()
	}
	starts, ends := c.listStartEnd(ctx, name)
	// A broker without read_committed ListOffsets still gets a full
	// description, without the stable offsets.
	stables, _ := c.adm.ListCommittedOffsets(ctx, name)
	dirs := c.leaderDirs(ctx, kadm.TopicDetails{name: td})
	for _, pd := range td.Partitions.Sorted() {
		pi := PartitionInfo{
			Partition:     pd.Partition,
			Leader:        pd.Leader,
			LeaderEpoch:   pd.LeaderEpoch,
			Replicas:      append([]int32(nil), pd.Replicas...), // order matters: first is preferred leader
			ISR:           sortedCopy(pd.ISR),
			Offline:       sortedCopy(pd.OfflineReplicas),
			LogStart:      -1,
			HighWatermark: -1,
			LastStable:    -1,
			Bytes:         -1,
			Err:           pd.Err,
		}
		if o, ok := starts.Lookup(name, pd.Partition); ok && o.Err == nil {
			pi.LogStart = o.Offset
		}
		if o, ok := ends.Lookup(name, pd.Partition); ok && o.Err == nil {
			pi.HighWatermark = o.Offset
		}
		if o, ok := stables.Lookup(name, pd.Partition); ok && o.Err == nil && o.Offset >= 0 {
			pi.LastStable = o.Offset
			if pi.HighWatermark >= 0 {
				pi.LastStable = min(pi.LastStable, pi.HighWatermark)
			}
		}
		rd, ok := dirs[name][pd.Partition]
		if ok {
			pi.Bytes = rd.size
			if rd.health != nil {
				pi.Storage = rd.health.Error
				for _, cr := range rd.health.Corrupt {
					pi.Corrupt = append(pi.Corrupt, CorruptRange(cr))
				}
			}
			if rd.compaction != nil {
				pi.Compaction = compactionOf(*rd.compaction)
			}
		}
		pi.State = partitionState(pi, rd.health)
		desc.Partitions = append(desc.Partitions, pi)
	}
	rcs, err := c.adm.DescribeTopicConfigs(ctx, name)
	switch {
	case err == nil:
		rc, err := rcs.On(name, nil)
		if err == nil && rc.Err != nil {
			err = rc.Err
		}
		if err != nil {
			return TopicDescription{}, wrapDetail(op, topicRes(name), err, rc.ErrMessage)
		}
		desc.Configs = convertConfigs(rc.Configs)
	case isUnsupportedRequest(err):
		// A broker without DescribeConfigs still has a useful description.
	default:
		return TopicDescription{}, wrap(op, topicRes(name), err)
	}
	return desc, nil
}

// AlterTopicConfigs sets and deletes (reverts to default) topic configs in one
// incremental request. A key may not appear in both set and del.
func (c *Client) AlterTopicConfigs(ctx context.Context, name string, set map[string]string, del []string) error {
	const op = "alter configs of"
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	alters := make([]kadm.AlterConfig, 0, len(set)+len(del))
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(set[k])})
	}
	for _, k := range del {
		if _, dup := set[k]; dup {
			return invalid(op, "config %q is both set and deleted", k)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	defer cancel()
	resps, err := c.adm.AlterTopicConfigs(ctx, alters, name)
	if err != nil {
		return wrap(op, topicRes(name), err)
	}
	r, err := resps.On(name, nil)
	if err == nil {
		err = r.Err
	}
	return wrapDetail(op, topicRes(name), err, r.ErrMessage)
}

// topicDetail returns the metadata of one topic, or an error carrying
// UNKNOWN_TOPIC_OR_PARTITION if it does not exist.
func (c *Client) topicDetail(ctx context.Context, name string) (kadm.TopicDetail, error) {
	if name == "" {
		return kadm.TopicDetail{}, fmt.Errorf("%w: empty topic name", ErrInvalidArgument)
	}
	tds, err := c.adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		return kadm.TopicDetail{}, err
	}
	td, ok := tds[name]
	if !ok {
		return kadm.TopicDetail{}, kerr.UnknownTopicOrPartition
	}
	if td.Err != nil {
		return kadm.TopicDetail{}, td.Err
	}
	return td, nil
}

// waitTopic polls metadata until cond holds or ctx ends. The change it waits
// for already succeeded on the controller; waiting only hides metadata
// propagation from the caller, so running out of time is not an error.
func (c *Client) waitTopic(ctx context.Context, name string, cond func(td kadm.TopicDetail, exists bool) bool) {
	t := time.NewTicker(metadataPoll)
	defer t.Stop()
	for {
		tds, err := c.adm.ListTopicsWithInternal(ctx, name)
		if err == nil {
			td, ok := tds[name]
			exists := ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition)
			if cond(td, exists) {
				c.cl.ForceMetadataRefresh()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// listStartEnd lists log start and end offsets; failures leave entries out
// (callers show -1) rather than failing the whole listing.
func (c *Client) listStartEnd(ctx context.Context, topics ...string) (starts, ends kadm.ListedOffsets) {
	starts, _ = c.adm.ListStartOffsets(ctx, topics...)
	ends, _ = c.adm.ListEndOffsets(ctx, topics...)
	return starts, ends
}

// replicaDir is what the leader replica's broker says of it in
// DescribeLogDirs: its size, and MoonMQ's storage and compaction states
// when present.
type replicaDir struct {
	size       int64 // -1 unknown
	health     *protoext.PartitionHealth
	compaction *protoext.PartitionCompaction
}

// leaderDirs returns topic -> partition -> the leader replica's log dir
// entry, from DescribeLogDirs sent to every broker. It returns nil if the
// brokers do not support the request or it fails: sizes and health are a
// nicety, never a reason to fail a listing. The request is sent raw so the
// MoonMQ tags (protoext.PartitionHealthTag, PartitionCompactionTag)
// survive.
func (c *Client) leaderDirs(ctx context.Context, tds kadm.TopicDetails) map[string]map[int32]replicaDir {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	for _, name := range tds.Names() {
		rt := kmsg.NewDescribeLogDirsRequestTopic()
		rt.Topic = name
		for p := range tds[name].Partitions {
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(req.Topics) == 0 {
		return nil
	}
	byBroker := map[int32]*kmsg.DescribeLogDirsResponse{}
	for _, sh := range c.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			continue
		}
		if resp, ok := sh.Resp.(*kmsg.DescribeLogDirsResponse); ok && resp.ErrorCode == 0 {
			byBroker[sh.Meta.NodeID] = resp
		}
	}
	if len(byBroker) == 0 {
		return nil
	}
	out := make(map[string]map[int32]replicaDir)
	for name, td := range tds {
		for p, pd := range td.Partitions {
			resp, ok := byBroker[pd.Leader]
			if !ok && pd.Leader < 0 && len(td.Partitions[p].Replicas) > 0 {
				resp, ok = byBroker[td.Partitions[p].Replicas[0]] // no leader: ask its replica
			}
			if !ok {
				continue
			}
			rd, found := findReplica(resp, name, p)
			if !found {
				continue
			}
			if out[name] == nil {
				out[name] = make(map[int32]replicaDir)
			}
			out[name][p] = rd
		}
	}
	return out
}

func findReplica(resp *kmsg.DescribeLogDirsResponse, topic string, partition int32) (replicaDir, bool) {
	for _, d := range resp.Dirs {
		if d.ErrorCode != 0 {
			continue
		}
		for _, t := range d.Topics {
			if t.Topic != topic {
				continue
			}
			for _, dp := range t.Partitions {
				if dp.Partition != partition || dp.IsFuture {
					continue
				}
				rd := replicaDir{size: dp.Size}
				// A value that does not parse (a newer broker's version)
				// is left out: unknown, not misread.
				dp.UnknownTags.Each(func(tag uint32, v []byte) {
					switch tag {
					case protoext.PartitionHealthTag:
						if h, err := protoext.ParsePartitionHealth(v); err == nil {
							rd.health = &h
						}
					case protoext.PartitionCompactionTag:
						if pc, err := protoext.ParsePartitionCompaction(v); err == nil {
							rd.compaction = &pc
						}
					}
				})
				return rd, true
			}
		}
	}
	return replicaDir{}, false
}

// cleanupPolicies returns topic -> cleanup.policy for the named topics,
// in one DescribeConfigs request that asks for that key alone (Kafka and
// MoonMQ answer only the keys named). Topics whose configs could not be
// read are left out: a policy is a nicety of a listing, never a reason to
// fail it.
func (c *Client) cleanupPolicies(ctx context.Context, names []string) map[string]string {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range names {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = name
		r.ConfigNames = []string{"cleanup.policy"}
		req.Resources = append(req.Resources, r)
	}
	out := make(map[string]string, len(names))
	for _, sh := range c.cl.RequestSharded(ctx, req) {
		resp, ok := sh.Resp.(*kmsg.DescribeConfigsResponse)
		if sh.Err != nil || !ok {
			continue
		}
		for _, r := range resp.Resources {
			if r.ErrorCode != 0 || r.ResourceType != kmsg.ConfigResourceTypeTopic {
				continue
			}
			for _, cfg := range r.Configs {
				if cfg.Name == "cleanup.policy" && cfg.Value != nil {
					out[r.ResourceName] = *cfg.Value
				}
			}
		}
	}
	return out
}

func convertConfigs(cs []kadm.Config) []ConfigEntry {
	out := make([]ConfigEntry, 0, len(cs))
	for _, c := range cs {
		out = append(out, ConfigEntry{
			Name:      c.Key,
			Value:     c.MaybeValue(),
			Source:    sourceName(c.Source),
			Default:   c.Source != kmsg.ConfigSourceDynamicTopicConfig,
			Sensitive: c.Sensitive,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sourceName(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "cluster"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "static-broker"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	default:
		return "unknown"
	}
}

func sortedCopy(s []int32) []int32 {
	if s == nil {
		return nil
	}
	out := append([]int32(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
