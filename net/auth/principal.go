package auth

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The principal of a client certificate, as Kafka derives it: the subject's
// distinguished name in RFC 2253 form, exactly as Java's
// X500Principal.getName() writes it (so rules written for Kafka match the
// same strings here), put through ssl.principal.mapping.rules
// (SslPrincipalMapper.java). Without rules MoonMQ takes the subject's CN,
// the usual choice, where Kafka's DEFAULT rule would take the whole DN.

// CertificatePrincipal is "User:" + the name of cert's subject: its CN
// without rules (the whole DN when it has no CN), else what the first
// matching rule makes of the RFC 2253 subject.
func CertificatePrincipal(cert *x509.Certificate, m *PrincipalMapper) (string, error) {
	rdns, err := parseRDNs(cert.RawSubject)
	if err != nil {
		return "", fmt.Errorf("client certificate subject: %w", err)
	}
	dn := formatRFC2253(rdns)
	var name string
	if m == nil {
		name = commonName(rdns)
		if name == "" {
			name = dn
		}
	} else if name, err = m.Name(dn); err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("client certificate subject %q gives an empty principal name", dn)
	}
	return "User:" + name, nil
}

// SubjectDN is cert's subject in RFC 2253 form, as the mapping rules see it.
func SubjectDN(cert *x509.Certificate) (string, error) {
	rdns, err := parseRDNs(cert.RawSubject)
	if err != nil {
		return "", err
	}
	return formatRFC2253(rdns), nil
}

// atv and atvSET mirror X.501's AttributeTypeAndValue and
// RelativeDistinguishedName, keeping the value's raw encoding (its string
// type decides how it is printed). encoding/asn1 reads a type whose name
// ends in SET as a SET OF.
type atv struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

type atvSET []atv

func parseRDNs(raw []byte) ([]atvSET, error) {
	var rdns []atvSET
	rest, err := asn1.Unmarshal(raw, &rdns)
	if err != nil {
		return nil, fmt.Errorf("malformed distinguished name: %w", err)
	}
	if len(rest) != 0 {
		return nil, errors.New("malformed distinguished name: trailing data")
	}
	return rdns, nil
}

// rfc2253Keywords are the attribute names Java's RFC 2253 output uses;
// other attributes are written as a dotted OID with a #hex value.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

const oidCommonName = "2.5.4.3"

// commonName is the most specific CN (the last in the encoding, the first
// in RFC 2253 order), or "".
func commonName(rdns []atvSET) string {
	for i := len(rdns) - 1; i >= 0; i-- {
		for _, a := range rdns[i] {
			if a.Type.String() == oidCommonName {
				if s, ok := derString(a.Value); ok {
					return s
				}
			}
		}
	}
	return ""
}

// formatRFC2253 writes the RDNs most specific first, attributes of one RDN
// joined by '+', as Java's X500Principal.getName() does.
func formatRFC2253(rdns []atvSET) string {
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			oid := a.Type.String()
			kw, known := rfc2253Keywords[oid]
			s, isString := derString(a.Value)
			if !known || !isString {
				if !known {
					kw = oid
				}
				b.WriteString(kw)
				b.WriteString("=#")
				b.WriteString(strings.ToUpper(hex.EncodeToString(a.Value.FullBytes)))
				continue
			}
			b.WriteString(kw)
			b.WriteByte('=')
			b.WriteString(escapeRFC2253(s))
		}
	}
	return b.String()
}

// escapeRFC2253 escapes a value as Java's AVA.toRFC2253String does: the
// specials ,=+<>#;"\ get a backslash, NUL is \00, and leading and trailing
// spaces are escaped.
func escapeRFC2253(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	lead := len(out) - len(strings.TrimLeft(out, " "))
	trail := len(out) - len(strings.TrimRight(out, " "))
	if lead == len(out) { // all spaces: each is both leading and trailing
		return strings.Repeat(`\ `, lead)
	}
	if lead == 0 && trail == 0 {
		return out
	}
	return strings.Repeat(`\ `, lead) + out[lead:len(out)-trail] + strings.Repeat(`\ `, trail)
}

