// Package archtest keeps the dependency rules of DESIGN.md true: engine
// imports nothing from net, cluster, mql or tui; the storage leaves
// (engine/vfs, engine/batch, engine/topicconfig, engine/clock, engine/log),
// the coordinator runtime (engine/coord, which coordinators such as
// engine/group build on) and the shared leaves (net/protoext,
// internal/when, cluster/metadata, cluster/replication, cluster/membership,
// and the cluster tests' internal/faultproxy and internal/history) import no other
// MoonMQ package but each other as listed; net/client never imports engine; net/kafka never
// imports cluster/controller (it sees cluster/metadata); cluster/controller
// never imports cluster/membership (it takes a Liveness); net/peer (the
// follower fetcher) sees only engine/replica, never cluster/ or net/kafka;
// mql and tui reach brokers only through net/client, so neither imports
// franz-go itself (their tests may, to run franz-go's fake cluster); the
// test harnesses stay in tests, and the tests of net/kafka, mql and tui
// never build the binary.
package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/moonmq/moonmq"

func TestDependencyDirection(t *testing.T) {
	rules := []struct {
		pkgs      string   // go list pattern
		forbidden []string // import path prefixes (under the module)
	}{
		{"./engine/...", []string{"net/", "cluster/", "mql", "tui", "internal/", "node"}},
		{"./net/client/...", []string{"engine/", "cluster/", "net/kafka", "net/httpapi"}},
		{"./mql/...", []string{"engine/", "cluster/", "net/kafka", "net/httpapi", "node"}},
		{"./tui/...", []string{"engine/", "cluster/", "net/kafka", "net/httpapi", "node"}},
		{"./cluster/...", []string{"net/", "mql", "tui", "node"}},
		// node assembles a broker from the layers below it: none of
		// them may import it (package main and test harnesses do).
		{"./net/...", []string{"node"}},
		// The Kafka front end sees metadata through cluster/metadata's
		// types, not the controller that replicates it (a multi-node
		// broker answers from metadata it does not replicate itself).
		{"./net/kafka/...", []string{"cluster/controller"}},
		// The controller takes liveness through its Liveness interface
		// (the node passes a *membership.Membership), so its tests run
		// with a fake and no gossip.
		{"./cluster/controller/...", []string{"cluster/membership"}},
		// The follower fetcher drives replicas (engine/replica) over the
		// Kafka wire with kmsg alone: no controller state (the node tells
		// it whom to follow), not the server it talks to.
		{"./net/peer/...", []string{"cluster/", "net/kafka", "net/httpapi", "net/client", "internal/"}},
	}
	for _, r := range rules {
		checkDeps(t, r.pkgs, func(rel string) bool {
			for _, f := range r.forbidden {
				if strings.HasPrefix(rel, f) {
					return false
				}
			}
			return true
		})
	}
}

// TestStorageLeaves: the storage packages stay small and self-contained, so
// they can be read, tested and fuzzed alone. The other leaves are shared
// by parts that must not import each other: net/protoext by the broker and
// the client, internal/when (the time forms people type) by mql and tui;
// cluster/replication is a pure protocol core, tested alone.
func TestStorageLeaves(t *testing.T) {
	leaves := map[string][]string{ // package: the MoonMQ packages it may import
		"./engine/vfs":          nil,
		"./engine/batch":        nil,
		"./engine/topicconfig":  nil,
		"./engine/txn":          nil,
		"./engine/clock":        nil,
		"./engine/log":          {"engine/batch", "engine/clock", "engine/vfs"},
		"./net/protoext":        nil,
		"./internal/lag":        nil,
		"./internal/cli":        nil,
		"./internal/syncbuf":    nil,
		"./internal/when":       nil,
		"./internal/faultproxy": nil,
		"./internal/history":    nil,
		"./internal/testcerts":  nil,
		// The metadata image carries ACL bindings in engine/acl's types;
		// the authorizer itself is a leaf of pure decisions.
		"./cluster/metadata": {"engine/acl"},
		"./engine/acl":       nil,
		// Client quotas decide from the quotas and the time they are
		// given (net/kafka converts cluster/metadata's quotas for it).
		"./engine/quota": nil,
		// Authentication (SASL mechanisms, lockout, TLS material) sees
		// users only through cluster/metadata's credential type and an
		// interface the controller implements; the front end drives it.
		"./net/auth": {"cluster/metadata", "engine/acl", "net/protoext"},

		// The replication core decides (ISR, high watermark, acks=all)
		// from inputs; engine/replica and node feed it and carry its
		// decisions, so it imports neither.
		"./cluster/replication": nil,

		// Gossip liveness is a leaf the controller consumes through an
		// interface of its own: the controller's tests pass a fake, and
		// membership knows nothing of what liveness is used for.
		"./cluster/membership": nil,

		// The coordinator runtime knows records, not what they mean: a
		// group or transaction coordinator builds on it, never the
		// reverse.
		"./engine/coord":           {"engine/batch"},
		"./engine/coord/coordtest": {"engine/batch", "engine/coord"},

		// The transaction coordinator is a coordinator on the runtime:
		// it decides transactions from records and time, and writes
		// markers through an interface the node implements.
		"./engine/txncoord": {"engine/batch", "engine/coord"},

		// The log cleaner schedules compaction of logs it is given (a
		// Source the node builds from its replicas); it never reaches
		// into replicas, the cluster or the network.
		"./engine/cleaner": {"engine/batch", "engine/clock", "engine/log", "engine/topicconfig", "engine/vfs"},
	}
	for pkg, allowed := range leaves {
		checkDeps(t, pkg, func(rel string) bool {
			for _, a := range allowed {
				if rel == a {
					return true
				}
			}
			return false
		})
	}
}

