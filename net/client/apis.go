package client

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// APIKey is a Kafka request type (the api_key of the protocol). Callers use
// it to check, before they try, that a broker implements a feature: a broker
// that lacks an API answers with a closed connection, which reads as an
// outage rather than "not supported".
type APIKey int16

// The API keys the toolkit checks for. The values are the protocol's, so
// any key can also be written as APIKey(n).
const (
	APIOffsetCommit                 = APIKey(kmsg.OffsetCommit)
	APIOffsetFetch                  = APIKey(kmsg.OffsetFetch)
	APIFindCoordinator              = APIKey(kmsg.FindCoordinator)
	APIJoinGroup                    = APIKey(kmsg.JoinGroup)
	APIHeartbeat                    = APIKey(kmsg.Heartbeat)
	APILeaveGroup                   = APIKey(kmsg.LeaveGroup)
	APISyncGroup                    = APIKey(kmsg.SyncGroup)
	APIDescribeGroups               = APIKey(kmsg.DescribeGroups)
	APIListGroups                   = APIKey(kmsg.ListGroups)
	APIDeleteGroups                 = APIKey(kmsg.DeleteGroups)
	APIInitProducerID               = APIKey(kmsg.InitProducerID)
	APIAddPartitionsToTxn           = APIKey(kmsg.AddPartitionsToTxn)
	APIEndTxn                       = APIKey(kmsg.EndTxn)
	APIDescribeTransactions         = APIKey(kmsg.DescribeTransactions)
	APIListTransactions             = APIKey(kmsg.ListTransactions)
	APIDescribeACLs                 = APIKey(kmsg.DescribeACLs)
	APICreateACLs                   = APIKey(kmsg.CreateACLs)
	APIDeleteACLs                   = APIKey(kmsg.DeleteACLs)
	APIAlterPartitionAssignments    = APIKey(kmsg.AlterPartitionAssignments)
	APIListPartitionReassignments   = APIKey(kmsg.ListPartitionReassignments)
	APIDescribeUserSCRAMCredentials = APIKey(kmsg.DescribeUserSCRAMCredentials)
	APIAlterUserSCRAMCredentials    = APIKey(kmsg.AlterUserSCRAMCredentials)
	APIDescribeClientQuotas         = APIKey(kmsg.DescribeClientQuotas)
	APIAlterClientQuotas            = APIKey(kmsg.AlterClientQuotas)
)

// String returns the API's protocol name, e.g. "AddPartitionsToTxn", or
// "Unknown(n)" for a key this client does not know.
func (k APIKey) String() string {
	if name := kmsg.NameForKey(int16(k)); name != "" && name != "Unknown" {
		return name
	}
	return "Unknown(" + strconv.Itoa(int(k)) + ")"
}

// VersionRange is the range of versions a broker accepts for one API.
type VersionRange struct {
	Min int16 `json:"min"`
	Max int16 `json:"max"`
}

// BrokerAPIs is what one broker answered to ApiVersions.
type BrokerAPIs struct {
	// Broker is the node that answered.
	Broker int32 `json:"broker"`
	// Versions holds every API the broker implements.
	Versions map[APIKey]VersionRange `json:"versions"`
	// KafkaVersion is the Apache Kafka release whose API versions match
	// the broker's, e.g. "v3.7", or "" when they match no single release
	// (a broker implementing a subset of the protocol).
	KafkaVersion string `json:"kafka_version,omitempty"`
}

// Supports reports whether the broker implements the API.
func (a BrokerAPIs) Supports(k APIKey) bool {
	_, ok := a.Versions[k]
	return ok
}

// APIVersions asks the brokers which APIs they implement and returns the
// answer of the first broker (lowest node ID) that gave one. In a cluster
// every broker runs the same software, so one answer stands for all.
func (c *Client) APIVersions(ctx context.Context) (BrokerAPIs, error) {
	const op = "list the broker's APIs"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return BrokerAPIs{}, wrap(op, "", err)
	}
	defer cancel()
	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return BrokerAPIs{}, wrap(op, "", err)
	}
	var first error
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			if first == nil {
				first = v.Err
			}
			continue
		}
		out := BrokerAPIs{Broker: v.NodeID, Versions: map[APIKey]VersionRange{}}
		v.EachKeySorted(func(key, lo, hi int16) {
			out.Versions[APIKey(key)] = VersionRange{Min: lo, Max: hi}
		})
		// franz-go guesses the release from the version table; a broker
		// implementing a subset gets guesses like "between v0.9 and
		// v0.10" or "not even v0.8.0", which are not a version.
		if g := v.VersionGuess(); strings.HasPrefix(g, "v") && !strings.Contains(g, " ") {
			out.KafkaVersion = g
		}
		return out, nil
	}
	if first == nil {
		first = kerr.BrokerNotAvailable
	}
	return BrokerAPIs{}, wrap(op, "", first)
}

// BrokerConfigs returns the configs of one broker (dynamic and static, as
// the broker reports them), sorted by name.
func (c *Client) BrokerConfigs(ctx context.Context, broker int32) ([]ConfigEntry, error) {
	const op = "describe configs of"
	res := "broker " + strconv.Itoa(int(broker))
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	defer cancel()
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return nil, wrap(op, res, err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, wrapDetail(op, res, rc.Err, rc.ErrMessage)
		}
		return convertConfigs(rc.Configs), nil
	}
	return []ConfigEntry{}, nil
}

// TopicNames returns the names of the cluster's topics, internal topics
// excluded, sorted. It is one Metadata request, cheap enough for
// completion, unlike ListTopics which also sizes every topic.
func (c *Client) TopicNames(ctx context.Context) ([]string, error) {
	const op = "list topics"
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	tds, err := c.adm.ListTopics(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	names := tds.Names()
	sort.Strings(names)
	return names, nil
}
