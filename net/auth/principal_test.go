package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testcerts"
)

// The cases of Kafka's SslPrincipalMapperTest, so rules behave as they do
// on a Kafka broker.
func TestPrincipalMappingValidRules(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		_, err := ParsePrincipalMapping(rules)
		require.NoError(t, err, rules)
	}
}

func TestPrincipalMappingInvalidRules(t *testing.T) {
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Beyond Kafka's list: no rule at all, a pattern Go cannot
		// compile (lookahead), replacements Java would refuse at the
		// first client.
		",  , ,",
		"RULE:^CN=(?=x).*$/$1/",
		"RULE:^CN=(.*)$/$/",
		"RULE:^CN=(.*)$/$x/",
		`RULE:^CN=(.*)$/\/`,
		"RULE:^CN=.*$/$1/", // no group at all: Java fails on every match
		"RULE:^CN=(?P<n>.*)$/${m}/",
	} {
		_, err := ParsePrincipalMapping(rules)
		require.Error(t, err, rules)
	}
}

func TestPrincipalMapper(t *testing.T) {
	m, err := ParsePrincipalMapping("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, " +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, " +
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, " +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, " +
		"DEFAULT")
	require.NoError(t, err)
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		got, err := m.Name(dn)
		require.NoError(t, err, dn)
		require.Equal(t, want, got, dn)
	}

	// Kafka's testCommaWithWhitespace.
	m, err = ParsePrincipalMapping(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	require.NoError(t, err)
	got, err := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`)
	require.NoError(t, err)
	require.Equal(t, `Tkac\, Adam`, got)

	// No rule applies: an error, which refuses the connection.
	m, err = ParsePrincipalMapping("RULE:^CN=(.*),OU=Ops$/$1/")
	require.NoError(t, err)
	_, err = m.Name("CN=x,OU=Dev")
	require.ErrorContains(t, err, "no principal mapping rule applies")
}

// Kafka's testRulesSplitting: how a rules string is cut into rules.
func TestPrincipalMappingSplitting(t *testing.T) {
	for rules, want := range map[string]string{
		"DEFAULT":                        "[DEFAULT]",
		"RULE://":                        "[RULE:/]",
		"RULE:/.*/":                      "[RULE:/.*]",
		"RULE:/.*/L":                     "[RULE:/.*/L]",
		"RULE://,DEFAULT":                "[RULE:/, DEFAULT]",
		"  RULE:// ,  DEFAULT  ":         "[RULE:/, DEFAULT]",
		"  RULE:   /     / ,  DEFAULT  ": "[RULE:   /     , DEFAULT]",
		"  RULE:  /     /U   ,DEFAULT  ": "[RULE:  /     /U, DEFAULT]",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
		",,RULE://,,,DEFAULT,,":                                  "[RULE:/, DEFAULT]",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":                "[RULE: /   , DEFAULT]",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,":             "[RULE:   /  /U, DEFAULT]",
		`RULE:\/\\\(\)\n\t/\/\//`:                                `[RULE:\/\\\(\)\n\t/\/\/]`,
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                        `[RULE:\**\/+/*/L, RULE:\/*\**/**]`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
	} {
		m, err := ParsePrincipalMapping(rules)
		require.NoError(t, err, rules)
		require.Equal(t, want, m.String(), rules)
	}
	m, err := ParsePrincipalMapping("")
	require.NoError(t, err)
	require.Nil(t, m, "no rules: the CN")
}

