package mql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moonmq/moonmq/net/client"
)

func literalBytes(l *Literal) []byte {
	switch {
	case l == nil || l.Null:
		return nil
	case l.Str != nil:
		return []byte(string(*l.Str))
	case l.Int != nil:
		return []byte(strconv.FormatInt(int64(*l.Int), 10))
	}
	return nil
}

func (s *Session) produce(ctx context.Context, cl *client.Client, st *Produce) error {
	topic := string(st.Topic)
	part := client.AnyPartition
	if st.Partition != nil {
		part = int32(*st.Partition)
	}
	var recs []client.Record
	if len(st.Rows) > 0 {
		for _, kv := range st.Rows {
			recs = append(recs, client.Record{Partition: part, Key: literalBytes(kv.Key), Value: literalBytes(kv.Value)})
		}
	} else {
		r := client.Record{Partition: part, Key: literalBytes(st.Key), Value: literalBytes(st.Value)}
		for _, h := range st.Headers {
			r.Headers = append(r.Headers, client.Header{Key: string(h.Key), Value: literalBytes(h.Value)})
		}
		if st.Timestamp != nil {
			ts, err := ParseTime(string(*st.Timestamp), s.opts.Now())
			if err != nil {
				return err
			}
			r.Timestamp = ts
		}
		recs = append(recs, r)
	}
	var (
		res    []client.Produced
		err    error
		suffix string
	)
	if s.txn != nil {
		res, err = s.txn.Produce(ctx, topic, recs)
		suffix = " (in transaction " + quoteRes(s.txn.ID()) + ")"
	} else {
		res, err = cl.Produce(ctx, topic, recs)
	}
	if err != nil {
		return err
	}
	s.out.OK(producedMessage(topic, res) + suffix)
	return nil
}

// producedMessage: "produced to orders → partition 2, offset 0" for one
// record; per-partition offset ranges for a batch.
func producedMessage(topic string, res []client.Produced) string {
	if len(res) == 1 {
		return fmt.Sprintf("produced to %s → partition %d, offset %d", topic, res[0].Partition, res[0].Offset)
	}
	type span struct{ lo, hi int64 }
	spans := map[int32]*span{}
	var parts []int32
	for _, r := range res {
		sp := spans[r.Partition]
		if sp == nil {
			spans[r.Partition] = &span{r.Offset, r.Offset}
			parts = append(parts, r.Partition)
			continue
		}
		sp.lo, sp.hi = min(sp.lo, r.Offset), max(sp.hi, r.Offset)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var where []string
	for _, p := range parts {
		sp := spans[p]
		if sp.lo == sp.hi {
			where = append(where, fmt.Sprintf("partition %d, offset %d", p, sp.lo))
		} else {
			where = append(where, fmt.Sprintf("partition %d, offsets %d..%d", p, sp.lo, sp.hi))
		}
	}
	return fmt.Sprintf("produced %d records to %s → %s", len(res), topic, strings.Join(where, "; "))
}

// mergeByTime orders records for display: offset order within each
// partition (a log is read in order, even when its timestamps are not
// monotonic), and across partitions by repeatedly taking the partition
// whose next record is oldest (ties: lower partition).
func mergeByTime(recs []client.Record) []client.Record {
	byPart := map[int32][]client.Record{}
	var parts []int32
	for _, r := range recs {
		if _, ok := byPart[r.Partition]; !ok {
			parts = append(parts, r.Partition)
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		rs := byPart[p]
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Offset < rs[j].Offset })
	}
	out := make([]client.Record, 0, len(recs))
	for len(out) < len(recs) {
		best := int32(-1)
		for _, p := range parts {
			rs := byPart[p]
			if len(rs) == 0 {
				continue
			}
			if best < 0 || rs[0].Timestamp.Before(byPart[best][0].Timestamp) {
				best = p
			}
		}
		out = append(out, byPart[best][0])
		byPart[best] = byPart[best][1:]
	}
	return out
}

// recordColumns are the columns of SELECT * and of FETCH and SUBSCRIBE;
// recordNumeric marks those that hold numbers.
var (
	recordColumns = []string{"partition", "offset", "timestamp", "key", "value", "headers"}
	recordNumeric = []bool{true, true, false, false, false, false}
)

