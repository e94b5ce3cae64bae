package mql

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatStatement renders a statement as canonical MQL (upper-case keywords,
// names bare when possible, no trailing ';'). Parsing the result gives the
// same AST (positions aside): the round-trip tests and the fuzz target hold
// it to that.
func FormatStatement(s Statement) string {
	var b strings.Builder
	w := func(parts ...string) {
		for _, p := range parts {
			if p == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p)
		}
	}
	switch s := s.(type) {
	case *Connect:
		w("CONNECT", Quote(string(s.Addr)))
		if s.User != nil {
			w("USER", Quote(string(*s.User)), "PASSWORD", Quote(string(*s.Password)))
		}
		if s.Mechanism != nil {
			w("MECHANISM", Quote(string(*s.Mechanism)))
		}
		if s.TLS {
			w("TLS")
			if s.CA != nil {
				w("CA", Quote(string(*s.CA)))
			}
		}
	case *Disconnect:
		w("DISCONNECT")
	case *UseGroup:
		w("USE GROUP", QuoteName(string(s.Group)))
	case *SetFormat:
		w("SET FORMAT", QuoteName(string(s.Format)))
	case *SetIsolation:
		w("SET ISOLATION", fmtIsolation(s.Isolation))
	case *Help:
		w("HELP")
		w(s.Words...)
	case *Exit:
		w(s.Word)
	case *CreateTopic:
		w("CREATE TOPIC")
		if s.IfNotExists {
			w("IF NOT EXISTS")
		}
		w(QuoteName(string(s.Name)))
		if s.Partitions != nil {
			w("PARTITIONS", fmtInt(*s.Partitions))
		}
		if s.Replicas != nil {
			w("REPLICAS", fmtInt(*s.Replicas))
		}
		if len(s.Configs) > 0 {
			w("WITH", fmtConfigs(s.Configs))
		}
	case *DropTopic:
		w("DROP TOPIC")
		if s.IfExists {
			w("IF EXISTS")
		}
		w(QuoteName(string(s.Name)))
	case *AlterTopic:
		w("ALTER TOPIC", QuoteName(string(s.Name)))
		switch {
		case len(s.Set) > 0:
			w("SET", fmtConfigs(s.Set))
		case len(s.Reset) > 0:
			names := make([]string, len(s.Reset))
			for i, n := range s.Reset {
				names[i] = QuoteName(string(n))
			}
			w("RESET", "("+strings.Join(names, ", ")+")")
		case s.Add != nil:
			w("ADD PARTITIONS", fmtInt(*s.Add))
		}
	case *ShowTopics:
		w("SHOW TOPICS")
		if s.Like != nil {
			w("LIKE", Quote(string(*s.Like)))
		}
	case *DescribeTopic:
		w("DESCRIBE TOPIC", QuoteName(string(s.Name)))
	case *ShowOffsets:
		w("SHOW OFFSETS", QuoteName(string(s.Name)))
		if s.At != nil {
			w("AT TIMESTAMP", Quote(string(*s.At)))
		}
	case *Produce:
		w("PRODUCE INTO", QuoteName(string(s.Topic)))
		if s.Partition != nil {
			w("PARTITION", fmtInt(*s.Partition))
		}
		if len(s.Rows) > 0 {
			rows := make([]string, len(s.Rows))
			for i, r := range s.Rows {
				rows[i] = "(" + fmtLiteral(r.Key) + ", " + fmtLiteral(r.Value) + ")"
			}
			w("VALUES", strings.Join(rows, ", "))
			break
		}
		if s.Key != nil {
			w("KEY", fmtLiteral(s.Key))
		}
		w("VALUE", fmtLiteral(s.Value))
		if len(s.Headers) > 0 {
			hs := make([]string, len(s.Headers))
			for i, h := range s.Headers {
				hs[i] = QuoteName(string(h.Key)) + " = " + fmtLiteral(h.Value)
			}
			w("HEADERS", "("+strings.Join(hs, ", ")+")")
		}
		if s.Timestamp != nil {
			w("TIMESTAMP", Quote(string(*s.Timestamp)))
		}
	case *Select:
		w(fmtSelect(s))
	case *Fetch:
		w("FETCH FROM", QuoteName(string(s.Topic)))
		if s.Group != nil {
			w("GROUP", QuoteName(string(*s.Group)))
		}
		if s.Limit != nil {
			w("LIMIT", fmtInt(*s.Limit))
		}
	case *Subscribe:
		w("SUBSCRIBE TO", QuoteName(string(s.Topic)))
		if s.Group != nil {
			w("GROUP", QuoteName(string(*s.Group)))
		}
		if s.Where != nil {
			w("WHERE", fmtExpr(s.Where))
		}
		if s.From != nil {
			w("FROM", fmtStart(s.From))
		}
		if s.Timeout != nil {
			w("TIMEOUT", *s.Timeout)
		}
		if s.Limit != nil {
			w("LIMIT", fmtInt(*s.Limit))
		}
	case *Assert:
		w("ASSERT", "("+fmtSelect(s.Query)+")", s.Op, fmtLiteral(s.Want))
	case *ShowGroups:
		w("SHOW GROUPS")
		if s.Like != nil {
			w("LIKE", Quote(string(*s.Like)))
		}
	case *DescribeGroup:
		w("DESCRIBE GROUP", QuoteName(string(s.Name)))
	case *ShowTransactions:
		w("SHOW TRANSACTIONS")
		if s.Like != nil {
			w("LIKE", Quote(string(*s.Like)))
		}
	case *DescribeTransaction:
		w("DESCRIBE TRANSACTION", QuoteName(string(s.Name)))
	case *JoinGroup:
		ts := make([]string, len(s.Topics))
		for i, t := range s.Topics {
			ts[i] = QuoteName(string(t))
		}
		w("JOIN GROUP", QuoteName(string(s.Group)), "ON", strings.Join(ts, ", "))
	case *LeaveGroup:
		w("LEAVE GROUP")
		if s.Group != nil {
			w(QuoteName(string(*s.Group)))
		}
	case *CommitOffset:
		w("COMMIT", QuoteName(string(s.Topic)), "PARTITION", fmtInt(s.Partition), "OFFSET", fmtInt(s.Offset))
		if s.Group != nil {
			w("GROUP", QuoteName(string(*s.Group)))
		}
	case *ResetGroup:
		w("RESET GROUP", QuoteName(string(s.Group)))
		if s.Topic != nil {
			w("TOPIC", QuoteName(string(*s.Topic)))
		}
		w("TO", fmtStart(s.To))
	case *DropGroup:
		w("DROP GROUP")
		if s.IfExists {
			w("IF EXISTS")
		}
		w(QuoteName(string(s.Name)))
	case *BeginTxn:
		w("BEGIN TRANSACTION")
		if s.ID != nil {
			w(QuoteName(string(*s.ID)))
		}
	case *CommitTxn:
		w("COMMIT TRANSACTION")
	case *AbortTxn:
		w("ABORT TRANSACTION")
	case *CreateUser:
		w("CREATE USER", QuoteName(string(s.Name)), "PASSWORD", Quote(string(s.Password)))
		if s.Mechanism != nil {
			w("MECHANISM", Quote(string(*s.Mechanism)))
		}
	case *DropUser:
		w("DROP USER", QuoteName(string(s.Name)))
		if s.Mechanism != nil {
			w("MECHANISM", Quote(string(*s.Mechanism)))
		}
	case *ShowUsers:
		w("SHOW USERS")
	case *Grant:
		w("GRANT", fmtOps(s.Ops), "ON", fmtResource(s.Resource), "TO", QuoteName(string(s.Principal)))
	case *Revoke:
		w("REVOKE", fmtOps(s.Ops), "ON", fmtResource(s.Resource), "FROM", QuoteName(string(s.Principal)))
	case *SetQuota:
		w("SET QUOTA", fmtConfigs(s.Configs), "FOR", fmtQuotaTarget(s.Target))
	case *ResetQuota:
		names := make([]string, len(s.Keys))
		for i, n := range s.Keys {
			names[i] = QuoteName(string(n))
		}
		w("RESET QUOTA", "("+strings.Join(names, ", ")+")", "FOR", fmtQuotaTarget(s.Target))
	case *ShowQuotas:
		w("SHOW QUOTAS")
		if s.Target != nil {
			w("FOR", fmtQuotaTarget(s.Target))
		}
	case *ShowAcls:
		w("SHOW ACLS")
		if s.Principal != nil {
			w("FOR", QuoteName(string(*s.Principal)))
		}
	case *ShowBrokers:
		w("SHOW BROKERS")
	case *ShowCluster:
		w("SHOW CLUSTER")
	case *MovePartition:
		bs := make([]string, len(s.Brokers))
		for i, id := range s.Brokers {
			bs[i] = fmtInt(id)
		}
		w("MOVE PARTITION", QuoteName(string(s.Topic)), fmtInt(s.Partition), "TO BROKERS", "("+strings.Join(bs, ", ")+")")
	case *ShowReassignments:
		w("SHOW REASSIGNMENTS")
	default:
		return fmt.Sprintf("<unknown statement %T>", s)
	}
	return b.String()
}

