package mql

// Client quotas (Kafka's AlterClientQuotas / DescribeClientQuotas):
//
//	SET QUOTA (producer_byte_rate = 1MiB, consumer_byte_rate = 2097152) FOR USER alice [CLIENT 'app'];
//	SET QUOTA (request_percentage = 50) FOR CLIENT DEFAULT;
//	SET QUOTA (connection_creation_rate = 10) FOR IP '10.0.0.7';
//	RESET QUOTA (producer_byte_rate) FOR USER alice;
//	SHOW QUOTAS [FOR USER alice];
//
// DEFAULT is the type's default entity (Kafka's <default>): it applies to
// every user (client id, IP) without a quota of its own.

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"

	"github.com/moonmq/moonmq/net/client"
)

// QuotaName is an entity name or DEFAULT.
type QuotaName struct {
	Pos     lexer.Position
	Default bool  `parser:"  @\"DEFAULT\""`
	Name    *Name `parser:"| @(Ident | String)"`
}

// QuotaTarget is whom a quota applies to: USER, CLIENT, both, or IP.
type QuotaTarget struct {
	Pos    lexer.Position
	User   *QuotaName `parser:"( \"USER\" @@ )?"`
	Client *QuotaName `parser:"( \"CLIENT\" @@ )?"`
	IP     *QuotaName `parser:"( \"IP\" @@ )?"`
}

// SetQuota sets quota values of one entity.
type SetQuota struct {
	Pos     lexer.Position
	Configs []*Config    `parser:"\"SET\" \"QUOTA\" \"(\" @@ ( \",\" @@ )* \")\""`
	Target  *QuotaTarget `parser:"\"FOR\" @@"`
}

// ResetQuota removes quota values of one entity.
type ResetQuota struct {
	Pos    lexer.Position
	Keys   []Name       `parser:"\"RESET\" \"QUOTA\" \"(\" @(Ident | String) ( \",\" @(Ident | String) )* \")\""`
	Target *QuotaTarget `parser:"\"FOR\" @@"`
}

// ShowQuotas lists quotas, of every entity or those matching FOR.
type ShowQuotas struct {
	Pos    lexer.Position
	Kw     bool         `parser:"\"SHOW\" @\"QUOTAS\""`
	Target *QuotaTarget `parser:"( \"FOR\" @@ )?"`
}

func (s *SetQuota) Position() lexer.Position   { return s.Pos }
func (s *ResetQuota) Position() lexer.Position { return s.Pos }
func (s *ShowQuotas) Position() lexer.Position { return s.Pos }

func (*SetQuota) stmt()   {}
func (*ResetQuota) stmt() {}
func (*ShowQuotas) stmt() {}

// quotaKeyKnown reports whether key is one of Kafka's quota keys.
func quotaKeyKnown(key string) bool {
	_, ok := client.QuotaKeys[key]
	return ok
}

// validateQuotaTarget checks the combinations Kafka accepts.
func validateQuotaTarget(t *QuotaTarget) error {
	if t == nil {
		return nil
	}
	switch {
	case t.User == nil && t.Client == nil && t.IP == nil:
		return posErr(t.Pos, "FOR needs USER name, CLIENT 'id' (or both), or IP 'address'; DEFAULT for the default entity")
	case t.IP != nil && (t.User != nil || t.Client != nil):
		return posErr(t.IP.Pos, "an IP quota cannot be combined with USER or CLIENT")
	}
	for _, n := range []*QuotaName{t.User, t.Client, t.IP} {
		if n != nil && !n.Default && *n.Name == "" {
			return posErr(n.Pos, "empty name (use DEFAULT for the default entity)")
		}
	}
	return nil
}

func validateSetQuota(s *SetQuota) error {
	seen := map[Name]bool{}
	for _, c := range s.Configs {
		if !quotaKeyKnown(string(c.Key)) {
			return posErr(c.Pos, "unknown quota %s (want %s)", c.Key, client.QuotaKeyHelp())
		}
		if seen[c.Key] {
			return posErr(c.Pos, "quota %s is given twice", c.Key)
		}
		seen[c.Key] = true
		if _, err := QuotaValueFor(string(c.Key), c.Value); err != nil {
			return posErr(c.Value.Pos, "%v", err)
		}
	}
	return validateQuotaTarget(s.Target)
}

func validateResetQuota(s *ResetQuota, at locator) error {
	for _, k := range s.Keys {
		if !quotaKeyKnown(string(k)) {
			return posErr(at.value(s.Pos, string(k)), "unknown quota %s (want %s)", k, client.QuotaKeyHelp())
		}
	}
	return validateQuotaTarget(s.Target)
}

