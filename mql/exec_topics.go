package mql

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/moonmq/moonmq/net/client"
)

func (s *Session) createTopic(ctx context.Context, cl *client.Client, st *CreateTopic) error {
	name := string(st.Name)
	parts, replicas := int32(-1), int16(-1)
	if st.Partitions != nil {
		parts = int32(*st.Partitions)
	}
	if st.Replicas != nil {
		replicas = int16(*st.Replicas)
	}
	configs := map[string]string{}
	for _, c := range st.Configs {
		v, err := ConfigValueFor(string(c.Key), c.Value)
		if err != nil {
			return err
		}
		configs[string(c.Key)] = v
	}
	err := cl.CreateTopic(ctx, name, parts, replicas, configs)
	if st.IfNotExists && errors.Is(err, client.ErrExists) {
		s.out.OK(fmt.Sprintf("topic %s already exists", quoteRes(name)))
		return nil
	}
	if err != nil {
		return err
	}
	n := int(parts)
	if parts < 0 {
		// The broker chose the count: ask how many it made.
		if d, err := cl.DescribeTopic(ctx, name); err == nil {
			n = len(d.Partitions)
		}
	}
	s.out.OK(fmt.Sprintf("topic %s created (%s)", quoteRes(name), plural(int64(n), "partition")))
	return nil
}

func (s *Session) dropTopic(ctx context.Context, cl *client.Client, st *DropTopic) error {
	name := string(st.Name)
	err := cl.DropTopic(ctx, name)
	if st.IfExists && errors.Is(err, client.ErrNotFound) {
		s.out.OK(fmt.Sprintf("topic %s does not exist: nothing to drop", quoteRes(name)))
		return nil
	}
	if err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("topic %s dropped", quoteRes(name)))
	return nil
}

func (s *Session) alterTopic(ctx context.Context, cl *client.Client, st *AlterTopic) error {
	name := string(st.Name)
	switch {
	case st.Add != nil:
		if err := cl.AddPartitions(ctx, name, int(*st.Add)); err != nil {
			return err
		}
		d, err := cl.DescribeTopic(ctx, name)
		if err != nil {
			return err
		}
		s.out.OK(fmt.Sprintf("topic %s now has %s", quoteRes(name), plural(int64(len(d.Partitions)), "partition")))
	case len(st.Set) > 0:
		set := map[string]string{}
		var shown []string
		for _, c := range st.Set {
			v, err := ConfigValueFor(string(c.Key), c.Value)
			if err != nil {
				return err
			}
			set[string(c.Key)] = v
			shown = append(shown, string(c.Key)+" = "+v)
		}
		// AlterTopicConfigs of an unknown topic can fail with a
		// generic error on some brokers; check existence first so the
		// message is the usual "does not exist".
		if _, err := cl.ListOffsets(ctx, name); err != nil {
			return err
		}
		if err := cl.AlterTopicConfigs(ctx, name, set, nil); err != nil {
			return err
		}
		s.out.OK(fmt.Sprintf("topic %s altered (%s)", quoteRes(name), strings.Join(shown, ", ")))
	default:
		del := make([]string, len(st.Reset))
		for i, k := range st.Reset {
			del[i] = string(k)
		}
		if _, err := cl.ListOffsets(ctx, name); err != nil {
			return err
		}
		if err := cl.AlterTopicConfigs(ctx, name, nil, del); err != nil {
			return err
		}
		s.out.OK(fmt.Sprintf("topic %s configs reset to defaults (%s)", quoteRes(name), strings.Join(del, ", ")))
	}
	return nil
}

func (s *Session) showTopics(ctx context.Context, cl *client.Client, st *ShowTopics) error {
	topics, err := cl.ListTopics(ctx)
	if err != nil {
		return err
	}
	var like *regexp.Regexp
	if st.Like != nil {
		like = likeRegexp(string(*st.Like))
	}
	t := &Table{Columns: []string{"name", "partitions", "replicas", "records", "bytes"}}
	for _, ti := range topics {
		// Internal topics (__consumer_offsets...) are noise in a
		// listing; SHOW TOPICS LIKE '__%' shows them.
		if like == nil && ti.Internal {
			continue
		}
		if like != nil && !like.MatchString(ti.Name) {
			continue
		}
		t.Rows = append(t.Rows, []any{ti.Name, int64(ti.Partitions), int64(ti.Replicas), orNull(ti.Records), orNull(ti.Bytes)})
	}
	s.out.Table(t)
	return nil
}

func (s *Session) describeTopic(ctx context.Context, cl *client.Client, st *DescribeTopic) error {
	d, err := cl.DescribeTopic(ctx, string(st.Name))
	if err != nil {
		return err
	}
	for _, t := range describeTables(d) {
		s.out.Table(t)
	}
	return nil
}