func fmtInt(i Int) string { return strconv.FormatInt(int64(i), 10) }

func fmtLiteral(l *Literal) string {
	switch {
	case l == nil:
		return "NULL"
	case l.Str != nil:
		return Quote(string(*l.Str))
	case l.Int != nil:
		return fmtInt(*l.Int)
	default:
		return "NULL"
	}
}

func fmtConfigs(cs []*Config) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		v := ""
		switch {
		case c.Value.Str != nil:
			v = Quote(string(*c.Value.Str))
		case c.Value.Number != nil:
			v = *c.Value.Number
		case c.Value.Qty != nil:
			v = *c.Value.Qty
		case c.Value.Word != nil:
			v = *c.Value.Word
		}
		parts[i] = QuoteName(string(c.Key)) + " = " + v
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func fmtSelect(s *Select) string {
	cols := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		switch {
		case c.Star:
			cols[i] = "*"
		case c.Count:
			cols[i] = "count(*)"
		case c.Header != nil:
			cols[i] = "header(" + Quote(string(*c.Header)) + ")"
		default:
			cols[i] = strings.ToLower(c.Field)
		}
	}
	parts := []string{"SELECT", strings.Join(cols, ", "), "FROM", QuoteName(string(s.Topic))}
	if s.Partition != nil {
		parts = append(parts, "PARTITION", fmtInt(*s.Partition))
	}
	if s.Where != nil {
		parts = append(parts, "WHERE", fmtExpr(s.Where))
	}
	if s.From != nil {
		parts = append(parts, "FROM", fmtStart(s.From))
	}
	if s.Limit != nil {
		parts = append(parts, "LIMIT", fmtInt(*s.Limit))
	}
	if s.Isolation != nil {
		parts = append(parts, "ISOLATION", fmtIsolation(s.Isolation))
	}
	return strings.Join(parts, " ")
}