// derString decodes the directory string types; ok is false for any other
// type (written as #hex) or an invalid encoding.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String:
		if !utf8.Valid(v.Bytes) {
			return "", false
		}
		return string(v.Bytes), true
	case asn1.TagPrintableString, asn1.TagIA5String, 27 /* GeneralString */, asn1.TagNumericString:
		for _, c := range v.Bytes {
			if c >= utf8.RuneSelf {
				return "", false
			}
		}
		return string(v.Bytes), true
	case asn1.TagT61String: // Latin-1, as Java reads it
		r := make([]rune, len(v.Bytes))
		for i, c := range v.Bytes {
			r[i] = rune(c)
		}
		return string(r), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(v.Bytes[2*i:])
		}
		return string(utf16.Decode(u)), true
	case 28: // UniversalString, UTF-32BE
		if len(v.Bytes)%4 != 0 {
			return "", false
		}
		r := make([]rune, len(v.Bytes)/4)
		for i := range r {
			c := rune(binary.BigEndian.Uint32(v.Bytes[4*i:]))
			if !utf8.ValidRune(c) {
				return "", false
			}
			r[i] = c
		}
		return string(r), true
	}
	return "", false
}

// PrincipalMapper applies ssl.principal.mapping.rules: a comma-separated
// list of RULE:pattern/replacement/[LU] and DEFAULT, tried in order; the
// first rule whose pattern matches the whole DN gives the name (DEFAULT:
// the DN itself). Patterns are Go regular expressions (RE2): Java's
// lookaround and backreferences are refused when the rules are parsed.
// Replacements follow Java's Matcher.replaceAll ($n, ${name}, \ escapes),
// and $n beyond the pattern's groups is literal text, as in Kafka.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault   bool
	pattern     string         // as written
	full        *regexp.Regexp // the pattern anchored at both ends: Java's matches()
	re          *regexp.Regexp // the pattern as written: Java's replaceAll
	replacement string         // as written
	expand      string         // the replacement with literal back references escaped
	lower       bool
	upper       bool
}

