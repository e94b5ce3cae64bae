package mql

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/moonmq/moonmq/internal/cli"
	"github.com/moonmq/moonmq/internal/when"
)

// validate applies the rules the grammar cannot express (value ranges,
// formats, operand types), so that a statement that parses is one the
// executor can run. Errors point at the value at fault (the '5m' of
// TIMESTAMP '5m', the 0 of PARTITIONS 0), found among the statement's
// tokens: the AST keeps the positions of nodes, not of every literal.
func validate(s Statement, toks []lexer.Token) error {
	at := locator(toks)
	switch s := s.(type) {
	case *SetFormat:
		if _, err := ParseFormat(string(s.Format)); err != nil {
			return posErr(at.after(s.Pos, "FORMAT"), "%v", err)
		}
	case *CreateTopic:
		if s.Partitions != nil && *s.Partitions < 1 {
			return posErr(at.after(s.Pos, "PARTITIONS"), "PARTITIONS must be at least 1")
		}
		if s.Partitions != nil && *s.Partitions > math.MaxInt32 {
			return posErr(at.after(s.Pos, "PARTITIONS"), "PARTITIONS must be at most %d", math.MaxInt32)
		}
		if s.Replicas != nil && (*s.Replicas < 1 || *s.Replicas > math.MaxInt16) {
			return posErr(at.after(s.Pos, "REPLICAS"), "REPLICAS must be between 1 and %d", math.MaxInt16)
		}
		return validateConfigs(s.Configs)
	case *AlterTopic:
		if s.Add != nil && (*s.Add < 1 || *s.Add > math.MaxInt32) {
			return posErr(at.after(s.Pos, "ADD", "PARTITIONS"), "ADD PARTITIONS needs a positive number")
		}
		return validateConfigs(s.Set)
	case *ShowOffsets:
		if s.At != nil {
			if err := checkTime(string(*s.At)); err != nil {
				return posErr(at.after(s.Pos, "AT", "TIMESTAMP"), "%v", err)
			}
		}
	case *Produce:
		if err := partitionArg(at.after(s.Pos, "PARTITION"), s.Partition); err != nil {
			return err
		}
		if s.Timestamp != nil {
			if err := checkTime(string(*s.Timestamp)); err != nil {
				return posErr(at.after(s.Pos, "TIMESTAMP"), "%v", err)
			}
		}
	case *Select:
		return validateSelect(s, at)
	case *Fetch:
		return limitArg(at.after(s.Pos, "LIMIT"), s.Limit)
	case *Subscribe:
		if s.Timeout != nil {
			if _, err := ParseTimeout(*s.Timeout); err != nil {
				return posErr(at.after(s.Pos, "TIMEOUT"), "%v", err)
			}
		}
		if err := validateStart(s.From, at); err != nil {
			return err
		}
		if err := validateExpr(s.Where); err != nil {
			return err
		}
		return limitArg(at.after(s.Pos, "LIMIT"), s.Limit)
	case *Assert:
		if err := validateSelect(s.Query, at); err != nil {
			return err
		}
	case *CommitOffset:
		if s.Partition < 0 || s.Partition > math.MaxInt32 {
			return posErr(at.after(s.Pos, "PARTITION"), "PARTITION must be between 0 and %d", math.MaxInt32)
		}
		if s.Offset < 0 {
			return posErr(at.after(s.Pos, "OFFSET"), "OFFSET must not be negative")
		}
	case *ResetGroup:
		return validateStart(s.To, at)
	case *SetQuota:
		return validateSetQuota(s)
	case *ResetQuota:
		return validateResetQuota(s, at)
	case *ShowQuotas:
		return validateQuotaTarget(s.Target)
	case *Grant:
		return validateOps(s.Pos, s.Ops, at)
	case *Revoke:
		return validateOps(s.Pos, s.Ops, at)
	case *MovePartition:
		if s.Partition < 0 || s.Partition > math.MaxInt32 {
			// MOVE PARTITION topic n: n follows the topic's name.
			return posErr(at.next(at.after(s.Pos, "PARTITION")), "partition must be between 0 and %d", math.MaxInt32)
		}
		for _, b := range s.Brokers {
			if b < 0 || b > math.MaxInt32 {
				return posErr(at.value(at.after(s.Pos, "BROKERS"), strconv.FormatInt(int64(b), 10)), "broker id %d is out of range", b)
			}
		}
	}
	return nil
}

// locator finds values among a statement's tokens.
type locator []lexer.Token

// after returns where the token after the keywords kws (in this order, the
// first at or after from) starts, or from if they are not there.
func (l locator) after(from lexer.Position, kws ...string) lexer.Position {
	i := l.index(from)
	for _, kw := range kws {
		for i < len(l) && !(l[i].Type == tokKeyword && l[i].Value == kw) {
			i++
		}
		i++ // past the keyword
	}
	if i <= 0 || i > len(l) {
		return from
	}
	if i == len(l) {
		return l[len(l)-1].Pos
	}
	return l[i].Pos
}

