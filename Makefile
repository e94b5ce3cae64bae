# MoonMQ build and test entry points. `make run` starts a node on the
# embedded defaults; `make test` installs what the tests need and runs the
# whole suite (CI runs it through .ci/run).

GO      ?= go
BIN     ?= bin/moonmq
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Short fuzz runs per target inside `make test`; `make fuzz FUZZTIME=5m` for more.
FUZZTIME ?= 3s

.PHONY: build run cluster test unit e2e fuzz soak compaction-crash kgo-suite deps bench bench-compaction vet clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

run: build
	./$(BIN) serve

# cluster starts three nodes on fixed loopback ports (Kafka 9092, 9192,
# 9292) with data under ./moonmq-cluster; Ctrl-C stops them. See
# scripts/cluster.sh and the README's "Cluster" section.
cluster: build
	BIN=$(BIN) scripts/cluster.sh

# deps installs the external tools the end-to-end tests drive (kcat is
# librdkafka's CLI, our second real client; prlimit runs a broker under a
# low descriptor limit). Idempotent; needs root or sudo. The full-disk test
# mounts a tmpfs and skips itself when not run as root.
deps:
	@command -v kcat >/dev/null 2>&1 || { \
		echo "installing kcat (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; }
	@command -v tmux >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null; }
	@command -v prlimit >/dev/null 2>&1 || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null; }

vet:
	$(GO) vet ./...

test: deps vet
	$(GO) test -count=1 -timeout 8m ./...
	$(MAKE) fuzz

# fuzz runs every fuzz target briefly (go test runs one -fuzz target at a time);
# .ci/fuzz-one retries once the Go 1.26 fuzztime deadline race (no failing input).
fuzz:
	@for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$spec/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$spec $$f ($(FUZZTIME))"; \
			GO=$(GO) .ci/fuzz-one $$spec $$f $(FUZZTIME) || exit 1; \
		done; \
	done

# soak runs the cluster fault test (internal/clustertest) for SOAK, a
# duration or a number of nemesis cycles; `make test` runs it for a minute.
SOAK ?= 30m
soak: deps
	MOONMQ_SOAK=$(SOAK) $(GO) test -count=1 -v -timeout 0 -run TestFaultsKeepAcknowledgedWrites ./internal/clustertest/

# compaction-crash SIGKILLs a broker KILLS times while its log cleaner
# compacts a topic being written, at each step of the cleaner's segment
# swap in turn, and checks every key's latest value after each restart
# (internal/e2e); `make test` runs 4 kills. MOONMQ_COMPACTION_SEED=N
# replays the kill points of a run.
KILLS ?= 60
compaction-crash:
	MOONMQ_COMPACTION_KILLS=$(KILLS) $(GO) test -count=1 -v -timeout 0 -run TestCompactionSurvivesSIGKILL ./internal/e2e/

# kgo-suite runs franz-go's own integration tests (pkg/kgo, at the version
# go.mod requires) against a three-node cluster with replication factor 3;
# see scripts/kgo-suite.sh for its knobs.
kgo-suite: build
	BIN=$(BIN) scripts/kgo-suite.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./engine/...

# bench-compaction measures the log cleaner on real brokers: its throughput
# and the produce latency next to it (README "Performance"); WHAT is
# throughput, latency or all, RUNS the repetitions. Writes about 10 GB
# under a temporary directory; see scripts/bench-compaction.sh.
WHAT ?= all
RUNS ?= 3
bench-compaction: build
	BIN=$(BIN) RUNS=$(RUNS) scripts/bench-compaction.sh $(WHAT)

clean:
	rm -rf bin
