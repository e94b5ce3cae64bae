package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/node"
)

// issueConfigs are the topic configs issue 11 reports refused, as
// infrastructure-as-code tools set them, with their Kafka config types.
var issueConfigs = map[string]struct {
	value string
	typ   kmsg.ConfigType
}{
	"min.cleanable.dirty.ratio":               {"0.3", kmsg.ConfigTypeDouble},
	"max.compaction.lag.ms":                   {"604800000", kmsg.ConfigTypeLong},
	"unclean.leader.election.enable":          {"true", kmsg.ConfigTypeBoolean},
	"preallocate":                             {"true", kmsg.ConfigTypeBoolean},
	"segment.index.bytes":                     {"2097152", kmsg.ConfigTypeInt},
	"segment.jitter.ms":                       {"60000", kmsg.ConfigTypeLong},
	"flush.messages":                          {"100000", kmsg.ConfigTypeLong},
	"message.timestamp.difference.max.ms":     {"86400000", kmsg.ConfigTypeLong},
	"message.timestamp.before.max.ms":         {"172800000", kmsg.ConfigTypeLong},
	"message.timestamp.after.max.ms":          {"7200000", kmsg.ConfigTypeLong},
	"message.downconversion.enable":           {"false", kmsg.ConfigTypeBoolean},
	"local.retention.ms":                      {"-2", kmsg.ConfigTypeLong},
	"local.retention.bytes":                   {"-2", kmsg.ConfigTypeLong},
	"remote.storage.enable":                   {"false", kmsg.ConfigTypeBoolean},
	"follower.replication.throttled.replicas": {"0:1", kmsg.ConfigTypeList},
	"leader.replication.throttled.replicas":   {"*", kmsg.ConfigTypeList},
}

func adminClient(t *testing.T, s *server) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// describeAll is DescribeConfigs with documentation and synonyms, keyed by
// config name.
func describeAll(t *testing.T, cl *kgo.Client, topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation, req.IncludeSynonyms = true, true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Len(t, resp.Resources, 1)
	require.NoError(t, kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		_, dup := out[c.Name]
		require.False(t, dup, "%s listed twice", c.Name)
		out[c.Name] = c
	}
	return out
}

// A real client creates a topic with every config the issue lists and
// describes it back: each key with its value, DYNAMIC_TOPIC_CONFIG source,
// Kafka type and documentation, which says when MoonMQ only stores the key;
// every other key is there as DEFAULT_CONFIG.
func TestCreateTopicWithIssueConfigsAndDescribe(t *testing.T) {
	s := startServer(t, node.Config{})
	cl, adm := adminClient(t, s)
	ctx := context.Background()

	configs := map[string]*string{}
	for k, c := range issueConfigs {
		configs[k] = kadm.StringPtr(c.value)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, configs, "iac")
	require.NoError(t, err)
	require.NoError(t, resp.Err, resp.ErrMessage)
	for k, c := range issueConfigs {
		e := resp.Configs[k]
		require.Equal(t, c.value, e.MaybeValue(), "CreateTopics response echoes %s", k)
	}

	got := describeAll(t, cl, "iac")
	require.Len(t, got, len(topicconfig.Defs()), "every topic config is described")
	for k, c := range issueConfigs {
		e, ok := got[k]
		require.True(t, ok, "%s not described", k)
		require.Equal(t, c.value, *e.Value, k)
		require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, e.Source, k)
		require.Equal(t, c.typ, e.ConfigType, k)
		require.False(t, e.ReadOnly, k)
		require.NotNil(t, e.Documentation, k)
		def, _ := topicconfig.Lookup(k)
		require.Equal(t, def.Documentation(), *e.Documentation, k)
		if def.NotApplied != "" {
			require.Contains(t, *e.Documentation, "MoonMQ stores this setting but does not act on it yet", k)
		}
		require.Len(t, e.ConfigSynonyms, 2, "%s: the override, then the default", k)
		require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, e.ConfigSynonyms[0].Source)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, e.ConfigSynonyms[1].Source)
		require.Equal(t, def.Default, *e.ConfigSynonyms[1].Value, k)
	}
	e := got["compression.type"]
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, e.Source)
	require.Equal(t, "producer", *e.Value)
	require.Equal(t, kmsg.ConfigTypeString, e.ConfigType)
	require.Len(t, e.ConfigSynonyms, 1)
	require.NotContains(t, *got["min.cleanable.dirty.ratio"].Documentation, "does not act on it", "compaction is applied")
	require.NotContains(t, *got["segment.jitter.ms"].Documentation, "does not act on it", "jitter is applied")

	// kadm's view (what most Go tooling reads) agrees on values and sources.
	rcs, err := adm.DescribeTopicConfigs(ctx, "iac")
	require.NoError(t, err)
	rc, err := rcs.On("iac", nil)
	require.NoError(t, err)
	for _, c := range rc.Configs {
		if want, ok := issueConfigs[c.Key]; ok {
			require.Equal(t, want.value, c.MaybeValue(), c.Key)
			require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source, c.Key)
		} else {
			require.Equal(t, kmsg.ConfigSourceDefaultConfig, c.Source, c.Key)
		}
	}
}