// describeTables are the tables DESCRIBE TOPIC prints for d: partitions,
// storage problems when there are any, configs when the broker reported
// them.
func describeTables(d client.TopicDescription) []*Table {
	parts := &Table{
		Title:   fmt.Sprintf("topic %s: %s", quoteRes(d.Name), plural(int64(len(d.Partitions)), "partition")),
		Kind:    "partition",
		Columns: []string{"partition", "leader", "replicas", "isr", "state", "log_start", "high_watermark", "last_stable", "records", "bytes"},
	}
	// A compacted topic's partitions also say how the log cleaner stands
	// with them; a broker that does not report it (Kafka) leaves NULLs.
	compacted := d.Compacted()
	if compacted {
		parts.Columns = append(parts.Columns, "dirty_ratio", "cleanings", "last_cleaned")
	}
	// Storage problems get their own table, only when there are any: an
	// offline partition with the reason, each damaged range of a partition
	// that otherwise serves, a partition the cleaner gave up on.
	problems := &Table{Title: "storage problems", Kind: "problem", Columns: []string{"partition", "state", "from_offset", "to_offset", "detail"}}
	for _, p := range d.Partitions {
		records := any(nil)
		if p.LogStart >= 0 && p.HighWatermark >= p.LogStart {
			records = p.HighWatermark - p.LogStart
		}
		row := []any{
			int64(p.Partition), int64(p.Leader), p.Replicas, p.ISR, p.State,
			orNull(p.LogStart), orNull(p.HighWatermark), orNull(p.LastStable), records, orNull(p.Bytes),
		}
		if compacted {
			row = append(row, compactionCells(p.Compaction)...)
		}
		parts.Rows = append(parts.Rows, row)
		if p.State == "offline" {
			detail := p.Storage
			if detail == "" && p.Err != nil {
				detail = p.Err.Error()
			}
			problems.Rows = append(problems.Rows, []any{int64(p.Partition), p.State, nil, nil, detail})
		}
		for _, cr := range p.Corrupt {
			problems.Rows = append(problems.Rows, []any{int64(p.Partition), "damaged", cr.FromOffset, orNull(cr.ToOffset), cr.Reason})
		}
		if c := p.Compaction; c != nil && c.Uncleanable != "" {
			problems.Rows = append(problems.Rows, []any{int64(p.Partition), "uncleanable", nil, nil, c.Uncleanable})
		}
	}
	out := []*Table{parts}
	if len(problems.Rows) > 0 {
		out = append(out, problems)
	}
	if d.Configs != nil {
		cfg := &Table{Title: "configs", Kind: "config", Columns: []string{"config", "value", "source"}}
		for _, c := range d.Configs {
			v := any(c.Value)
			if c.Sensitive {
				v = nil
			}
			cfg.Rows = append(cfg.Rows, []any{c.Name, v, c.Source})
		}
		out = append(out, cfg)
	}
	return out
}

// compactionCells are a compacted partition's dirty_ratio, cleanings and
// last_cleaned: NULL when its broker does not report them, last_cleaned
// NULL too before its first cleaning.
func compactionCells(c *client.Compaction) []any {
	if c == nil {
		return []any{nil, nil, nil}
	}
	last := any(nil)
	if !c.LastCleaned.IsZero() {
		last = c.LastCleaned
	}
	return []any{Ratio(c.DirtyRatio), c.Cleanings, last}
}

func (s *Session) showOffsets(ctx context.Context, cl *client.Client, st *ShowOffsets) error {
	name := string(st.Name)
	if st.At != nil {
		at, err := ParseTime(string(*st.At), s.opts.Now())
		if err != nil {
			return err
		}
		os, err := cl.OffsetsForTimestamp(ctx, name, at)
		if err != nil {
			return err
		}
		t := &Table{Columns: []string{"partition", "offset", "timestamp"}}
		for _, o := range os {
			t.Rows = append(t.Rows, []any{int64(o.Partition), o.Offset, o.Timestamp})
		}
		s.out.Table(t)
		return nil
	}
	os, err := cl.ListOffsets(ctx, name)
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"partition", "start", "end", "records"}}
	for _, o := range os {
		t.Rows = append(t.Rows, []any{int64(o.Partition), o.Start, o.End, o.Records()})
	}
	s.out.Table(t)
	return nil
}

// orNull maps the facade's -1 for "unknown" to NULL.
func orNull(n int64) any {
	if n < 0 {
		return nil
	}
	return n
}

func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// likeRegexp compiles a SQL LIKE pattern: % is any run of characters, _ is
// one character, a backslash escapes the next character. Matching is
// case-sensitive, like Kafka names.
func likeRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	esc := false
	for _, r := range pattern {
		switch {
		case esc:
			b.WriteString(regexp.QuoteMeta(string(r)))
			esc = false
		case r == '\\':
			esc = true
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if esc {
		b.WriteString(regexp.QuoteMeta(`\`))
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}
