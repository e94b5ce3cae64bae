package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/moonmq/moonmq/internal/cli"
)

// Configuration comes from three sources with one definition: every setting
// is a flag of `moonmq serve`; the config file uses the flag's name with
// dashes as underscores (max-connections -> max_connections), and the
// environment uses MOONMQ_ plus the upper-cased key (MOONMQ_MAX_CONNECTIONS).
// Precedence: command-line flags, then the config file, then the
// environment, then the built-in defaults. Each value goes through the
// flag's own parser, so a bad value is rejected with the key named, in
// whichever source it came from.

// metaFlags configure the loading itself, or are one-off actions, and are
// not settings: they come only from the command line (a reset left in a
// config file would repeat at every start).
var metaFlags = map[string]bool{"config": true, "print-config": true, "reset-offsets-topic": true}

func fileKey(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

func envKey(flagName string) string {
	return "MOONMQ_" + strings.ToUpper(fileKey(flagName))
}

// applyConfig fills every flag not set on the command line from the config
// file (if path is not empty) and then from env (KEY=VALUE pairs).
func applyConfig(fs *flag.FlagSet, path string, env []string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	if path != "" {
		values, err := readConfigFile(path, fs)
		if err != nil {
			return err
		}
		for name, v := range values {
			if set[name] {
				continue
			}
			if err := cli.Set(fs, name, v); err != nil {
				if cli.IsSecret(fs, name) {
					return fmt.Errorf("config file %s: %s (value not shown: it holds a secret): %v", path, fileKey(name), err)
				}
				return fmt.Errorf("config file %s: %s = %q: %v", path, fileKey(name), v, err)
			}
			set[name] = true
		}
	}

	envs := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			envs[k] = v
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || metaFlags[f.Name] {
			return
		}
		if v, ok := envs[envKey(f.Name)]; ok {
			if err := cli.Set(fs, f.Name, v); err != nil {
				if cli.IsSecret(fs, f.Name) {
					errs = append(errs, fmt.Errorf("environment %s (value not shown: it holds a secret): %v", envKey(f.Name), err))
				} else {
					errs = append(errs, fmt.Errorf("environment %s=%q: %v", envKey(f.Name), v, err))
				}
			}
		}
	})
	return errors.Join(errs...)
}

// readConfigFile parses a flat TOML file into flag name -> value, rejecting
// keys that are not settings.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]string, error) {
	raw := map[string]any{}
	md, err := toml.DecodeFile(path, &raw)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config file %s does not exist", path)
		}
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	byKey := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !metaFlags[f.Name] {
			byKey[fileKey(f.Name)] = f.Name
		}
	})
	if err := checkDottedKeys(path, md, byKey); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		name, ok := byKey[k]
		if !ok {
			known := make([]string, 0, len(byKey))
			for key := range byKey {
				known = append(known, key)
			}
			hint := cli.DidYouMean(k, known, "")
			if hint == "" {
				hint = " (see moonmq serve --help; keys use underscores, e.g. max_connections)"
			}
			return nil, fmt.Errorf("config file %s: unknown key %q%s", path, k, hint)
		}
		switch v := raw[k].(type) {
		case string:
			out[name] = v
		case int64:
			out[name] = strconv.FormatInt(v, 10)
		case bool:
			out[name] = strconv.FormatBool(v)
		case float64:
			out[name] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return nil, fmt.Errorf("config file %s: key %q must be a string, number or boolean, not %T", path, k, v)
		}
	}
	return out, nil
}

// checkDottedKeys names a Kafka-style dotted key (log.retention.hours = 168)
// whole. TOML reads such a key as nested tables, so without this the error
// would name only its first part ("log"), which the user never wrote as a
// key. A table the file declares itself ([kafka]) is left to the caller. A
// quoted dotted key ("log.retention.hours" = 168) is one key in TOML but
// gets the same hint.
func checkDottedKeys(path string, md toml.MetaData, byKey map[string]string) error {
	tables := map[string]bool{}
	for _, k := range md.Keys() {
		if len(k) == 1 && md.Type(k...) == "Hash" {
			tables[k[0]] = true
		}
	}
	for _, k := range md.Keys() {
		name := strings.Join(k, ".")
		if _, known := byKey[k[0]]; known || tables[k[0]] || !strings.Contains(name, ".") || md.Type(k...) == "Hash" {
			continue
		}
		msg := fmt.Sprintf("config file %s: unknown key %q: MoonMQ's keys are its flag names with underscores "+
			"(e.g. max_connections), not Kafka's dotted broker settings", path, name)
		if hint := kafkaKeyHint(name); hint != "" {
			msg += "; " + hint
		}
		return errors.New(msg)
	}
	return nil
}

