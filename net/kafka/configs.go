package kafka

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/acl"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// describeTopicConfigEntries lists a topic's effective configs: overrides
// as DYNAMIC_TOPIC_CONFIG, everything else as DEFAULT_CONFIG, each with its
// Kafka config type and, when asked, its documentation (which says when
// MoonMQ stores a key without acting on it). names filters the keys; an
// unknown name is left out, as Kafka leaves it out. With synonyms (v1+)
// each entry lists its sources in order of precedence, as Kafka does: the
// topic's override, if any, then the default (under the topic key's own
// name: MoonMQ has no broker-level log.* keys for them). replicationFactor
// decides the defaults that depend on it (min.insync.replicas).
func describeTopicConfigEntries(overrides map[string]string, replicationFactor int, names []string, docs, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range topicconfig.Defs() {
		if len(want) > 0 && !want[d.Name] {
			continue
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name = d.Name
		def := d.Default
		if d.Name == topicconfig.MinInsyncReplicas {
			def = strconv.Itoa(topicconfig.DefaultMinInsyncReplicas(replicationFactor))
		}
		v, overridden := overrides[d.Name]
		if !overridden {
			v = def
		}
		v = d.Canonical(v)
		e.Value = &v
		e.Source = kmsg.ConfigSourceDefaultConfig
		e.IsDefault = !overridden
		if overridden {
			e.Source = kmsg.ConfigSourceDynamicTopicConfig
		}
		e.ConfigType = configType(d.Kind)
		if synonyms {
			if overridden {
				e.ConfigSynonyms = append(e.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
					Name: d.Name, Value: &v, Source: kmsg.ConfigSourceDynamicTopicConfig})
			}
			e.ConfigSynonyms = append(e.ConfigSynonyms, kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{
				Name: d.Name, Value: &def, Source: kmsg.ConfigSourceDefaultConfig})
		}
		if docs {
			doc := d.Documentation()
			e.Documentation = &doc
		}
		out = append(out, e)
	}
	return out
}

// configType is the DescribeConfigs (v3+) type code of a key's Kind.
func configType(k topicconfig.Kind) kmsg.ConfigType {
	switch k {
	case topicconfig.KindInt:
		return kmsg.ConfigTypeInt
	case topicconfig.KindLong:
		return kmsg.ConfigTypeLong
	case topicconfig.KindList:
		return kmsg.ConfigTypeList
	case topicconfig.KindBoolean:
		return kmsg.ConfigTypeBoolean
	case topicconfig.KindDouble:
		return kmsg.ConfigTypeDouble
	default:
		return kmsg.ConfigTypeString
	}
}

// brokerConfigs is the read-only view of this node's settings that
// DescribeConfigs(BROKER) reports.
func (c *conn) brokerConfigs() map[string]string {
	o := c.s.opts
	return map[string]string{
		"broker.id":                 strconv.Itoa(int(o.NodeID)),
		"node.id":                   strconv.Itoa(int(o.NodeID)),
		"auto.create.topics.enable": strconv.FormatBool(o.AutoCreateTopics),
		"num.partitions":            strconv.Itoa(int(o.DefaultPartitions)),
		"socket.request.max.bytes":  strconv.Itoa(int(o.MaxRequestSize)),
		"advertised.listeners":      "PLAINTEXT://" + c.s.Advertised(),
		"moonmq.version":            o.Version,
	}
}

func (c *conn) handleDescribeConfigs(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	z := c.authz(r)
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		if code := z.configResource(acl.OpDescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
			rr.ErrorCode = code
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		switch res.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, ok := c.s.meta.Topic(res.ResourceName)
			if !ok {
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rr.ErrorMessage = errMessage(fmt.Errorf("topic %q does not exist", res.ResourceName))
				break
			}
			rr.Configs = describeTopicConfigEntries(t.Configs, t.ReplicationFactor(), res.ConfigNames, req.IncludeDocumentation, req.IncludeSynonyms)
		case kmsg.ConfigResourceTypeBroker:
			if res.ResourceName != "" && res.ResourceName != strconv.Itoa(int(c.s.opts.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = errMessage(fmt.Errorf("broker %q is not this node", res.ResourceName))
				break
			}
			want := map[string]bool{}
			for _, n := range res.ConfigNames {
				want[n] = true
			}
			for k, v := range c.brokerConfigs() {
				if len(want) > 0 && !want[k] {
					continue
				}
				e := kmsg.NewDescribeConfigsResponseResourceConfig()
				e.Name, e.Value, e.ReadOnly = k, &v, true
				e.Source = kmsg.ConfigSourceStaticBrokerConfig
				rr.Configs = append(rr.Configs, e)
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = errMessage(fmt.Errorf("config resource type %d is not supported", res.ResourceType))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// configResource is the authorization error of op on a config resource,
// or 0: broker configs are the cluster's (Kafka's ConfigHelper), topic
// and group configs their topic's and group's. Types MoonMQ does not
// serve are left to the handler to refuse.
func (z authz) configResource(op acl.Operation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !z.cluster(op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeTopic:
		if !z.allowed(op, acl.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !z.allowed(op, acl.ResourceGroup, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}

// alterTopicConfigs applies one resource of an (Incremental)AlterConfigs
// request; only topic configs are alterable (broker settings are static).
// ALTER_CONFIGS on the resource is checked first, as Kafka does.
func (c *conn) alterTopicConfigs(z authz, typ kmsg.ConfigResourceType, name string, apply func() error) (int16, *string) {
	if code := z.configResource(acl.OpAlterConfigs, typ, name); code != 0 {
		return code, nil
	}
	if typ != kmsg.ConfigResourceTypeTopic {
		return kerr.InvalidRequest.Code, errMessage(fmt.Errorf("only topic configs can be altered (resource type %d)", typ))
	}
	if metadata.IsInternalTopic(name) {
		// Its owner relies on its settings (never deleted by retention,
		// fsynced before acknowledging).
		return kerr.InvalidTopicException.Code, errMessage(fmt.Errorf("internal topic %s has fixed configs", name))
	}
	if err := apply(); err != nil {
		return c.errCode(err), errMessage(err)
	}
	return 0, nil
}

func (c *conn) handleIncrementalAlterConfigs(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := c.adminCtx(0)
	defer cancel()
	z := c.authz(r)
	for _, res := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = c.alterTopicConfigs(z, res.ResourceType, res.ResourceName, func() error {
			ops := make([]metadata.ConfigOp, 0, len(res.Configs))
			for _, cfg := range res.Configs {
				op := metadata.ConfigOp{Key: cfg.Name, Op: metadata.OpType(cfg.Op)}
				if cfg.Value != nil {
					op.Value = *cfg.Value
				}
				ops = append(ops, op)
			}
			_, err := c.s.meta.AlterConfigs(ctx, res.ResourceName, ops, req.ValidateOnly)
			return err
		})
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

func (c *conn) handleAlterConfigs(r *request) (kmsg.Response, func() kmsg.Response) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	ctx, cancel := c.adminCtx(0)
	defer cancel()
	z := c.authz(r)
	for _, res := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		rr.ErrorCode, rr.ErrorMessage = c.alterTopicConfigs(z, res.ResourceType, res.ResourceName, func() error {
			configs := make(map[string]string, len(res.Configs))
			for _, cfg := range res.Configs {
				if cfg.Value != nil {
					configs[cfg.Name] = *cfg.Value
				}
			}
			_, err := c.s.meta.ReplaceConfigs(ctx, res.ResourceName, configs, req.ValidateOnly)
			return err
		})
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