// Bad values are refused with INVALID_CONFIG and a message naming the key,
// the value and what Kafka expects; nothing is created.
func TestCreateTopicRefusesBadConfigValues(t *testing.T) {
	s := startServer(t, node.Config{})
	_, adm := adminClient(t, s)
	ctx := context.Background()
	for k, tc := range map[string]struct{ value, want string }{
		"min.cleanable.dirty.ratio":             {"1.5", "between 0 and 1"},
		"unclean.leader.election.enable":        {"yes", "BOOLEAN"},
		"segment.jitter.ms":                     {"-5", "at least 0"},
		"leader.replication.throttled.replicas": {"broker-1", "[partitionId]:[brokerId]"},
		"remote.storage.enable":                 {"true", "tiered storage"},
		"compression.zstd.level":                {"99", "between -131072 and 22"},
		"message.format.version":                {"3.0-IV1", "removed in Kafka 4.0"},
	} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{k: kadm.StringPtr(tc.value)}, "bad")
		require.ErrorIs(t, err, kerr.InvalidConfig, k)
		require.Contains(t, resp.ErrMessage, k)
		require.Contains(t, resp.ErrMessage, tc.want, k)
	}
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"min.compaction.lag.ms": kadm.StringPtr("10000"), "max.compaction.lag.ms": kadm.StringPtr("5000")}, "bad")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	require.Contains(t, resp.ErrMessage, "min.compaction.lag.ms (10000) is greater than max.compaction.lag.ms (5000)")
	td, err := adm.ListTopics(ctx, "bad")
	require.NoError(t, err)
	require.False(t, td.Has("bad"))
}