// next returns where the token after the one at pos starts (pos if none).
func (l locator) next(pos lexer.Position) lexer.Position {
	if i := l.index(pos); i+1 < len(l) && l[i].Pos.Offset == pos.Offset {
		return l[i+1].Pos
	}
	return pos
}

// value returns where the first token spelt v at or after from starts
// (from if there is none).
func (l locator) value(from lexer.Position, v string) lexer.Position {
	for i := l.index(from); i < len(l); i++ {
		if l[i].Value == v {
			return l[i].Pos
		}
	}
	return from
}

// index returns the index of the first token at or after pos.
func (l locator) index(pos lexer.Position) int {
	for i, t := range l {
		if t.Pos.Offset >= pos.Offset {
			return i
		}
	}
	return len(l)
}

func validateSelect(s *Select, at locator) error {
	for _, c := range s.Columns {
		if (c.Star || c.Count) && len(s.Columns) > 1 {
			what := "*"
			if c.Count {
				what = "count(*)"
			}
			return posErr(c.Pos, "%s must be the only column", what)
		}
	}
	if len(s.Columns) == 1 && s.Columns[0].Count && s.Limit != nil {
		// A count is one row; LIMIT would have to mean "count at most N",
		// which nobody reads the same way twice. Refuse it.
		return posErr(s.Columns[0].Pos, "LIMIT does not apply to count(*); narrow the count with WHERE or FROM")
	}
	// PARTITION n follows FROM topic; the column list may say partition too.
	if err := partitionArg(at.after(s.Pos, "FROM", "PARTITION"), s.Partition); err != nil {
		return err
	}
	if err := validateExpr(s.Where); err != nil {
		return err
	}
	if err := validateStart(s.From, at); err != nil {
		return err
	}
	return limitArg(at.after(s.Pos, "LIMIT"), s.Limit)
}

func validateStart(p *StartAt, at locator) error {
	if p == nil {
		return nil
	}
	// p starts at its keyword: OFFSET n, TIMESTAMP 'time'.
	if p.Offset != nil && *p.Offset < 0 {
		return posErr(at.next(p.Pos), "OFFSET must not be negative")
	}
	if p.Timestamp != nil {
		if err := checkTime(string(*p.Timestamp)); err != nil {
			return posErr(at.next(p.Pos), "%v", err)
		}
	}
	return nil
}

func validateExpr(e *Expr) error {
	if e == nil {
		return nil
	}
	for _, a := range e.Or {
		for _, n := range a.And {
			if n.Term.Paren != nil {
				if err := validateExpr(n.Term.Paren); err != nil {
					return err
				}
				continue
			}
			if err := validateComparison(n.Term.Cmp); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateComparison(c *Comparison) error {
	field := c.Left.Field
	textual := c.Left.Header != nil || field == "KEY" || field == "VALUE"
	name := operandName(c.Left)
	switch {
	case c.Like != nil:
		if !textual {
			return posErr(c.Pos, "LIKE applies to key, value and header(...), not %s", name)
		}
	case c.Is:
		if !textual {
			return posErr(c.Pos, "%s is never NULL", name)
		}
	default:
		r := c.Right
		switch {
		case textual && r.Int != nil:
			return posErr(r.Pos, "compare %s with a string ('%d'), not a number", name, *r.Int)
		case textual && r.Null:
			return posErr(r.Pos, "use %s IS NULL to test for NULL", name)
		case field == "TIMESTAMP" && r.Str != nil:
			if err := checkTime(string(*r.Str)); err != nil {
				return posErr(r.Pos, "%v", err)
			}
		case field == "TIMESTAMP" && r.Null:
			return posErr(r.Pos, "timestamp is never NULL")
		case (field == "OFFSET" || field == "PARTITION") && r.Int == nil:
			return posErr(r.Pos, "compare %s with a number", name)
		}
	}
	return nil
}

func operandName(o *Operand) string {
	if o.Header != nil {
		return "header(" + Quote(string(*o.Header)) + ")"
	}
	return strings.ToLower(o.Field)
}

func partitionArg(pos lexer.Position, p *Int) error {
	if p != nil && (*p < 0 || *p > math.MaxInt32) {
		return posErr(pos, "PARTITION must be between 0 and %d", math.MaxInt32)
	}
	return nil
}

func limitArg(pos lexer.Position, l *Int) error {
	if l != nil && (*l < 0 || *l > math.MaxInt32) {
		return posErr(pos, "LIMIT must be between 0 and %d", math.MaxInt32)
	}
	return nil
}

func validateConfigs(cs []*Config) error {
	seen := map[Name]bool{}
	for _, c := range cs {
		if c.Key == "" {
			return posErr(c.Pos, "empty config name")
		}
		if seen[c.Key] {
			return posErr(c.Pos, "config %s is given twice", c.Key)
		}
		seen[c.Key] = true
		if _, err := ConfigValueFor(string(c.Key), c.Value); err != nil {
			return posErr(c.Value.Pos, "%v", err)
		}
	}
	return nil
}

// aclOps are the ACL operations GRANT and REVOKE accept.
var aclOps = []string{
	"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
}

func validateOps(pos lexer.Position, ops []Name, at locator) error {
	for _, op := range ops {
		ok := false
		for _, a := range aclOps {
			if strings.EqualFold(string(op), a) {
				ok = true
			}
		}
		if !ok {
			msg := fmt.Sprintf("unknown operation %s (want one of %s)", op, strings.Join(aclOps, ", "))
			if s := cli.Suggest(string(op), aclOps); s != "" {
				msg += "; did you mean " + s + "?"
			}
			return posErr(at.value(pos, string(op)), "%s", msg)
		}
	}
	return nil
}

func posErr(pos lexer.Position, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Format is an output format.
type Format int

// Output formats.
const (
	FormatTable Format = iota
	FormatJSON
	FormatCSV
)

func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "json"
	case FormatCSV:
		return "csv"
	default:
		return "table"
	}
}

// ParseFormat parses table, json or csv (any case).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "table":
		return FormatTable, nil
	case "json":
		return FormatJSON, nil
	case "csv":
		return FormatCSV, nil
	}
	return 0, fmt.Errorf("unknown format %q (want table, json or csv)", s)
}

