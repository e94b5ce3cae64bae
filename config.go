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
				errs = append(errs, fmt.Errorf("environment %s=%q: %v", envKey(f.Name), v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// readConfigFile parses a flat TOML file into flag name -> value, rejecting
// keys that are not settings.
func readConfigFile(path string, fs *flag.FlagSet) (map[string]string, error) {
	raw := map[string]any{}
	if _, err := toml.DecodeFile(path, &raw); err != nil {
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

// printConfig writes the effective settings as a config file that
// reproduces them.
func printConfig(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "# moonmq serve: effective configuration")
	fs.VisitAll(func(f *flag.Flag) {
		if metaFlags[f.Name] {
			return
		}
		v := f.Value.String()
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