// The rule grammar, as SslPrincipalMapper.java has it. Go's regexp prefers
// alternatives and lazy quantifiers as Java's does (leftmost-first), so
// the same expressions split and parse the rules the same way.
const rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`[ \t\n\x0B\f\r]*(` + rulePattern + `)[ \t\n\x0B\f\r]*(,[ \t\n\x0B\f\r]*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// maxMappingRules bounds the rules text: it comes from a flag or a config
// file, but a fuzzer (or a typo) must not make parsing unbounded.
const maxMappingRules = 64 << 10

// ParsePrincipalMapping parses the rules; "" gives a nil mapper (User:<CN>).
func ParsePrincipalMapping(rules string) (*PrincipalMapper, error) {
	if strings.TrimSpace(rules) == "" {
		return nil, nil
	}
	if len(rules) > maxMappingRules {
		return nil, fmt.Errorf("%d bytes of rules is more than %d", len(rules), maxMappingRules)
	}
	m := &PrincipalMapper{}
	for _, sm := range ruleSplitter.FindAllStringSubmatch(strings.TrimFunc(rules, isJavaSpace), -1) {
		rule := sm[1]
		loc := ruleParser.FindStringSubmatchIndex(rule)
		if loc == nil {
			return nil, fmt.Errorf("invalid rule: %s", rule)
		}
		if loc[1] != len(rule) {
			return nil, fmt.Errorf("invalid rule `%s`, unmatched substring: `%s`", rule, rule[loc[1]:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return rule[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, mappingRule{isDefault: true})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // an empty rule is ignored
		}
		replacement, _ := group(4)
		flag, _ := group(6)
		r, err := newMappingRule(pattern, replacement, flag == "L", flag == "U")
		if err != nil {
			return nil, fmt.Errorf("rule `%s`: %w", rule, err)
		}
		m.rules = append(m.rules, r)
	}
	if len(m.rules) == 0 {
		return nil, fmt.Errorf("%q has no rule: write RULE:pattern/replacement/[LU] or DEFAULT, comma-separated", rules)
	}
	return m, nil
}

// isJavaSpace is what Java's String.trim removes.
func isJavaSpace(r rune) bool { return r <= ' ' }

func newMappingRule(pattern, replacement string, lower, upper bool) (mappingRule, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern (a Go regular expression, RE2 syntax): %w", err)
	}
	full, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return mappingRule{}, fmt.Errorf("pattern: %w", err)
	}
	r := mappingRule{pattern: pattern, full: full, re: re, replacement: replacement,
		expand: escapeLiteralBackReferences(replacement, re.NumSubexp()), lower: lower, upper: upper}
	// Whether a replacement is well formed depends on the pattern's
	// groups only: check it now, not at a client's handshake.
	if _, err := expandJava(nil, r.expand, "", make([]int, 2*(re.NumSubexp()+1)), re); err != nil {
		return mappingRule{}, fmt.Errorf("replacement %q: %w", replacement, err)
	}
	return r, nil
}

// Name maps a DN to a principal name with the first rule that applies.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		name, ok, err := r.apply(dn)
		if err != nil {
			return "", err
		}
		if ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("no principal mapping rule applies to %q (rules %s)", dn, m)
}

func (m *PrincipalMapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (r mappingRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

func (r mappingRule) apply(dn string) (string, bool, error) {
	if r.isDefault {
		return dn, true, nil
	}
	if !r.full.MatchString(dn) {
		return "", false, nil
	}
	// Java's replaceAll: every match of the pattern as written.
	var out []byte
	last := 0
	for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		out = append(out, dn[last:loc[0]]...)
		var err error
		if out, err = expandJava(out, r.expand, dn, loc, r.re); err != nil {
			return "", false, err
		}
		last = loc[1]
	}
	out = append(out, dn[last:]...)
	name := string(out)
	switch {
	case r.lower:
		name = strings.ToLower(name)
	case r.upper:
		name = strings.ToUpper(name)
	}
	return name, true, nil
}

var backReference = regexp.MustCompile(`\$(\d+)`)

// escapeLiteralBackReferences is Kafka's (from Apache NiFi): a $n naming a
// group the pattern does not have is literal text. Trailing digits are
// dropped first while the number is too large ($123 with 12 groups is
// group 12 then "3"); only then is a reference still too large escaped.
func escapeLiteralBackReferences(repl string, groups int) string {
	if groups == 0 {
		return repl
	}
	var b strings.Builder
	last := 0
	for _, loc := range backReference.FindAllStringSubmatchIndex(repl, -1) {
		digits := repl[loc[2]:loc[3]]
		if strings.HasPrefix(digits, "0") {
			continue
		}
		for len(digits) >= 2 && !fitsGroups(digits, groups) {
			digits = digits[:len(digits)-1]
		}
		if !fitsGroups(digits, groups) {
			b.WriteString(repl[last:loc[0]])
			b.WriteByte('\\')
			last = loc[0]
		}
	}
	b.WriteString(repl[last:])
	return b.String()
}

func fitsGroups(digits string, groups int) bool {
	n, err := strconv.Atoi(digits)
	return err == nil && n <= groups
}

// expandJava appends the replacement for one match as Java's
// Matcher.appendReplacement does: \x is x, $n the longest group number
// that exists, ${name} a named group; anything else after $ is an error.
func expandJava(dst []byte, repl, src string, loc []int, re *regexp.Regexp) ([]byte, error) {
	groups := re.NumSubexp()
	appendGroup := func(g int) {
		if loc[2*g] >= 0 {
			dst = append(dst, src[loc[2*g]:loc[2*g+1]]...)
		}
	}
	for i := 0; i < len(repl); {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i >= len(repl) {
				return nil, errors.New("character to be escaped is missing")
			}
			_, size := utf8.DecodeRuneInString(repl[i:])
			dst = append(dst, repl[i:i+size]...)
			i += size
		case '$':
			i++
			if i >= len(repl) {
				return nil, errors.New("illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				end := strings.IndexByte(repl[i:], '}')
				if end < 0 {
					return nil, errors.New("named capturing group is missing trailing '}'")
				}
				name := repl[i+1 : i+end]
				g := re.SubexpIndex(name)
				if name == "" || g < 0 {
					return nil, fmt.Errorf("no group with name {%s}", name)
				}
				appendGroup(g)
				i += end + 1
				continue
			}
			if repl[i] < '0' || repl[i] > '9' {
				return nil, errors.New("illegal group reference")
			}
			g := int(repl[i] - '0')
			if g > groups {
				return nil, fmt.Errorf("no group %d", g)
			}
			i++
			for i < len(repl) && repl[i] >= '0' && repl[i] <= '9' {
				next := g*10 + int(repl[i]-'0')
				if next > groups {
					break
				}
				g = next
				i++
			}
			appendGroup(g)
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst, nil
}
