package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "moonmq.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func load(t *testing.T, args, env []string) (*serveConfig, error) {
	t.Helper()
	var out, errb bytes.Buffer
	return loadServeConfig(args, env, &out, &errb)
}

func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `
listen = "127.0.0.1:7000"
http = "127.0.0.1:7001"
node_id = 7
auto_create_topics = true
retention_check_interval = "5s"
`)
	env := []string{"MOONMQ_LISTEN=127.0.0.1:8000", "MOONMQ_DATA=/from/env", "MOONMQ_NODE_ID=9", "MOONMQ_ADDR=ignored:1"}
	cfg, err := load(t, []string{"--config", file, "--node-id", "3"}, env)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.nodeID, "flag beats file and env")
	require.Equal(t, "127.0.0.1:7000", cfg.listen, "file beats env")
	require.Equal(t, "/from/env", cfg.data, "env beats default")
	require.True(t, cfg.autoCreate)
	require.Equal(t, 5*time.Second, cfg.retentionCheck)
	require.Equal(t, "127.0.0.1:7001", cfg.http)
	require.Equal(t, 1, cfg.defaultPartitions, "default when nobody sets it")

	// MOONMQ_CONFIG names the file when --config is absent.
	cfg, err = load(t, nil, []string{"MOONMQ_CONFIG=" + file})
	require.NoError(t, err)
	require.Equal(t, 7, cfg.nodeID)
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args, env  []string
		want       string
	}{
		{name: "unknown file key", file: "listn = \"x\"\n", want: `unknown key "listn"`},
		{name: "bad file value", file: "node_id = \"seven\"\n", want: "node_id"},
		{name: "nested table", file: "[kafka]\nlisten = \"x\"\n", want: `key "kafka"`},
		{name: "bad env value", env: []string{"MOONMQ_MAX_CONNECTIONS=lots"}, want: "MOONMQ_MAX_CONNECTIONS"},
		{name: "bad duration", env: []string{"MOONMQ_SHUTDOWN_TIMEOUT=-1s"}, want: "shutdown-timeout"},
		{name: "invalid range", args: []string{"--default-partitions", "0"}, want: "default-partitions"},
		{name: "missing file", args: []string{"--config", "/nonexistent/moonmq.toml"}, want: "does not exist"},
		// Issue 11: what was expected, and the nearest key to a misspelt one.
		{name: "integer in file", file: "node_id = \"one\"\n", want: `node_id = "one": want an integer, e.g. 1`},
		{name: "duration without unit", file: "shutdown_timeout = \"10\"\n", want: "a duration needs a unit, e.g. 10s"},
		{name: "bad duration in env", env: []string{"MOONMQ_SHUTDOWN_TIMEOUT=soon"}, want: "want a duration such as 10s"},
		{name: "boolean in env", env: []string{"MOONMQ_AUTO_CREATE_TOPICS=maybe"}, want: "want true or false"},
		{name: "misspelt key", file: "log_levle = \"debug\"\n", want: `unknown key "log_levle"; did you mean log_level?`},
		{name: "bad advertise", args: []string{"--advertise", "nohost"}, want: `advertise "nohost": want host:port`},
		// Issue 13: the cluster flags.
		{name: "bad peers entry", args: []string{"--peers", "1:127.0.0.1:9093"}, want: `peers: entry "1:127.0.0.1:9093": want ID@HOST:PORT`},
		{name: "peers in env", env: []string{"MOONMQ_PEERS=2@127.0.0.1:9193"}, want: "node-id 1 is not in --peers 2@127.0.0.1:9193"},
		{name: "peers in file", file: "peers = \"1@127.0.0.1:9093,1@127.0.0.1:9193\"\n", want: "node id 1 is listed twice"},
		{name: "session timeout", args: []string{"--broker-session-timeout", "1ms"}, want: "broker-session-timeout 1ms"},
		{name: "gossip without peers", args: []string{"--gossip-listen", "127.0.0.1:9094"}, want: "need --peers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			_, err := load(t, args, tc.env)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := load(t, []string{"--no-such-flag"}, nil)
	require.ErrorIs(t, err, errUsage)
	_, err = newLogger("loud", "text", &bytes.Buffer{})
	require.ErrorContains(t, err, "log-level")
}

// A Kafka-style dotted key, which TOML reads as nested tables, is named
// whole, with what MoonMQ has instead when there is an obvious equivalent.
func TestConfigDottedKafkaKeyNamedWhole(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"listen = \"127.0.0.1:7000\"\nlog.retention.hours = 168\n",
			[]string{`unknown key "log.retention.hours"`, "not Kafka's dotted broker settings", "the topic config retention.ms"}},
		{"[log.retention]\nhours = 168\n", []string{`unknown key "log.retention.hours"`}},
		{"\"log.retention.hours\" = 168\n", []string{`unknown key "log.retention.hours"`, "retention.ms"}},
		{"num.partitions = 3\n", []string{`unknown key "num.partitions"`, "use default_partitions"}},
		{"auto.create.topics.enable = true\n", []string{`unknown key "auto.create.topics.enable"`, "use auto_create_topics"}},
		{"some.thing.else = 1\n", []string{`unknown key "some.thing.else"`, "underscores"}},
	} {
		_, err := load(t, []string{"--config", writeConfig(t, tc.file)}, nil)
		require.Error(t, err, tc.file)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, tc.file)
		}
		require.NotContains(t, err.Error(), `unknown key "log"`, tc.file)
	}
}

