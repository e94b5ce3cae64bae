package tui

import (
	"context"
	"sync"
	"time"

	"github.com/moonmq/moonmq/net/client"
)

// Source is everything the dashboard reads from a cluster. The production
// implementation (DialClient) is a thin adapter over net/client; tests use
// fakes. Every method must honour ctx.
type Source interface {
	// Cluster returns the brokers, the controller and how the partitions
	// stand (under-replicated, offline, leaders per broker).
	Cluster(ctx context.Context) (client.ClusterHealth, error)
	ListTopics(ctx context.Context) ([]client.TopicInfo, error)
	// EndOffsets returns topic -> partition -> high watermark for the
	// given topics in one round trip; partitions whose offset could not be
	// listed are left out.
	EndOffsets(ctx context.Context, topics []string) (map[string]map[int32]int64, error)
	// StableOffsets is EndOffsets at read_committed isolation: the last
	// stable offset, which trails the high watermark while a transaction
	// is open.
	StableOffsets(ctx context.Context, topic string) (map[int32]int64, error)
	DescribeTopic(ctx context.Context, name string) (client.TopicDescription, error)
	ListGroups(ctx context.Context) ([]client.GroupSummary, error)
	DescribeGroup(ctx context.Context, name string) (client.GroupDescription, error)
	// ListTransactions lists the transactional ids of every broker
	// (ListTransactions); a broker without the API fails, and the
	// dashboard then leaves transactions out.
	ListTransactions(ctx context.Context) ([]client.TransactionSummary, error)
	// Consume streams a topic's records from `from` to fn until ctx ends
	// (returning nil) or fn fails (returning its error).
	Consume(ctx context.Context, topic string, from client.Position, fn func(client.Record) error) error
	Close()
}

// DialClient returns a dial function that connects through net/client.
func DialClient(opts client.Options) func(context.Context) (Source, error) {
	return func(ctx context.Context) (Source, error) {
		c, err := client.Dial(ctx, opts)
		if err != nil {
			return nil, err
		}
		return &clientSource{c: c}, nil
	}
}

// clientSource adapts *client.Client to Source; every method is one
// facade call (EndOffsets is batched: one ListOffsets round trip per
// refresh for every topic, not one per topic).
type clientSource struct{ c *client.Client }

func (s *clientSource) Cluster(ctx context.Context) (client.ClusterHealth, error) {
	return s.c.Health(ctx)
}

func (s *clientSource) ListTopics(ctx context.Context) ([]client.TopicInfo, error) {
	return s.c.ListTopics(ctx)
}

func (s *clientSource) DescribeTopic(ctx context.Context, name string) (client.TopicDescription, error) {
	return s.c.DescribeTopic(ctx, name)
}

func (s *clientSource) ListGroups(ctx context.Context) ([]client.GroupSummary, error) {
	return s.c.ListGroups(ctx)
}

func (s *clientSource) DescribeGroup(ctx context.Context, name string) (client.GroupDescription, error) {
	return s.c.DescribeGroup(ctx, name)
}

func (s *clientSource) ListTransactions(ctx context.Context) ([]client.TransactionSummary, error) {
	return s.c.ListTransactions(ctx)
}

func (s *clientSource) Consume(ctx context.Context, topic string, from client.Position, fn func(client.Record) error) error {
	return s.c.Consume(ctx, topic, "", from, fn)
}

func (s *clientSource) Close() { s.c.Close() }

func (s *clientSource) EndOffsets(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
	return s.c.EndOffsets(ctx, topics...)
}

func (s *clientSource) StableOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	m, err := s.c.StableOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	return m[topic], nil
}

// groupState is one group of a snapshot: what ListGroups said, plus the
// description (members, offsets, lag) if DescribeGroup succeeded.
type groupState struct {
	summary client.GroupSummary
	desc    *client.GroupDescription
	err     error
}

// snapshot is everything one refresh learned. It is immutable once built:
// views and the tracker only read it.
type snapshot struct {
	at      time.Time
	took    time.Duration
	cluster client.ClusterHealth
	topics  []client.TopicInfo // sorted by name
	// ends is topic -> partition -> high watermark; nil if it could not
	// be listed (rates are then unknown for this round).
	ends map[string]map[int32]int64
	// groups is sorted by name; groupsErr says why there are none when
	// listing failed (e.g. a broker without consumer groups).
	groups    []groupState
	groupsErr error
	// txns are the transactional ids the brokers coordinate; txnsErr is
	// set when they could not be listed (a broker without
	// ListTransactions), and transactions are then not shown.
	txns    []client.TransactionSummary
	txnsErr error
	// err is set when the cluster could not be read at all; nothing else
	// is then valid.
	err error
}

// openTxns counts the transactions in progress (those holding back the
// last stable offset of the partitions they wrote); ok is false when the
// transactions could not be listed.
func (s *snapshot) openTxns() (n int, ok bool) {
	if s.txnsErr != nil {
		return 0, false
	}
	for _, t := range s.txns {
		if client.TxnOpen(t.State) {
			n++
		}
	}
	return n, true
}

func (s *snapshot) topic(name string) (client.TopicInfo, bool) {
	for _, t := range s.topics {
		if t.Name == name {
			return t, true
		}
	}
	return client.TopicInfo{}, false
}

func (s *snapshot) group(name string) (groupState, bool) {
	for _, g := range s.groups {
		if g.summary.Name == name {
			return g, true
		}
	}
	return groupState{}, false
}

// describeParallel bounds concurrent DescribeGroup calls per refresh: enough
// to hide round trips, few enough not to burst a broker with many groups.
const describeParallel = 4

// fetchSnapshot reads the cluster: metadata and topics first (without them
// there is nothing to show), then end offsets and groups, whose failures
// only blank their own columns.
func fetchSnapshot(ctx context.Context, src Source, now func() time.Time) *snapshot {
	start := now()
	s := &snapshot{}
	defer func() {
		s.at = now()
		s.took = s.at.Sub(start)
	}()
	var err error
	if s.cluster, err = src.Cluster(ctx); err != nil {
		s.err = err
		return s
	}
	if s.topics, err = src.ListTopics(ctx); err != nil {
		s.err = err
		return s
	}
	names := make([]string, len(s.topics))
	for i, t := range s.topics {
		names[i] = t.Name
	}
	if s.ends, err = src.EndOffsets(ctx, names); err != nil {
		s.ends = nil
	}
	s.txns, s.txnsErr = src.ListTransactions(ctx)
	summaries, err := src.ListGroups(ctx)
	if err != nil {
		s.groupsErr = err
		return s
	}
	s.groups = make([]groupState, len(summaries))
	sem := make(chan struct{}, describeParallel)
	var wg sync.WaitGroup
	for i, g := range summaries {
		s.groups[i].summary = g
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := src.DescribeGroup(ctx, g.Name)
			if err != nil {
				s.groups[i].err = err
				return
			}
			s.groups[i].desc = &d
		}()
	}
	wg.Wait()
	return s
}

// topicDetail is the result of one topic-detail fetch.
type topicDetail struct {
	desc   client.TopicDescription
	stable map[int32]int64 // nil if unknown
}

func fetchTopicDetail(ctx context.Context, src Source, name string) (topicDetail, error) {
	d, err := src.DescribeTopic(ctx, name)
	if err != nil {
		return topicDetail{}, err
	}
	td := topicDetail{desc: d}
	// The last stable offset is a nicety: a broker without read_committed
	// ListOffsets still gets a full detail view.
	if st, err := src.StableOffsets(ctx, name); err == nil {
		td.stable = st
	}
	return td, nil
}