// QuotaValueFor is the number sent for key = v: a positive number; byte
// rates may carry a size unit (1MiB, 512KB).
func QuotaValueFor(key string, v *ConfigValue) (float64, error) {
	raw := ""
	switch {
	case v.Str != nil:
		raw = string(*v.Str)
	case v.Number != nil:
		raw = *v.Number
	case v.Qty != nil:
		raw = *v.Qty
	case v.Word != nil:
		return 0, fmt.Errorf("%s is not a number", *v.Word)
	}
	if strings.HasSuffix(key, "_byte_rate") {
		// The size units of configs ending in .bytes.
		s, err := ConfigValueFor(key+".bytes", v)
		if err != nil {
			return 0, err
		}
		raw = s
	} else if v.Qty != nil {
		return 0, fmt.Errorf("%s: a unit is only understood for byte rates", raw)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s is not a number", raw)
	}
	if f <= 0 {
		return 0, fmt.Errorf("%s: a quota must be positive (RESET QUOTA removes one)", raw)
	}
	return f, nil
}

// entity converts a target to net/client's form.
func (t *QuotaTarget) entity() client.QuotaEntity {
	if t == nil {
		return nil
	}
	var e client.QuotaEntity
	add := func(typ string, n *QuotaName) {
		if n == nil {
			return
		}
		p := client.QuotaEntityPart{Type: typ, Default: n.Default}
		if !n.Default {
			p.Name = string(*n.Name)
		}
		e = append(e, p)
	}
	add(client.QuotaUser, t.User)
	add(client.QuotaClientID, t.Client)
	add(client.QuotaIP, t.IP)
	return e
}

// fmtQuotaTarget renders a target as MQL.
func fmtQuotaTarget(t *QuotaTarget) string {
	var parts []string
	add := func(kw string, n *QuotaName) {
		if n == nil {
			return
		}
		if n.Default {
			parts = append(parts, kw, "DEFAULT")
		} else {
			parts = append(parts, kw, QuoteName(string(*n.Name)))
		}
	}
	add("USER", t.User)
	add("CLIENT", t.Client)
	add("IP", t.IP)
	return strings.Join(parts, " ")
}

// describeTarget is how OK messages name an entity: user 'alice', client
// id 'app', the default user.
func describeTarget(e client.QuotaEntity) string {
	var parts []string
	for _, p := range e {
		kind := map[string]string{client.QuotaUser: "user", client.QuotaClientID: "client id", client.QuotaIP: "ip"}[p.Type]
		if p.Default {
			parts = append(parts, "the default "+kind)
		} else {
			parts = append(parts, kind+" "+quoteRes(p.Name))
		}
	}
	return strings.Join(parts, " with ")
}

func (s *Session) setQuota(ctx context.Context, cl *client.Client, st *SetQuota) error {
	if err := s.require(ctx, cl, featQuotas); err != nil {
		return err
	}
	set := map[string]float64{}
	var names []string
	for _, c := range st.Configs {
		v, err := QuotaValueFor(string(c.Key), c.Value)
		if err != nil {
			return err
		}
		set[string(c.Key)] = v
		names = append(names, fmt.Sprintf("%s = %s", c.Key, fmtQuotaValue(v)))
	}
	e := st.Target.entity()
	if err := cl.SetQuotas(ctx, e, set, nil); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("quota set for %s: %s", describeTarget(e), strings.Join(names, ", ")))
	return nil
}

func (s *Session) resetQuota(ctx context.Context, cl *client.Client, st *ResetQuota) error {
	if err := s.require(ctx, cl, featQuotas); err != nil {
		return err
	}
	keys := make([]string, len(st.Keys))
	for i, k := range st.Keys {
		keys[i] = string(k)
	}
	e := st.Target.entity()
	if err := cl.SetQuotas(ctx, e, nil, keys); err != nil {
		return err
	}
	s.out.OK(fmt.Sprintf("quota reset for %s: %s", describeTarget(e), strings.Join(keys, ", ")))
	return nil
}

func (s *Session) showQuotas(ctx context.Context, cl *client.Client, st *ShowQuotas) error {
	if err := s.require(ctx, cl, featQuotas); err != nil {
		return err
	}
	qs, err := cl.ListQuotas(ctx, st.Target.entity())
	if err != nil {
		return err
	}
	t := &Table{Columns: []string{"user", "client_id", "ip", "quota", "value"}}
	part := func(e client.QuotaEntity, typ string) any {
		p, ok := e.Part(typ)
		switch {
		case !ok:
			return nil
		case p.Default:
			return "<default>"
		}
		return p.Name
	}
	for _, q := range qs {
		var v any = q.Value
		if q.Value == math.Trunc(q.Value) && math.Abs(q.Value) < 1<<53 {
			v = int64(q.Value)
		}
		t.Rows = append(t.Rows, []any{part(q.Entity, client.QuotaUser), part(q.Entity, client.QuotaClientID),
			part(q.Entity, client.QuotaIP), q.Key, v})
	}
	s.out.Table(t)
	return nil
}

func fmtQuotaValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
