#!/usr/bin/env bash
# Runs franz-go's own integration suite (github.com/twmb/franz-go/pkg/kgo's
# tests, at the version go.mod requires) against a three-node MoonMQ
# cluster with replication factor 3: `make kgo-suite`. The cluster is
# scripts/cluster.sh's (Kafka on 127.0.0.1:9092, :9192, :9292), with its data
# in a temporary directory removed at the end.
#
# Environment: KGO_RUN (a -run pattern, default every test), KGO_SKIP (a
# -skip pattern; default skips what MoonMQ does not implement yet: share
# groups, SCRAM), KGO_TEST_RECORDS (records per ETL
# test, default 100000), KGO_TEST_CHAOS=1 (franz-go's connection chaos).
set -euo pipefail

BIN=${BIN:-bin/moonmq}
dir=$(mktemp -d)
export MOONMQ_CLUSTER_DIR="$dir"
BIN="$BIN" scripts/cluster.sh >"$dir/cluster.out" 2>&1 &
cluster=$!
cleanup() {
	kill -TERM "$cluster" 2>/dev/null || true
	wait "$cluster" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

for _ in $(seq 1 120); do
	ready=0
	for port in 9090 9190 9290; do
		curl -sf "127.0.0.1:$port/readyz" >/dev/null && ready=$((ready + 1))
	done
	[ "$ready" = 3 ] && break
	sleep 0.5
done
if [ "$ready" != 3 ]; then
	echo "kgo-suite: the cluster did not become ready; its logs:" >&2
	tail -n 50 "$dir"/node*.log >&2
	exit 1
fi

KGO_SEEDS=127.0.0.1:9092,127.0.0.1:9192,127.0.0.1:9292 KGO_TEST_RF=3 \
	KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-100000} \
	go test -count=1 -timeout 30m -v github.com/twmb/franz-go/pkg/kgo \
	-run "${KGO_RUN:-.}" -skip "${KGO_SKIP:-Share|SCRAM}" | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)'