// TestHarnessesStayInTests: internal/testnode, internal/testbroker and
// internal/cluster start brokers for tests, internal/faultproxy cuts their
// links, internal/history checks what their clients saw and
// internal/testcerts makes their certificates; no package's non-test
// code depends on them (but each other's).
func TestHarnessesStayInTests(t *testing.T) {
	harness := map[string]bool{"internal/testnode": true, "internal/testbroker": true,
		"internal/cluster": true, "internal/faultproxy": true, "internal/history": true,
		"internal/testcerts": true}
	for pkg, deps := range listDeps(t, "./...") {
		if harness[strings.TrimPrefix(pkg, module+"/")] {
			// The harnesses build on each other: internal/cluster runs
			// internal/testbroker's processes behind internal/faultproxy.
			continue
		}
		for _, d := range deps {
			if harness[strings.TrimPrefix(d, module+"/")] {
				t.Errorf("%s imports %s, a test harness: only tests may", pkg, d)
			}
		}
	}
}

// TestBrokerTestsRunInProcess: the tests of net/kafka, mql and tui start
// the brokers they need in-process (internal/testnode), so running them
// never builds the moonmq binary, which internal/testbroker does. Tests of
// a real process live in internal/e2e and package main.
func TestBrokerTestsRunInProcess(t *testing.T) {
	for _, pkgs := range []string{"net/kafka/...", "mql/...", "tui/..."} {
		out, err := exec.Command("go", "list", "-e", "-test", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, "../../"+pkgs).CombinedOutput()
		require.NoError(t, err, "go list -test %s: %s", pkgs, out)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, deps, _ := strings.Cut(line, ":")
			for _, d := range strings.Fields(deps) {
				if d == module+"/internal/testbroker" {
					t.Errorf("%s depends on internal/testbroker: start the broker in-process with internal/testnode", pkg)
				}
			}
		}
	}
}

// checkDeps fails for every MoonMQ package that pkgs depend on (directly or
// not) and ok refuses.
func checkDeps(t *testing.T, pkgs string, ok func(rel string) bool) {
	t.Helper()
	for pkg, deps := range listDeps(t, pkgs) {
		for _, d := range deps {
			rel, inModule := strings.CutPrefix(d, module+"/")
			if inModule && !ok(rel) {
				t.Errorf("%s imports %s, which DESIGN.md forbids", pkg, d)
			}
		}
	}
}

// listDeps maps every package pkgs matches to its dependencies (direct or
// not); nothing when the pattern matches no package yet.
func listDeps(t *testing.T, pkgs string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, "../../"+strings.TrimPrefix(pkgs, "./")).CombinedOutput()
	if strings.Contains(string(out), "matched no packages") {
		return nil // the package does not exist yet
	}
	require.NoError(t, err, "go list %s: %s", pkgs, out)
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		m[pkg] = strings.Fields(deps)
	}
	return m
}

// TestToolkitUsesOnlyTheFacade: DESIGN.md decision 2 — the console and the
// dashboard reach a broker only through net/client. Transitively they
// depend on franz-go (through net/client), so the rule is on direct
// imports of their non-test files.
func TestToolkitUsesOnlyTheFacade(t *testing.T) {
	const franz = "github.com/twmb/franz-go"
	for _, pkgs := range []string{"mql/...", "tui/..."} {
		out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "../../"+pkgs).CombinedOutput()
		if strings.Contains(string(out), "matched no packages") {
			continue
		}
		require.NoError(t, err, "go list %s: %s", pkgs, out)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, imports, _ := strings.Cut(line, ":")
			for _, imp := range strings.Fields(imports) {
				if imp == franz || strings.HasPrefix(imp, franz+"/") {
					t.Errorf("%s imports %s: DESIGN.md decision 2 says it reaches brokers only through net/client", pkg, imp)
				}
			}
		}
	}
}