// IncrementalAlterConfigs sets, deletes, appends to and subtracts from the
// new keys (APPEND and SUBTRACT on the throttled-replica lists), validating
// the result like a create; AlterConfigs replaces the whole set.
func TestAlterIssueConfigs(t *testing.T) {
	s := startServer(t, node.Config{})
	cl, adm := adminClient(t, s)
	ctx := context.Background()
	createTopic(t, s, "alter", 1)

	alter := func(cfgs ...kadm.AlterConfig) kadm.AlterConfigsResponse {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, cfgs, "alter")
		require.NoError(t, err)
		require.Len(t, rs, 1)
		return rs[0]
	}
	r := alter(
		kadm.AlterConfig{Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("0.75")},
		kadm.AlterConfig{Name: "preallocate", Value: kadm.StringPtr("true")},
		kadm.AlterConfig{Name: "follower.replication.throttled.replicas", Value: kadm.StringPtr("0:1")},
	)
	require.NoError(t, r.Err, r.ErrMessage)
	r = alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "follower.replication.throttled.replicas", Value: kadm.StringPtr("1:1")})
	require.NoError(t, r.Err, r.ErrMessage)
	got := describeAll(t, cl, "alter")
	require.Equal(t, "0:1,1:1", *got["follower.replication.throttled.replicas"].Value)
	require.Equal(t, "0.75", *got["min.cleanable.dirty.ratio"].Value)

	r = alter(
		kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "follower.replication.throttled.replicas", Value: kadm.StringPtr("0:1")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "preallocate"},
	)
	require.NoError(t, r.Err, r.ErrMessage)
	got = describeAll(t, cl, "alter")
	require.Equal(t, "1:1", *got["follower.replication.throttled.replicas"].Value)
	require.Equal(t, "false", *got["preallocate"].Value)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["preallocate"].Source)

	// APPEND works on list keys only, and its result is validated.
	r = alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "preallocate", Value: kadm.StringPtr("true")})
	require.ErrorIs(t, r.Err, kerr.InvalidConfig)
	r = alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: kadm.StringPtr("*")})
	require.NoError(t, r.Err, r.ErrMessage)
	r = alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "leader.replication.throttled.replicas", Value: kadm.StringPtr("0:1")})
	require.ErrorIs(t, r.Err, kerr.InvalidConfig, "'*' and a replica list do not mix")
	r = alter(kadm.AlterConfig{Name: "segment.index.bytes", Value: kadm.StringPtr("2")})
	require.ErrorIs(t, r.Err, kerr.InvalidConfig)
	require.Contains(t, r.ErrMessage, "segment.index.bytes")

	// The legacy AlterConfigs replaces every override.
	rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}}, "alter")
	require.NoError(t, err)
	require.NoError(t, rs[0].Err, rs[0].ErrMessage)
	got = describeAll(t, cl, "alter")
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, got["unclean.leader.election.enable"].Source)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, got["min.cleanable.dirty.ratio"].Source)
	require.Equal(t, "0.5", *got["min.cleanable.dirty.ratio"].Value)
}

// The configs MoonMQ applies act on real produce requests: compression.type
// recompresses what the producer sent, and the timestamp bounds refuse
// records with INVALID_TIMESTAMP.
func TestProduceAppliesCompressionAndTimestampConfigs(t *testing.T) {
	s := startServer(t, node.Config{})
	_, adm := adminClient(t, s)
	ctx := context.Background()
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"compression.type": kadm.StringPtr("zstd"), "message.timestamp.before.max.ms": kadm.StringPtr("3600000"),
	}, "applied")
	require.NoError(t, err)
	require.NoError(t, resp.Err, resp.ErrMessage)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("applied"),
		kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.RecordRetries(0))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("fresh")}).FirstErr())
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("stale"), Timestamp: time.Now().Add(-2 * time.Hour)}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidTimestamp)
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("future"), Timestamp: time.Now().Add(2 * time.Hour)}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidTimestamp, "Kafka 4's default message.timestamp.after.max.ms is an hour")

	// The stored batch is zstd although the producer sent gzip, and a
	// consumer reads the record.
	// A raw Fetch returns the stored batches as they are.
	rc := dialRaw(t, s)
	rc.send(fetchRequest("applied", 0))
	fr := kmsg.NewPtrFetchResponse()
	fr.Version = 11
	rc.recv(fr)
	fp := fr.Topics[0].Partitions[0]
	require.Zero(t, fp.ErrorCode)
	h, err := batch.Validate(fp.RecordBatches, 0)
	require.NoError(t, err)
	require.Equal(t, batch.CompressionZstd, h.Compression())

	consumer, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ConsumeTopics("applied"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	fs := consumer.PollFetches(cctx)
	require.NoError(t, fs.Err())
	recs := fs.Records()
	require.Len(t, recs, 1)
	require.Equal(t, "fresh", string(recs[0].Value))
}