// ParseTime parses a timestamp literal with the forms `moonmq top`'s jump
// prompt accepts too (internal/when): RFC 3339 ('2026-11-30T10:00:00Z',
// fractional seconds and offsets allowed), 'YYYY-MM-DD HH:MM:SS' or a date
// (UTC), a duration before now ('5m', '1h30m', '2d'), or '@unix-millis'.
func ParseTime(s string, now time.Time) (time.Time, error) {
	t, err := when.Parse(s, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid timestamp %s: %s", Quote(s), when.Reason(err))
	}
	return t, nil
}

// checkTime checks a timestamp literal's form; what it means waits for the
// statement to run, when "now" is known.
func checkTime(s string) error {
	_, err := ParseTime(s, time.Unix(0, 0))
	return err
}

var quantityRe = regexp.MustCompile(`^(-?[0-9]+)([A-Za-z]*)$`)

var durationUnits = map[string]time.Duration{
	"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour,
	"d": 24 * time.Hour, "w": 7 * 24 * time.Hour,
}

var sizeUnits = map[string]int64{
	"b": 1, "kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000, "tb": 1000 * 1000 * 1000 * 1000,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
}

// ParseTimeout parses SUBSCRIBE's TIMEOUT: seconds, or a duration with a
// unit (500ms, 10s, 2m).
func ParseTimeout(s string) (time.Duration, error) {
	m := quantityRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid TIMEOUT %s", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid TIMEOUT %s", s)
	}
	unit := time.Second
	if m[2] != "" {
		u, ok := durationUnits[strings.ToLower(m[2])]
		if !ok {
			return 0, fmt.Errorf("invalid TIMEOUT %s: unit %q (want ms, s, m or h)", s, m[2])
		}
		unit = u
	}
	if n > int64(math.MaxInt64/unit) {
		return 0, fmt.Errorf("TIMEOUT %s is too long", s)
	}
	return time.Duration(n) * unit, nil
}

// ConfigValueFor returns the string sent to the broker for key = v. A value
// with a unit is converted for keys ending in .ms (7d -> 604800000) and
// .bytes (512MiB -> 536870912), whether quoted or not; other values are
// sent as written.
func ConfigValueFor(key string, v *ConfigValue) (string, error) {
	var raw string
	switch {
	case v.Str != nil:
		raw = string(*v.Str)
	case v.Number != nil:
		raw = *v.Number
	case v.Qty != nil:
		raw = *v.Qty
	case v.Word != nil:
		raw = *v.Word
	}
	m := quantityRe.FindStringSubmatch(raw)
	if m == nil || m[2] == "" {
		if v.Qty != nil {
			return "", fmt.Errorf("%s: a unit is only understood for keys ending in .ms or .bytes", raw)
		}
		return raw, nil
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return "", fmt.Errorf("%s: number out of range", raw)
	}
	unit := strings.ToLower(m[2])
	switch {
	case strings.HasSuffix(key, ".ms"):
		d, ok := durationUnits[unit]
		if !ok {
			return "", fmt.Errorf("%s: unknown duration unit %q (want ms, s, m, h, d or w)", raw, m[2])
		}
		ms := int64(d / time.Millisecond)
		if n > math.MaxInt64/ms || n < math.MinInt64/ms {
			return "", fmt.Errorf("%s: out of range", raw)
		}
		return strconv.FormatInt(n*ms, 10), nil
	case strings.HasSuffix(key, ".bytes"):
		b, ok := sizeUnits[unit]
		if !ok {
			return "", fmt.Errorf("%s: unknown size unit %q (want B, KB, MB, GB, KiB, MiB, GiB, TiB)", raw, m[2])
		}
		if n > math.MaxInt64/b || n < math.MinInt64/b {
			return "", fmt.Errorf("%s: out of range", raw)
		}
		return strconv.FormatInt(n*b, 10), nil
	case v.Qty != nil:
		return "", fmt.Errorf("%s: a unit is only understood for keys ending in .ms or .bytes", raw)
	}
	return raw, nil
}