func recordRow(r client.Record) []any {
	return []any{int64(r.Partition), r.Offset, r.Timestamp, nilBytes(r.Key), nilBytes(r.Value), headersCell(r.Headers)}
}

func nilBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return Bytes(b)
}

func headersCell(hs []client.Header) any {
	if len(hs) == 0 {
		return nil
	}
	return hs
}

// projection returns the column names and cell getters of a SELECT list.
func projection(cols []*Column) ([]string, func(client.Record) []any) {
	if len(cols) == 1 && cols[0].Star {
		return recordColumns, recordRow
	}
	names := make([]string, len(cols))
	getters := make([]func(client.Record) any, len(cols))
	for i, c := range cols {
		if c.Header != nil {
			key := string(*c.Header)
			names[i] = "header(" + key + ")"
			getters[i] = func(r client.Record) any { return nilBytes(headerValue(r, key)) }
			continue
		}
		names[i] = strings.ToLower(c.Field)
		switch c.Field {
		case "OFFSET":
			getters[i] = func(r client.Record) any { return r.Offset }
		case "PARTITION":
			getters[i] = func(r client.Record) any { return int64(r.Partition) }
		case "KEY":
			getters[i] = func(r client.Record) any { return nilBytes(r.Key) }
		case "VALUE":
			getters[i] = func(r client.Record) any { return nilBytes(r.Value) }
		case "TIMESTAMP":
			getters[i] = func(r client.Record) any { return r.Timestamp }
		case "HEADERS":
			getters[i] = func(r client.Record) any { return headersCell(r.Headers) }
		}
	}
	return names, func(r client.Record) []any {
		row := make([]any, len(getters))
		for i, g := range getters {
			row[i] = g(r)
		}
		return row
	}
}

func headerValue(r client.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			if h.Value == nil {
				return []byte{}
			}
			return h.Value
		}
	}
	return nil
}

// startPosition converts FROM ... to a client.Position. FROM LATEST with a
// LIMIT means "the newest LIMIT records of each partition", which is what
// a person asking for the latest records wants; without a LIMIT it is the
// end of the log (nothing to read). A relative TIMESTAMP counts back from
// now.
func startPosition(p *StartAt, limit *Int, now time.Time) (client.Position, error) {
	switch {
	case p == nil || p.Earliest:
		return client.Earliest(), nil
	case p.Latest:
		if limit != nil {
			return client.FromEnd(int64(*limit)), nil
		}
		return client.Latest(), nil
	case p.Offset != nil:
		return client.Offset(int64(*p.Offset)), nil
	default:
		t, err := ParseTime(string(*p.Timestamp), now)
		if err != nil {
			return client.Position{}, err
		}
		return client.Timestamp(t), nil
	}
}

