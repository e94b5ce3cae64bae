package client

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// PasswordEnv is the environment variable the toolkit reads a SASL
// password from, so it need not appear on a command line (where ps shows
// it).
const PasswordEnv = "MOONMQ_PASSWORD"

// SecurityFlags are the toolkit's connection-security flags, the same for
// moonmq --repl, run, -e, top and bench (a contract: scripts use them):
//
//	--user NAME  --password PW (or $MOONMQ_PASSWORD)  --mechanism M
//	--tls  --tls-ca FILE  --tls-cert FILE  --tls-key FILE
//	--client-config FILE   (a Kafka client properties file)
//
// Flags override the file; $MOONMQ_PASSWORD overrides the file's password
// and --password overrides both.
type SecurityFlags struct {
	fs                        *flag.FlagSet
	user, password, mechanism string
	tls                       bool
	tlsCA, tlsCert, tlsKey    string
	clientConfig              string
	loaded                    *ClientConfig // by Resolve
}

// RegisterSecurityFlags adds the security flags to fs.
func RegisterSecurityFlags(fs *flag.FlagSet) *SecurityFlags {
	f := &SecurityFlags{fs: fs}
	fs.StringVar(&f.user, "user", "", "SASL user (SCRAM-SHA-256 unless --mechanism says otherwise)")
	fs.StringVar(&f.password, "password", "", "SASL password (prefer $"+PasswordEnv+": a command line is visible to other users)")
	fs.StringVar(&f.mechanism, "mechanism", "", "SASL mechanism: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN, or SCRAM-SHA-256-PLUS/-512-PLUS (default: SCRAM-SHA-256, and over TLS SCRAM-SHA-256-PLUS when the broker offers it)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (verifying the broker against the system CAs or --tls-ca)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CA(s) that sign the brokers' certificates (implies --tls)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate, for brokers that require one (mTLS; with --tls-key; implies --tls)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&f.clientConfig, "client-config", "", "Kafka client properties file (security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...), as kcat -F reads")
	return f
}

// set reports whether the flag name was given on the command line.
func (f *SecurityFlags) set(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			found = true
		}
	})
	return found
}

// Resolve combines --client-config, $MOONMQ_PASSWORD (through getenv) and
// the flags into a Security. It reads the client config file but no
// certificate (Options.Validate and Dial do). The password may be left
// empty for a user (NeedsPassword): the REPL then prompts for it; other
// callers report it with MissingPasswordError. Errors name the flag or
// config key at fault.
func (f *SecurityFlags) Resolve(getenv func(string) string) (Security, error) {
	var sec Security
	if f.clientConfig != "" {
		cc, err := LoadClientConfig(f.clientConfig)
		if err != nil {
			return sec, fmt.Errorf("--client-config: %w", err)
		}
		f.loaded = &cc
		sec = cc.Security
	}
	if pw := getenv(PasswordEnv); pw != "" {
		sec.Password = pw
		sec.setLabel("Password", "$"+PasswordEnv)
	}
	str := func(name, field string, dst *string, v string) {
		if f.set(name) {
			*dst = strings.TrimSpace(v)
			sec.setLabel(field, "--"+name)
		}
	}
	if f.set("user") && f.user != sec.User && !f.set("password") && getenv(PasswordEnv) == "" {
		// Another user than the file's: the file's password is not
		// theirs.
		sec.Password = ""
	}
	str("user", "User", &sec.User, f.user)
	if f.set("password") {
		sec.Password = f.password // not trimmed: a password is what it is
		sec.setLabel("Password", "--password")
	}
	str("mechanism", "Mechanism", &sec.Mechanism, strings.ToUpper(f.mechanism))
	str("tls-ca", "TLSCAFile", &sec.TLSCAFile, f.tlsCA)
	str("tls-cert", "TLSCertFile", &sec.TLSCertFile, f.tlsCert)
	str("tls-key", "TLSKeyFile", &sec.TLSKeyFile, f.tlsKey)
	if f.set("tls") {
		sec.TLS = f.tls
		if !f.tls {
			// --tls=false overrides a file's SSL, with everything that
			// only means something over TLS.
			sec.TLSCAFile, sec.TLSCertFile, sec.TLSKeyFile = "", "", ""
			sec.TLSSkipHostnameVerify, sec.TLSInsecure, sec.TLSServerName = false, false, ""
		}
	}
	if sec.Mechanism != "" && sec.User == "" {
		return sec, fmt.Errorf("%s: SASL mechanism %s needs a user (--user)", sec.label("Mechanism"), sec.Mechanism)
	}
	if sec.Password != "" && sec.User == "" {
		return sec, fmt.Errorf("%s: a password without a user (--user)", sec.label("Password"))
	}
	// A user without a mechanism stays so: SCRAM-SHA-256, or over TLS
	// SCRAM-SHA-256-PLUS when the broker offers it (Options.prepare).
	// Settings given nowhere are named by the flag that would give them.
	for field, fl := range map[string]string{"User": "--user", "Password": "--password", "Mechanism": "--mechanism",
		"TLSCAFile": "--tls-ca", "TLSCertFile": "--tls-cert", "TLSKeyFile": "--tls-key"} {
		if sec.labels[field] == "" {
			sec.setLabel(field, fl)
		}
	}
	return sec, nil
}

// NeedsPassword reports whether sec names a user but has no password.
func NeedsPassword(sec Security) bool { return sec.User != "" && sec.Password == "" }

// MissingPasswordError is the error for a user without a password where
// no prompt is possible.
func MissingPasswordError(sec Security) error {
	return fmt.Errorf("--password: no password for user %q (give --password, $%s, or sasl.password in --client-config)", sec.User, PasswordEnv)
}

// Addr returns the broker address to use: addr as the caller resolved it
// (--addr, else $MOONMQ_ADDR, else the default), unless neither --addr nor
// $MOONMQ_ADDR was given and the client config names bootstrap.servers.
// Call it after Resolve.
func (f *SecurityFlags) Addr(addr string) string {
	if f.loaded == nil || f.loaded.Bootstrap == "" || f.set("addr") || os.Getenv("MOONMQ_ADDR") != "" {
		return addr
	}
	return f.loaded.Bootstrap
}