// kafkaBrokerKeys maps Kafka broker settings to what MoonMQ has instead.
var kafkaBrokerKeys = map[string]string{
	"auto.create.topics.enable":            "use auto_create_topics",
	"num.partitions":                       "use default_partitions",
	"broker.id":                            "use node_id",
	"node.id":                              "use node_id",
	"log.dirs":                             "use data",
	"log.dir":                              "use data",
	"advertised.listeners":                 "use advertise (host:port)",
	"socket.request.max.bytes":             "use max_request_size",
	"max.connections":                      "use max_connections",
	"max.connections.per.ip":               "use max_connections_per_ip",
	"connections.max.idle.ms":              "use connections_max_idle (a duration, e.g. 10m)",
	"log.retention.check.interval.ms":      "use retention_check_interval (a duration, e.g. 30s)",
	"group.min.session.timeout.ms":         "use group_min_session_timeout (a duration)",
	"group.max.session.timeout.ms":         "use group_max_session_timeout (a duration)",
	"group.initial.rebalance.delay.ms":     "use group_initial_rebalance_delay (a duration)",
	"group.max.size":                       "use group_max_size",
	"group.consumer.session.timeout.ms":    "use group_consumer_session_timeout (a duration)",
	"group.consumer.heartbeat.interval.ms": "use group_consumer_heartbeat_interval (a duration)",
	"offsets.retention.minutes":            "use offsets_retention (a duration, e.g. 168h)",
	"offsets.retention.check.interval.ms":  "use offsets_retention_check_interval (a duration)",
	"offsets.topic.num.partitions":         "use offsets_topic_partitions",
	"offset.metadata.max.bytes":            "use offset_metadata_max_bytes",
}

// kafkaTopicDefaults maps Kafka's broker-wide defaults of topic configs to
// the topic config: MoonMQ has no broker-wide default for them.
var kafkaTopicDefaults = map[string]string{
	"log.retention.hours":         "retention.ms",
	"log.retention.minutes":       "retention.ms",
	"log.retention.ms":            "retention.ms",
	"log.retention.bytes":         "retention.bytes",
	"log.segment.bytes":           "segment.bytes",
	"log.roll.hours":              "segment.ms",
	"log.roll.ms":                 "segment.ms",
	"log.roll.jitter.hours":       "segment.jitter.ms",
	"log.roll.jitter.ms":          "segment.jitter.ms",
	"log.index.size.max.bytes":    "segment.index.bytes",
	"log.index.interval.bytes":    "index.interval.bytes",
	"log.flush.interval.messages": "flush.messages",
	"log.flush.interval.ms":       "flush.ms",
	"log.cleanup.policy":          "cleanup.policy",
	"log.message.timestamp.type":  "message.timestamp.type",
	"log.preallocate":             "preallocate",
	"message.max.bytes":           "max.message.bytes",
	"min.insync.replicas":         "min.insync.replicas",
	"compression.type":            "compression.type",
}

func kafkaKeyHint(name string) string {
	if hint, ok := kafkaBrokerKeys[name]; ok {
		return hint
	}
	if topic, ok := kafkaTopicDefaults[name]; ok {
		return fmt.Sprintf("MoonMQ has no broker-wide default for it: set the topic config %s on each topic "+
			"(CreateTopics configs, or MQL CREATE TOPIC ... WITH (%s = ...))", topic, topic)
	}
	return ""
}

// printConfig writes the effective settings as a config file that
// reproduces them.
func printConfig(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "# moonmq serve: effective configuration")
	fs.VisitAll(func(f *flag.Flag) {
		if metaFlags[f.Name] {
			return
		}
		v := f.Value.String()
		if cli.IsSecret(fs, f.Name) {
			// Secrets (passwords) are never printed: the line says the
			// setting is there without its value.
			if v != "" {
				fmt.Fprintf(w, "# %s = %q (secret values not printed)\n", fileKey(f.Name), v)
			}
			return
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			fmt.Fprintf(w, "%s = %s\n", fileKey(f.Name), v)
			return
		}
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			fmt.Fprintf(w, "%s = %s\n", fileKey(f.Name), v)
			return
		}
		fmt.Fprintf(w, "%s = %q\n", fileKey(f.Name), v)
	})
}
