package client

// Kafka client properties files (--client-config FILE): the file a person
// already has for kcat (librdkafka: -F FILE) or the Java tools
// (--command-config FILE), read with the same key names, so one file serves
// them all.
//
// Syntax: Java .properties (key=value, key: value or key value; '#' and
// '!' comments; a trailing backslash continues a line; \t \n \r \f \uXXXX
// and \<char> escapes). librdkafka's files are the simple subset of it.
//
// Keys the toolkit acts on: security.protocol, sasl.mechanism (Java) or
// sasl.mechanisms (librdkafka), sasl.username, sasl.password,
// sasl.jaas.config (PlainLoginModule or ScramLoginModule with username and
// password), ssl.ca.location, ssl.certificate.location, ssl.key.location,
// ssl.endpoint.identification.algorithm, enable.ssl.certificate.verification,
// bootstrap.servers / metadata.broker.list and client.id. Keys a Kafka
// client knows but the toolkit has no use for (acks, linger.ms, ...) are
// ignored; keys that would change security but cannot be honoured (JKS
// trust stores, encrypted keys, GSSAPI) are errors, as is any key no Kafka
// client knows (most often a typo).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxClientConfigSize bounds a client properties file: a real one is a
// few hundred bytes.
const MaxClientConfigSize = 1 << 20

// ClientConfig is what a client properties file configures.
type ClientConfig struct {
	Security Security
	// Bootstrap is bootstrap.servers (or metadata.broker.list), "" if
	// absent.
	Bootstrap string
	// ClientID is client.id, "" if absent.
	ClientID string
}

// LoadClientConfig reads and parses a client properties file.
func LoadClientConfig(path string) (ClientConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return ClientConfig{}, err
	}
	defer f.Close()
	return ParseClientConfig(path, f)
}

// ParseClientConfig parses a client properties file; name is used in
// errors and in the labels of the Security it returns ("ssl.ca.location in
// FILE").
func ParseClientConfig(name string, r io.Reader) (ClientConfig, error) {
	props, err := parseProperties(name, r)
	if err != nil {
		return ClientConfig{}, err
	}
	return clientConfigFromProps(name, props)
}

// property is one key = value of a properties file and its line.
type property struct {
	key, value string
	line       int
}

// parseProperties reads Java properties syntax.
func parseProperties(name string, r io.Reader) ([]property, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxClientConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxClientConfigSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a client properties file", name, MaxClientConfigSize)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%s: not UTF-8 text", name)
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	var out []property
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxClientConfigSize+1)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		start := lineNo
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A logical line continues while it ends in an odd number of
		// backslashes; the next line's leading space is dropped.
		if endsInContinuation(line) {
			// Built in one buffer: concatenating per continuation line
			// would copy the logical line again at each (quadratic).
			var b strings.Builder
			for endsInContinuation(line) && sc.Scan() {
				lineNo++
				b.WriteString(line[:len(line)-1])
				line = strings.TrimLeft(sc.Text(), " \t\f")
			}
			b.WriteString(line)
			line = b.String()
		}
		line = strings.TrimSuffix(line, "\r")
		key, value := splitProperty(line)
		k, err := unescapeProperty(key)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, start, err)
		}
		v, err := unescapeProperty(value)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, start, k, err)
		}
		out = append(out, property{key: k, value: strings.TrimRight(v, " \t\r"), line: start})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func endsInContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// white space (and the separator's surrounding space).
func splitProperty(line string) (string, string) {
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
	}
	if i >= len(line) {
		return line, ""
	}
	key, rest := line[:i], line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