func TestPrintConfigRoundTrips(t *testing.T) {
	var out, errb bytes.Buffer
	_, err := loadServeConfig([]string{"--print-config", "--node-id", "4", "--listen", "127.0.0.1:9999"}, nil, &out, &errb)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "node_id = 4\n")
	require.Contains(t, out.String(), `listen = "127.0.0.1:9999"`)

	// The printed file loads back to the same settings.
	cfg, err := load(t, []string{"--config", writeConfig(t, out.String())}, nil)
	require.NoError(t, err)
	require.Equal(t, 4, cfg.nodeID)
	require.Equal(t, "127.0.0.1:9999", cfg.listen)
}

// Issue 11: a flag mistake is one line that says what was expected, and
// names the nearest flag to a misspelt one (TestConfigErrorsNameTheKey
// covers the config file and the environment).
func TestFlagErrorsSayWhatWasExpected(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listn", "x"}, "unknown flag --listn; did you mean --listen?"},
		{[]string{"--node-id", "one"}, `--node-id "one": want an integer, e.g. 1`},
		{[]string{"--shutdown-timeout", "10"}, "a duration needs a unit, e.g. 10s"},
		{[]string{"--auto-create-topics=maybe"}, `--auto-create-topics "maybe": want true or false`},
	} {
		var out, errb bytes.Buffer
		_, err := loadServeConfig(tc.args, nil, &out, &errb)
		require.ErrorIs(t, err, errUsage, "%v", tc.args)
		require.Contains(t, errb.String(), tc.want, "%v", tc.args)
		require.NotContains(t, errb.String(), "Usage:", "one line, not the whole usage: %v", tc.args)
	}
}

// --print-config refuses what serve would: it used to print a log level
// that serve then rejected, and exit 0.
func TestPrintConfigValidatesLikeServe(t *testing.T) {
	var out, errb bytes.Buffer
	_, err := loadServeConfig([]string{"--print-config", "--log-level", "verbose"}, nil, &out, &errb)
	require.ErrorContains(t, err, `log-level "verbose": want debug, info, warn or error`)
	require.Empty(t, out.String())
	_, err = loadServeConfig([]string{"--print-config", "--log-format", "xml"}, nil, &out, &errb)
	require.ErrorContains(t, err, "log-format")
	// Group settings are checked by the coordinator's own rules, before
	// anything is opened.
	_, err = loadServeConfig([]string{"--print-config", "--offsets-topic-partitions", "5000"}, nil, &out, &errb)
	require.ErrorContains(t, err, "offsets topic partitions 5000")
	_, err = loadServeConfig([]string{"--print-config", "--group-consumer-heartbeat-interval", "1m"}, nil, &out, &errb)
	require.Error(t, err)
	require.Empty(t, out.String())
}