func fmtIsolation(i *Isolation) string {
	if i.Committed {
		return "READ COMMITTED"
	}
	return "READ UNCOMMITTED"
}

func fmtStart(p *StartAt) string {
	switch {
	case p.Latest:
		return "LATEST"
	case p.Offset != nil:
		return "OFFSET " + fmtInt(*p.Offset)
	case p.Timestamp != nil:
		return "TIMESTAMP " + Quote(string(*p.Timestamp))
	default:
		return "EARLIEST"
	}
}

func fmtExpr(e *Expr) string {
	ors := make([]string, len(e.Or))
	for i, a := range e.Or {
		ands := make([]string, len(a.And))
		for j, n := range a.And {
			t := ""
			if n.Term.Paren != nil {
				t = "(" + fmtExpr(n.Term.Paren) + ")"
			} else {
				t = fmtComparison(n.Term.Cmp)
			}
			if n.Not {
				t = "NOT " + t
			}
			ands[j] = t
		}
		ors[i] = strings.Join(ands, " AND ")
	}
	return strings.Join(ors, " OR ")
}

func fmtComparison(c *Comparison) string {
	left := operandName(c.Left)
	switch {
	case c.Like != nil:
		if c.NotLike {
			return left + " NOT LIKE " + Quote(string(*c.Like))
		}
		return left + " LIKE " + Quote(string(*c.Like))
	case c.Is:
		if c.IsNot {
			return left + " IS NOT NULL"
		}
		return left + " IS NULL"
	}
	return left + " " + c.Op + " " + fmtLiteral(c.Right)
}

func fmtOps(ops []Name) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
		if !IsKeyword(s[i]) && !isBareName(s[i]) {
			s[i] = Quote(s[i]) // cannot happen for a valid op; keeps the formatter total
		}
	}
	return strings.Join(s, ", ")
}

func fmtResource(r *Resource) string {
	if r.Cluster {
		return "CLUSTER"
	}
	s := r.Kind + " " + QuoteName(string(r.Name))
	if r.Prefixed {
		s += " PREFIXED"
	}
	return s
}