// unescapeProperty resolves Java properties escapes.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 >= len(s) {
				return "", fmt.Errorf(`malformed \u escape`)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \u escape %q`, s[i-1:i+5])
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// clientConfigFromProps interprets the properties.
func clientConfigFromProps(name string, props []property) (ClientConfig, error) {
	var cc ClientConfig
	sec := &cc.Security
	where := func(p property) string { return fmt.Sprintf("%s (%s:%d)", p.key, name, p.line) }
	var protocol, jaas *property
	var saslSet, sslSet []string
	// The plain string settings: the Security field each sets (named for
	// errors) and whether it is a SASL or an SSL one.
	strs := map[string]struct {
		field string
		dst   *string
		set   *[]string
	}{
		"sasl.username":            {"User", &sec.User, &saslSet},
		"sasl.password":            {"Password", &sec.Password, &saslSet},
		"ssl.ca.location":          {"TLSCAFile", &sec.TLSCAFile, &sslSet},
		"ssl.certificate.location": {"TLSCertFile", &sec.TLSCertFile, &sslSet},
		"ssl.key.location":         {"TLSKeyFile", &sec.TLSKeyFile, &sslSet},
	}
	for i := range props {
		p := props[i]
		if st, ok := strs[p.key]; ok {
			*st.dst = p.value
			sec.setLabel(st.field, where(p))
			*st.set = append(*st.set, p.key)
			continue
		}
		switch p.key {
		case "security.protocol":
			protocol = &props[i]
		case "sasl.mechanism", "sasl.mechanisms":
			sec.Mechanism = strings.ToUpper(p.value)
			sec.setLabel("Mechanism", where(p))
			saslSet = append(saslSet, p.key)
		case "sasl.jaas.config":
			jaas = &props[i]
			saslSet = append(saslSet, p.key)
		case "ssl.endpoint.identification.algorithm":
			switch strings.ToLower(p.value) {
			case "https":
			case "", "none":
				sec.TLSSkipHostnameVerify = true
			default:
				return cc, fmt.Errorf("%s: %q is not https or none", where(p), p.value)
			}
		case "enable.ssl.certificate.verification":
			v, err := strconv.ParseBool(p.value)
			if err != nil {
				return cc, fmt.Errorf("%s: %q is not true or false", where(p), p.value)
			}
			sec.TLSInsecure = !v
		case "bootstrap.servers", "metadata.broker.list":
			cc.Bootstrap = p.value
		case "client.id":
			cc.ClientID = p.value
		case "ssl.key.password":
			if p.value != "" {
				return cc, fmt.Errorf("%s: encrypted private keys are not supported; decrypt the key (openssl pkey -in key.pem -out plain-key.pem) and drop ssl.key.password", where(p))
			}
		case "ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.location",
			"ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.ca.pem", "ssl.certificate.pem",
			"ssl.key.pem", "ssl.ca.certificate.stores", "ssl.engine.location", "ssl.providers":
			if p.value != "" {
				return cc, fmt.Errorf("%s: not supported by the MoonMQ toolkit; give PEM files with ssl.ca.location, ssl.certificate.location and ssl.key.location", where(p))
			}
		default:
			if !knownClientKey(p.key) {
				return cc, fmt.Errorf("%s: unknown client config key %q (not a Kafka or librdkafka client setting)", where(p), p.key)
			}
		}
	}
	if jaas != nil {
		user, pass, err := parseJAAS(jaas.value)
		if err != nil {
			return cc, fmt.Errorf("%s: %w", where(*jaas), err)
		}
		// sasl.username / sasl.password win: they are the more specific.
		if sec.User == "" {
			sec.User = user
			sec.setLabel("User", where(*jaas))
		}
		if sec.Password == "" {
			sec.Password = pass
			sec.setLabel("Password", where(*jaas))
		}
	}

	proto := "PLAINTEXT"
	if protocol != nil {
		proto = strings.ToUpper(protocol.value)
	}
	switch proto {
	case "PLAINTEXT", "SSL":
		if len(saslSet) > 0 {
			return cc, fmt.Errorf("%s: %s is set but security.protocol is %s: set security.protocol=SASL_SSL (or SASL_PLAINTEXT)", name, saslSet[0], proto)
		}
	case "SASL_PLAINTEXT", "SASL_SSL":
		if sec.Mechanism == "" {
			return cc, fmt.Errorf("%s: security.protocol=%s needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not supported)", name, proto)
		}
		if sec.User == "" {
			return cc, fmt.Errorf("%s: security.protocol=%s needs sasl.username (or sasl.jaas.config with username=...)", name, proto)
		}
	default:
		return cc, fmt.Errorf("%s: security.protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", where(*protocol), protocol.value)
	}
	switch proto {
	case "SSL", "SASL_SSL":
		sec.TLS = true
	default:
		if len(sslSet) > 0 {
			return cc, fmt.Errorf("%s: %s is set but security.protocol is %s: set security.protocol=SSL (or SASL_SSL)", name, sslSet[0], proto)
		}
		sec.TLSSkipHostnameVerify, sec.TLSInsecure = false, false
	}
	// The password may come from elsewhere ($MOONMQ_PASSWORD, --password, a
	// prompt): the file is checked as if it had one.
	check := *sec
	if check.User != "" && check.Password == "" {
		check.Password = "-"
	}
	if err := check.Validate(); err != nil {
		return cc, fmt.Errorf("%s: %w", name, err)
	}
	return cc, nil
}

// jaasLogin is `module.Class required key="value" ...;`.
var (
	jaasLogin = regexp.MustCompile(`^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);?\s*$`)
	jaasOpt   = regexp.MustCompile(`\s*([\w.]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)`)
)

// parseJAAS extracts username and password from a PLAIN or SCRAM login
// module line (Java's sasl.jaas.config).
func parseJAAS(s string) (user, pass string, err error) {
	m := jaasLogin.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf("cannot read it: want `org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p\";`")
	}
	switch m[1] {
	case "org.apache.kafka.common.security.plain.PlainLoginModule",
		"org.apache.kafka.common.security.scram.ScramLoginModule":
	default:
		return "", "", fmt.Errorf("login module %s is not supported (want PlainLoginModule or ScramLoginModule)", m[1])
	}
	rest := m[3]
	for strings.TrimSpace(rest) != "" {
		loc := jaasOpt.FindStringSubmatchIndex(rest)
		if loc == nil || loc[0] != 0 {
			return "", "", fmt.Errorf("cannot read options %q: want key=\"value\" pairs", strings.TrimSpace(rest))
		}
		k, v := rest[loc[2]:loc[3]], rest[loc[4]:loc[5]]
		if strings.HasPrefix(v, `"`) {
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(v[1 : len(v)-1])
		}
		switch k {
		case "username":
			user = v
		case "password":
			pass = v
		}
		rest = rest[loc[1]:]
	}
	if user == "" {
		return "", "", fmt.Errorf("no username=\"...\"")
	}
	return user, pass, nil
}

