package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// FuzzSecurityRequestParsing feeds arbitrary DescribeClientQuotas and
// AlterUserScramCredentials bodies through the handlers' parsing: the
// quota filter and the SCRAM upsertion checks must answer an error or a
// value, never panic, and a filter that parses matches entities without
// panicking; an accepted upsertion derives a credential the controller
// accepts.
func FuzzSecurityRequestParsing(f *testing.F) {
	q := kmsg.NewPtrDescribeClientQuotasRequest()
	q.Version = 1
	alice := "alice"
	q.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: &alice}, {EntityType: "client-id", MatchType: 2}}
	f.Add(true, q.AppendTo(nil))
	s := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	s.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "u", Mechanism: 1, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}}
	f.Add(false, s.AppendTo(nil))
	f.Add(true, []byte{})
	name := "alice"
	entities := [][]metadata.QuotaEntityPart{
		{{Type: "user", Name: &name}},
		{{Type: "client-id", Name: &name}, {Type: "user"}},
		{{Type: "ip"}},
	}
	f.Fuzz(func(t *testing.T, quotas bool, body []byte) {
		if quotas {
			req := kmsg.NewPtrDescribeClientQuotasRequest()
			req.Version = 1
			if req.ReadFrom(body) != nil {
				return
			}
			flt, code, err := parseQuotaFilter(req)
			if err != nil {
				require.NotNil(t, code)
				return
			}
			for _, e := range entities {
				_ = flt.matches(e)
			}
			return
		}
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		if req.ReadFrom(body) != nil {
			return
		}
		for _, u := range req.Upsertions {
			cred, err := scramUpsert(u)
			if err != nil {
				continue
			}
			require.Equal(t, u.Name, cred.User)
			require.Len(t, cred.StoredKey, metadata.ScramHash(cred.Mechanism)().Size())
		}
	})
}
