package client

import (
	"context"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Quota entity types (Kafka's ClientQuotaEntity types).
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// QuotaKeys are the quota settings Kafka defines, with what they limit.
var QuotaKeys = map[string]string{
	"producer_byte_rate":       "bytes per second a user/client may produce, per broker",
	"consumer_byte_rate":       "bytes per second a user/client may fetch, per broker",
	"request_percentage":       "percentage of a broker's request-handler time",
	"controller_mutation_rate": "partition mutations (create, delete, add) per second",
	"connection_creation_rate": "new connections per second from an IP",
}

// QuotaEntityPart is one component of a quota entity. Default is the
// type's default entity (Kafka's <default>): Name is then unused.
type QuotaEntityPart struct {
	Type    string `json:"type"`
	Name    string `json:"name,omitempty"`
	Default bool   `json:"default,omitempty"`
}

// String renders user=alice, client-id=<default>.
func (p QuotaEntityPart) String() string {
	if p.Default {
		return p.Type + "=<default>"
	}
	return p.Type + "=" + p.Name
}

// QuotaEntity is whom a quota applies to: a user, a client id, both, or an
// IP.
type QuotaEntity []QuotaEntityPart

// String renders the entity as Kafka's tools do: user=alice, client-id=app.
func (e QuotaEntity) String() string {
	parts := make([]string, len(e))
	for i, p := range e {
		parts[i] = p.String()
	}
	return strings.Join(parts, ", ")
}

// Quota is one quota setting of one entity.
type Quota struct {
	Entity QuotaEntity `json:"entity"`
	Key    string      `json:"key"`
	Value  float64     `json:"value"`
}

// validateQuotaEntity checks the combinations Kafka accepts: user,
// client-id, user + client-id, or ip alone; each type once.
func validateQuotaEntity(op string, e QuotaEntity) error {
	if len(e) == 0 {
		return invalid(op, "no quota entity (want a user, a client id, both, or an ip)")
	}
	seen := map[string]bool{}
	for _, p := range e {
		switch p.Type {
		case QuotaUser, QuotaClientID, QuotaIP:
		default:
			return invalid(op, "quota entity type %q (want user, client-id or ip)", p.Type)
		}
		if seen[p.Type] {
			return invalid(op, "quota entity names %s twice", p.Type)
		}
		seen[p.Type] = true
		if !p.Default && p.Name == "" {
			return invalid(op, "empty %s name (use the default entity instead)", p.Type)
		}
	}
	if seen[QuotaIP] && len(e) > 1 {
		return invalid(op, "an ip quota cannot be combined with a user or client id")
	}
	return nil
}

func (e QuotaEntity) kadm() kadm.ClientQuotaEntity {
	out := make(kadm.ClientQuotaEntity, len(e))
	for i, p := range e {
		out[i] = kadm.ClientQuotaEntityComponent{Type: p.Type}
		if !p.Default {
			name := p.Name
			out[i].Name = &name
		}
	}
	return out
}

// SetQuotas sets (and, for keys in remove, removes) quota values of one
// entity. Values must be positive (Kafka refuses others).
func (c *Client) SetQuotas(ctx context.Context, entity QuotaEntity, set map[string]float64, remove []string) error {
	const op = "set quotas"
	res := "quotas of " + entity.String()
	if err := validateQuotaEntity(op, entity); err != nil {
		return err
	}
	if len(set) == 0 && len(remove) == 0 {
		return invalid(op, "no quota to set or remove")
	}
	var ops []kadm.AlterClientQuotaOp
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := set[k]
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return invalid(op, "%s = %v: a quota must be a positive number", k, v)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	for _, k := range remove {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return wrap(op, res, err)
	}
	defer cancel()
	rs, err := c.adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity.kadm(), Ops: ops}})
	if err != nil {
		return wrap(op, res, err)
	}
	for _, r := range rs {
		if r.Err != nil {
			return wrapDetail(op, res, r.Err, r.ErrMessage)
		}
	}
	return nil
}

// ListQuotas returns the quotas whose entity matches filter (every part
// exactly; an empty filter matches every entity), one row per value,
// sorted by entity then key.
func (c *Client) ListQuotas(ctx context.Context, filter QuotaEntity) ([]Quota, error) {
	const op = "list quotas"
	if len(filter) > 0 {
		if err := validateQuotaEntity(op, filter); err != nil {
			return nil, err
		}
	}
	comps := make([]kadm.DescribeClientQuotaComponent, 0, len(filter))
	for _, p := range filter {
		dc := kadm.DescribeClientQuotaComponent{Type: p.Type, MatchType: kmsg.QuotasMatchTypeDefault}
		if !p.Default {
			name := p.Name
			dc.MatchName, dc.MatchType = &name, kmsg.QuotasMatchTypeExact
		}
		comps = append(comps, dc)
	}
	ctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	defer cancel()
	ds, err := c.adm.DescribeClientQuotas(ctx, false, comps)
	if err != nil {
		return nil, wrap(op, "", err)
	}
	out := []Quota{}
	for _, d := range ds {
		var e QuotaEntity
		for _, p := range d.Entity {
			part := QuotaEntityPart{Type: p.Type, Default: p.Name == nil}
			if p.Name != nil {
				part.Name = *p.Name
			}
			e = append(e, part)
		}
		sort.Slice(e, func(i, j int) bool { return quotaTypeOrder(e[i].Type) < quotaTypeOrder(e[j].Type) })
		for _, v := range d.Values {
			out = append(out, Quota{Entity: e, Key: v.Key, Value: v.Value})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Entity.String(), out[j].Entity.String()
		if a != b {
			return a < b
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

func quotaTypeOrder(t string) string {
	switch t {
	case QuotaUser:
		return "0"
	case QuotaClientID:
		return "1"
	}
	return "2" + t
}

// Part returns the entity's part of type t and whether it has one.
func (e QuotaEntity) Part(t string) (QuotaEntityPart, bool) {
	for _, p := range e {
		if p.Type == t {
			return p, true
		}
	}
	return QuotaEntityPart{}, false
}

// QuotaKeyHelp lists the quota keys for error messages.
func QuotaKeyHelp() string {
	keys := make([]string, 0, len(QuotaKeys))
	for k := range QuotaKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