// knownClientKey reports whether key is a setting of the Java clients or
// librdkafka that the toolkit may ignore: it tunes producing, consuming
// or the client's internals, not whom it talks to or how securely.
func knownClientKey(key string) bool {
	if knownClientKeys[key] {
		return true
	}
	for _, p := range knownClientKeyPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// knownClientKeyPrefixes are families of settings, e.g. the SASL login
// refresh and OAuth ones, and the Java keystore/truststore types and
// passwords (their locations are refused above).
var knownClientKeyPrefixes = []string{
	"sasl.login.", "sasl.kerberos.", "sasl.oauthbearer.", "sasl.client.", "sasl.oauthbearer",
	"ssl.truststore.", "ssl.keystore.", "ssl.cipher", "ssl.curves", "ssl.sigalgs", "ssl.protocol",
	"ssl.enabled.protocols", "ssl.engine.", "ssl.secure.random", "ssl.trustmanager.", "ssl.keymanager.",
	"ssl.crl.", "ssl_engine", "metrics.", "metric.", "reconnect.backoff", "retry.backoff",
	"socket.", "queue.buffering.", "queued.", "fetch.", "topic.metadata.", "api.version.",
	"broker.version.", "enable.", "log.", "log_", "debug", "statistics.", "plugin.", "interceptor.",
	"consume.", "group.", "partition.assignment", "auto.", "compression.", "batch.", "message.",
	"delivery.", "request.", "transaction", "producer.", "consumer.", "admin.", "default.api",
	"connections.", "client.dns", "client.rack", "allow.auto", "isolation.", "max.", "session.",
	"heartbeat.", "rebalance.", "internal.", "check.crcs", "key.", "value.", "buffer.", "receive.",
	"send.", "linger.", "acks", "retries", "offset.", "coordinator.", "dr_", "opaque",
	"background_event", "error_cb", "throttle_cb", "stats_cb", "oauthbearer_token", "sticky.",
	"security.providers", "sasl.jaas", "metadata.", "bootstrap.controllers", "enable_",
}

var knownClientKeys = map[string]bool{
	"builtin.features": true, "client.software.name": true, "client.software.version": true,
	"sasl.kerberos.service.name": true, "sasl.service.name": true, "sasl.oauthbearer.config": true,
	"topic.blacklist": true, "topic.denylist": true, "resolve.canonical.bootstrap.servers.only": true,
	"use.deprecated.session.jitter": true, "partitioner": true, "partitioner.class": true,
	"ssl.endpoint.identification.algorithm": true,
}