func TestPrincipalMappingReplacement(t *testing.T) {
	for _, tc := range []struct{ rules, dn, want string }{
		// $4 with three groups is literal text (Kafka's NiFi escaping).
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4/", "CN=a,OU=b,O=c", "a@$4"},
		// $12 with one group is group 1 then "2".
		{"RULE:^CN=(.*?),OU=.*$/$12/", "CN=a,OU=b", "a2"},
		// ${name}, \ escapes and $0.
		{`RULE:^CN=(?P<user>[a-z]+).*$/${user}\$\\/`, "CN=bob,O=x", `bob$\`},
		{"RULE:^CN=[a-z]+$/<$0>/", "CN=bob", "<CN=bob>"},
		// replaceAll over every match of a pattern without anchors.
		{"RULE:(a|.+?)/[$1]/U", "aba", "[A][B][A]"},
	} {
		m, err := ParsePrincipalMapping(tc.rules)
		require.NoError(t, err, tc.rules)
		got, err := m.Name(tc.dn)
		require.NoError(t, err, tc.rules)
		require.Equal(t, tc.want, got, tc.rules)
	}
}

func TestSubjectDN(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	// Go writes the subject's attributes in its own order (C, ST, L, O,
	// OU, CN): RFC 2253 reverses it, most specific first.
	c := ca.Client(t, pkix.Name{CommonName: "Duke", OrganizationalUnit: []string{"ServiceUsers"},
		Organization: []string{"Org, Inc."}, Country: []string{"US"}, Province: []string{"MD"}, Locality: []string{"Fulton"}})
	dn, err := SubjectDN(c.Cert)
	require.NoError(t, err)
	require.Equal(t, `CN=Duke,OU=ServiceUsers,O=Org\, Inc.,L=Fulton,ST=MD,C=US`, dn)

	p, err := CertificatePrincipal(c.Cert, nil)
	require.NoError(t, err)
	require.Equal(t, "User:Duke", p)
	m, err := ParsePrincipalMapping("RULE:^CN=(.*?),OU=ServiceUsers.*$/svc-$1/L,DEFAULT")
	require.NoError(t, err)
	p, err = CertificatePrincipal(c.Cert, m)
	require.NoError(t, err)
	require.Equal(t, "User:svc-duke", p)
	m, err = ParsePrincipalMapping("DEFAULT")
	require.NoError(t, err)
	p, err = CertificatePrincipal(c.Cert, m)
	require.NoError(t, err)
	require.Equal(t, "User:"+dn, p, "DEFAULT is Kafka's: the whole DN")

	// Attributes without an RFC 2253 keyword are OID=#hex (the value's
	// DER), as Java writes them; specials and edge spaces are escaped.
	email := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	c = ca.Client(t, pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
		{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "a+b"},
		{Type: email, Value: "x@y"},
		{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: " #cn;=< "},
	}})
	dn, err = SubjectDN(c.Cert)
	require.NoError(t, err)
	// "x@y" as Go encodes it, a UTF8String: tag 0x0C, length 3.
	require.Equal(t, `CN=\ \#cn\;\=\<\ ,1.2.840.113549.1.9.1=#0C03784079,O=a\+b`, dn)
	p, err = CertificatePrincipal(c.Cert, nil)
	require.NoError(t, err)
	require.Equal(t, "User: #cn;=< ", p, "the CN as it is, not escaped")

	// No CN: the whole DN; an empty subject: refused.
	c = ca.Client(t, pkix.Name{Organization: []string{"NoCN"}})
	p, err = CertificatePrincipal(c.Cert, nil)
	require.NoError(t, err)
	require.Equal(t, "User:O=NoCN", p)
	_, err = CertificatePrincipal(&x509.Certificate{RawSubject: []byte{0x30, 0}}, nil)
	require.ErrorContains(t, err, "empty principal")
	_, err = CertificatePrincipal(&x509.Certificate{RawSubject: []byte{0x30, 5, 1}}, nil)
	require.Error(t, err)
}

func FuzzParsePrincipalMapping(f *testing.F) {
	for _, s := range []string{"DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`,
		"RULE:^CN=(?P<u>.*)$/${u}$12\\$/U", ",,", "RULE:(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)/$123$99999999999999999999/"} {
		f.Add(s, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParsePrincipalMapping(rules)
		if err != nil || m == nil {
			return
		}
		_ = m.String()
		// Parsing checked every replacement: applying one cannot fail
		// for any other reason than no rule applying.
		if _, err := m.Name(dn); err != nil {
			require.ErrorContains(t, err, "no principal mapping rule applies")
		}
	})
}

func FuzzSubjectDN(f *testing.F) {
	ca := testcerts.NewCA(f, "ca")
	c := ca.Client(f, pkix.Name{CommonName: "Duke", Organization: []string{"a,b"}})
	f.Add(c.Cert.RawSubject)
	f.Add([]byte{0x30, 0})
	f.Add([]byte{0x30, 0x0b, 0x31, 0x09, 0x30, 0x07, 0x06, 0x03, 0x55, 0x04, 0x03, 0x1e, 0x00})
	f.Fuzz(func(t *testing.T, raw []byte) {
		cert := &x509.Certificate{RawSubject: raw}
		dn, err := SubjectDN(cert)
		p, perr := CertificatePrincipal(cert, nil)
		if err != nil {
			require.Error(t, perr)
			return
		}
		if perr == nil {
			require.NotEqual(t, "User:", p)
		} else {
			require.Empty(t, dn)
		}
	})
}