// query runs a SELECT: a bounded read that stops at the end offsets it
// snapshots first, so it returns on a quiet topic.
func (s *Session) query(ctx context.Context, cl *client.Client, st *Select) (*Table, error) {
	req := client.ReadRequest{Topic: string(st.Topic), Isolation: s.isolation}
	if st.Isolation != nil {
		req.Isolation = isolationOf(st.Isolation)
	}
	if st.Partition != nil {
		req.Partitions = []int32{int32(*st.Partition)}
	}
	now := s.opts.Now()
	start, err := startPosition(st.From, st.Limit, now)
	if err != nil {
		return nil, err
	}
	req.Start = start
	filter, err := compileFilter(st.Where, now)
	if err != nil {
		return nil, err
	}
	if st.From == nil {
		pushDown(st.Where, &req)
		if st.Partition == nil && len(req.Partitions) == 1 {
			// WHERE partition = N on a partition the topic does not have
			// matches nothing; it is not an error as PARTITION N would be.
			offs, err := cl.ListOffsets(ctx, req.Topic)
			if err != nil {
				return nil, err
			}
			exists := false
			for _, o := range offs {
				exists = exists || o.Partition == req.Partitions[0]
			}
			if !exists {
				req.Partitions = []int32{}
			}
		}
	}
	count := len(st.Columns) == 1 && st.Columns[0].Count
	if count {
		// Count inside the filter and keep nothing: memory stays flat
		// however many records match.
		var n int64
		req.Filter = func(r client.Record) bool {
			if filter == nil || filter(r) {
				n++
			}
			return false
		}
		if req.Partitions != nil && len(req.Partitions) == 0 {
			return &Table{Columns: []string{"count"}, Rows: [][]any{{int64(0)}}}, nil
		}
		if _, err := cl.Read(ctx, req); err != nil {
			return nil, err
		}
		return &Table{Columns: []string{"count"}, Rows: [][]any{{n}}}, nil
	}
	req.Filter = filter
	if st.Limit != nil {
		if *st.Limit == 0 {
			names, _ := projection(st.Columns)
			// Still check that the topic exists.
			if _, err := cl.ListOffsets(ctx, req.Topic); err != nil {
				return nil, err
			}
			return &Table{Columns: names}, nil
		}
		req.Limit = int(*st.Limit)
	}
	names, row := projection(st.Columns)
	t := &Table{Columns: names, Rows: [][]any{}}
	if req.Partitions != nil && len(req.Partitions) == 0 {
		return t, nil
	}
	recs, err := cl.Read(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, r := range mergeByTime(recs) {
		t.Rows = append(t.Rows, row(r))
	}
	return t, nil
}

// pushDown narrows a read with conditions every matching record must meet
// (top-level AND terms): partition = N restricts the partitions read, and
// offset >= N / > N / = N moves the start. The filter still runs, so this
// only saves reading.
func pushDown(e *Expr, req *client.ReadRequest) {
	if e == nil || len(e.Or) != 1 {
		return
	}
	var from int64 = -1
	for _, n := range e.Or[0].And {
		if n.Not || n.Term.Cmp == nil || n.Term.Cmp.Right == nil || n.Term.Cmp.Right.Int == nil {
			continue
		}
		c := n.Term.Cmp
		v := int64(*c.Right.Int)
		switch {
		case c.Left.Field == "PARTITION" && c.Op == "=" && (v < 0 || v > math.MaxInt32):
			req.Partitions = []int32{} // no partition has that number: nothing matches
		case c.Left.Field == "PARTITION" && c.Op == "=":
			if req.Partitions == nil {
				req.Partitions = []int32{int32(v)}
			} else if req.Partitions[0] != int32(v) {
				req.Partitions = []int32{} // contradiction: nothing matches
			}
		case c.Left.Field == "OFFSET" && (c.Op == ">=" || c.Op == "="):
			from = max(from, v)
		case c.Left.Field == "OFFSET" && c.Op == ">":
			from = max(from, v+1)
		}
	}
	if from > 0 {
		req.Start = client.Offset(from)
	}
}

func (s *Session) assert(ctx context.Context, cl *client.Client, st *Assert) error {
	t, err := s.query(ctx, cl, st.Query)
	if err != nil {
		return err
	}
	if len(t.Columns) != 1 || len(t.Rows) > 1 {
		return fmt.Errorf("ASSERT needs a query that returns one value (count(*), or one column with at most one row); got %s of %s",
			plural(int64(len(t.Rows)), "row"), plural(int64(len(t.Columns)), "column"))
	}
	var got any
	if len(t.Rows) == 1 {
		got = t.Rows[0][0]
	}
	ok, err := compareCell(got, st.Op, st.Want, s.opts.Now())
	if err != nil {
		return err
	}
	if !ok {
		return &AssertionError{Statement: FormatStatement(st), Got: cellText(got)}
	}
	s.out.OK("assertion holds: " + FormatStatement(st))
	return nil
}

// AssertionError is a failed ASSERT.
type AssertionError struct {
	Statement string
	Got       string
}

func (e *AssertionError) Error() string {
	return fmt.Sprintf("assertion failed: %s (got %s)", e.Statement, e.Got)
}

// compareCell compares a query result with an ASSERT literal (a relative
// time counts back from now).
func compareCell(got any, op string, want *Literal, now time.Time) (bool, error) {
	if want.Null {
		switch op {
		case "=":
			return got == nil, nil
		case "!=", "<>":
			return got != nil, nil
		}
		return false, fmt.Errorf("only = and != compare with NULL")
	}
	if got == nil {
		return false, nil
	}
	switch g := got.(type) {
	case int64:
		if want.Int == nil {
			return false, fmt.Errorf("the query returns a number: compare it with a number, not %s", fmtLiteral(want))
		}
		return cmpOrdered(g, int64(*want.Int), op), nil
	case time.Time:
		var w time.Time
		switch {
		case want.Str != nil:
			t, err := ParseTime(string(*want.Str), now)
			if err != nil {
				return false, err
			}
			w = t
		default:
			w = time.UnixMilli(int64(*want.Int))
		}
		return cmpOrdered(g.UnixMilli(), w.UnixMilli(), op), nil
	default:
		return cmpOrdered(cellText(got), string(literalBytes(want)), op), nil
	}
}

func cmpOrdered[T int64 | string](a, b T, op string) bool {
	switch op {
	case "=":
		return a == b
	case "!=", "<>":
		return a != b
	case "<":
		return a < b
	case "<=":
		return a <= b
	case ">":
		return a > b
	case ">=":
		return a >= b
	}
	return false
}

// compileFilter turns a WHERE expression into a record predicate (nil for
// no WHERE). NULL compares false, as in SQL. Relative times are fixed
// against now once, so a long SUBSCRIBE keeps the bound it started with.
func compileFilter(e *Expr, now time.Time) (func(client.Record) bool, error) {
	if e == nil {
		return nil, nil
	}
	return compileExpr(e, now)
}

func compileExpr(e *Expr, now time.Time) (func(client.Record) bool, error) {
	ors := make([]func(client.Record) bool, len(e.Or))
	for i, a := range e.Or {
		ands := make([]func(client.Record) bool, len(a.And))
		for j, n := range a.And {
			var f func(client.Record) bool
			var err error
			if n.Term.Paren != nil {
				f, err = compileExpr(n.Term.Paren, now)
			} else {
				f, err = compileComparison(n.Term.Cmp, now)
			}
			if err != nil {
				return nil, err
			}
			if n.Not {
				inner := f
				f = func(r client.Record) bool { return !inner(r) }
			}
			ands[j] = f
		}
		ors[i] = func(r client.Record) bool {
			for _, f := range ands {
				if !f(r) {
					return false
				}
			}
			return true
		}
	}
	return func(r client.Record) bool {
		for _, f := range ors {
			if f(r) {
				return true
			}
		}
		return false
	}, nil
}

func compileComparison(c *Comparison, now time.Time) (func(client.Record) bool, error) {
	var text func(client.Record) []byte
	switch {
	case c.Left.Header != nil:
		key := string(*c.Left.Header)
		text = func(r client.Record) []byte { return headerValue(r, key) }
	case c.Left.Field == "KEY":
		text = func(r client.Record) []byte { return r.Key }
	case c.Left.Field == "VALUE":
		text = func(r client.Record) []byte { return r.Value }
	}
	switch {
	case c.Like != nil:
		re := likeRegexp(string(*c.Like))
		return func(r client.Record) bool {
			v := text(r)
			return v != nil && re.Match(v) != c.NotLike
		}, nil
	case c.Is:
		return func(r client.Record) bool { return (text(r) == nil) != c.IsNot }, nil
	case text != nil:
		want := literalBytes(c.Right)
		return func(r client.Record) bool {
			v := text(r)
			return v != nil && cmpInt(bytes.Compare(v, want), c.Op)
		}, nil
	}
	var num func(client.Record) int64
	var want int64
	switch c.Left.Field {
	case "OFFSET":
		num = func(r client.Record) int64 { return r.Offset }
	case "PARTITION":
		num = func(r client.Record) int64 { return int64(r.Partition) }
	case "TIMESTAMP":
		num = func(r client.Record) int64 { return r.Timestamp.UnixMilli() }
	default:
		return nil, fmt.Errorf("cannot compare %s", operandName(c.Left))
	}
	switch {
	case c.Right.Int != nil:
		want = int64(*c.Right.Int)
	case c.Right.Str != nil && c.Left.Field == "TIMESTAMP":
		t, err := ParseTime(string(*c.Right.Str), now)
		if err != nil {
			return nil, err
		}
		want = t.UnixMilli()
	default:
		return nil, fmt.Errorf("compare %s with a number", operandName(c.Left))
	}
	return func(r client.Record) bool { return cmpOrdered(num(r), want, c.Op) }, nil
}

func cmpInt(c int, op string) bool { return cmpOrdered(int64(c), 0, op) }

var errLimitReached = errors.New("limit reached")

func (s *Session) subscribe(ctx context.Context, cl *client.Client, st *Subscribe) error {
	group := ""
	if st.Group != nil {
		group = string(*st.Group)
		if err := s.require(ctx, cl, featGroupsMember); err != nil {
			return err
		}
	}
	now := s.opts.Now()
	from := client.Latest()
	if st.From != nil {
		p, err := startPosition(st.From, nil, now)
		if err != nil {
			return err
		}
		from = p
	}
	filter, err := compileFilter(st.Where, now)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if st.Timeout != nil {
		d, err := ParseTimeout(*st.Timeout)
		if err != nil {
			return err
		}
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, d)
		defer c2()
	}
	limit := -1
	if st.Limit != nil {
		limit = int(*st.Limit)
		if limit == 0 {
			return nil
		}
	}
	// A missing topic is an error on its own, not an empty table
	// followed by one.
	if _, err := cl.ListOffsets(ctx, string(st.Topic)); err != nil {
		return err
	}
	s.out.BeginStream(recordColumns, []int{9, 6, 24, 8, 16, 7}, recordNumeric)
	n := 0
	err = cl.ConsumeIsolated(ctx, string(st.Topic), group, from, s.isolation, func(r client.Record) error {
		// Records after the limit return an error so a group does not
		// commit them: they were not shown.
		if limit >= 0 && n >= limit {
			return errLimitReached
		}
		if filter == nil || filter(r) {
			s.out.StreamRow(recordRow(r))
			n++
			if n == limit {
				cancel()
			}
		}
		return nil
	})
	s.out.EndStream()
	if errors.Is(err, errLimitReached) {
		return nil
	}
	return err
}

