package httpapi

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/replica"
)

// gather collects c alone and returns each sample's value by family name
// and labels, sorted by name ("name" or "name{l1=v1,l2=v2}").
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			key := f.GetName()
			if len(m.Label) > 0 {
				key += "{"
				for i, l := range m.Label {
					if i > 0 {
						key += ","
					}
					key += l.GetName() + "=" + l.GetValue()
				}
				key += "}"
			}
			out[key] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}

// The cluster families follow ClusterStats; the offline count is the
// active controller's alone (0 elsewhere, Kafka's OfflinePartitionsCount).
func TestClusterCollector(t *testing.T) {
	st := &ClusterStats{
		NodeID: 2, ControllerID: 1,
		Raft:          RaftStats{State: "follower", Term: 4, LastLogIndex: 90, CommitIndex: 88, AppliedIndex: 87},
		Brokers:       []BrokerStats{{ID: 1, Alive: true}, {ID: 2, Alive: true}, {ID: 3, Fenced: true}},
		PartitionsLed: 3, PartitionsAssigned: 7, PartitionsUnderReplicated: 2, PartitionsUnderMinISR: 1,
		ClusterPartitionsOffline: 5, ISRShrinks: 4, ISRExpands: 6,
	}
	got := gather(t, NewClusterCollector(func() *ClusterStats { return st }))
	require.Equal(t, map[string]float64{
		"moonmq_controller_active":           0,
		"moonmq_controller_id":               1,
		"moonmq_raft_state{state=follower}":  1,
		"moonmq_raft_state{state=candidate}": 0,
		"moonmq_raft_state{state=leader}":    0,
		"moonmq_raft_state{state=shutdown}":  0,
		"moonmq_raft_term":                   4,
		"moonmq_raft_last_log_index":         90,
		"moonmq_raft_commit_index":           88,
		"moonmq_raft_applied_index":          87,
		"moonmq_partitions_led":              3,
		"moonmq_partitions_assigned":         7,
		"moonmq_partitions_under_replicated": 2,
		"moonmq_partitions_under_min_isr":    1,
		"moonmq_cluster_partitions_offline":  0,
		"moonmq_isr_shrinks_total":           4,
		"moonmq_isr_expands_total":           6,
		"moonmq_cluster_brokers":             3,
		"moonmq_cluster_brokers_fenced":      1,
	}, got)

	st.ActiveController, st.ControllerID, st.Raft.State = true, 2, "leader"
	got = gather(t, NewClusterCollector(func() *ClusterStats { return st }))
	require.Equal(t, float64(5), got["moonmq_cluster_partitions_offline"], "the active controller exports the count")
	require.Equal(t, float64(1), got["moonmq_controller_active"])
	require.Equal(t, float64(1), got["moonmq_raft_state{state=leader}"])
	require.Equal(t, float64(0), got["moonmq_raft_state{state=follower}"])

	require.Empty(t, gather(t, NewClusterCollector(func() *ClusterStats { return nil })), "nothing while the node opens")
}

// The README's table of metric families names every family the collectors
// of this package export.
func TestREADMEListsEveryFamily(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	b, err := replica.Open(replica.Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	reg := prometheus.NewRegistry()
	NewStorageMetrics(reg)
	collectors := []prometheus.Collector{NewPartitionCollector(b), NewGroupCollector(func() []GroupStats { return nil }),
		NewClusterCollector(func() *ClusterStats { return nil })}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := 0
	check := func(d *prometheus.Desc) {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		require.Contains(t, readme, "`"+m[1]+"`", "README's metric families do not list %s", m[1])
		names++
	}
	for _, c := range collectors {
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			check(d)
		}
	}
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		require.Contains(t, readme, "`"+f.GetName()+"`", "README's metric families do not list %s", f.GetName())
		names++
	}
	require.Greater(t, names, 30)
}

// The README's list of /stats fields names every field of the document.
func TestREADMEListsEveryStatsField(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeFor[Stats]().PkgPath() {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			require.NotEmpty(t, name, "%s.%s has no json name", typ.Name(), f.Name)
			require.Contains(t, readme, "`"+name+"`", "README's /stats fields do not list %s (%s.%s)", name, typ.Name(), f.Name)
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Stats]())
	require.Greater(t, len(seen), 8)
}