func (s *Session) fetch(ctx context.Context, cl *client.Client, st *Fetch) error {
	group, err := s.groupFor(st.Group, "FETCH")
	if err != nil {
		return err
	}
	if err := s.require(ctx, cl, featGroupsCommit); err != nil {
		return err
	}
	topic := string(st.Topic)
	ranges, err := cl.ListOffsets(ctx, topic)
	if err != nil {
		return err
	}
	committed, err := s.committedOffsets(ctx, cl, group, topic)
	if err != nil {
		return err
	}
	// As a member of the group, read only this member's partitions (the
	// others belong to other members) and commit with its generation.
	var only map[int32]bool
	if m := s.member; m != nil && m.Group() == group {
		if !slices.Contains(m.Topics(), topic) {
			return fmt.Errorf("this session's member of group %s does not consume topic %s (it joined ON %s)",
				quoteRes(group), quoteRes(topic), strings.Join(m.Topics(), ", "))
		}
		only = map[int32]bool{}
		for _, p := range m.AssignedPartitions(topic) {
			only[p] = true
		}
	}
	limit := 0
	if st.Limit != nil {
		limit = int(*st.Limit)
	}
	var recs []client.Record
	if st.Limit == nil || limit > 0 {
		for _, pr := range ranges {
			if only != nil && !only[pr.Partition] {
				continue
			}
			from := pr.Start
			if c, ok := committed[pr.Partition]; ok {
				from = min(max(c, pr.Start), pr.End)
			}
			if from >= pr.End {
				continue
			}
			got, err := cl.Read(ctx, client.ReadRequest{
				Topic: topic, Partitions: []int32{pr.Partition}, Start: client.Offset(from), Limit: limit,
				Isolation: s.isolation,
			})
			if err != nil {
				return err
			}
			recs = append(recs, got...)
		}
	}
	recs = mergeByTime(recs)
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	next := map[int32]int64{}
	t := &Table{Columns: recordColumns, Rows: [][]any{}}
	for _, r := range recs {
		t.Rows = append(t.Rows, recordRow(r))
		next[r.Partition] = max(next[r.Partition], r.Offset+1)
	}
	if len(next) > 0 {
		if err := s.commit(ctx, cl, group, topic, next); err != nil {
			return fmt.Errorf("read %s but could not commit the new position: %w", plural(int64(len(recs)), "record"), err)
		}
	}
	s.out.Table(t)
	return nil
}
