#!/usr/bin/env bash
# Starts a three-node MoonMQ cluster on loopback, for trying failover by
# hand (`make cluster` runs it). Node N (1..3) listens on
#   Kafka   127.0.0.1:9N92 (9092, 9192, 9292)
#   cluster 127.0.0.1:9N93 (raft; gossip on the next port, 9N94)
#   HTTP    127.0.0.1:9N90 (/readyz, /metrics, /stats)
# with its data in $MOONMQ_CLUSTER_DIR/nodeN (default ./moonmq-cluster), its
# log in nodeN.log and its pid in nodeN.pid there. Ctrl-C stops every node
# (SIGTERM: a controlled shutdown each).
#
#   scripts/cluster.sh          start the three nodes, wait for Ctrl-C
#   scripts/cluster.sh node N   start node N alone again (after killing it),
#                               in the foreground, logging to the terminal
#
# MOONMQ_CLUSTER_FLAGS adds flags to every node's `moonmq serve` (a secured
# cluster: --security-protocol, --tls-*, ...; words without spaces).
set -euo pipefail

BIN=${BIN:-bin/moonmq}
DIR=${MOONMQ_CLUSTER_DIR:-./moonmq-cluster}
PEERS=1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293

if [ ! -x "$BIN" ]; then
	echo "cluster.sh: $BIN not found: run make build (or set BIN)" >&2
	exit 1
fi

# flags prints node $1's `moonmq serve` flags; --cluster-listen, --gossip-listen
# and --join take their defaults from --peers.
flags() {
	local base=$((9000 + ($1 - 1) * 100))
	echo --node-id "$1" --data "$DIR/node$1" \
		--listen "127.0.0.1:$((base + 92))" --http "127.0.0.1:$((base + 90))" \
		--peers "$PEERS" ${MOONMQ_CLUSTER_FLAGS:-}
}

if [ "${1:-}" = node ]; then
	case "${2:-}" in 1 | 2 | 3) ;; *) echo "usage: cluster.sh node 1|2|3" >&2; exit 2 ;; esac
	mkdir -p "$DIR/node$2"
	echo $$ >"$DIR/node$2.pid"
	# shellcheck disable=SC2046 # flags are words without spaces unless DIR has some
	exec "$BIN" serve $(flags "$2")
fi

mkdir -p "$DIR"
pids=()
stop() {
	trap - INT TERM
	echo
	echo "stopping the cluster"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait
	exit 0
}
trap stop INT TERM
# Each node in its own process group: Ctrl-C reaches this script only, which
# then sends each node one SIGTERM (a second signal would make a node skip
# its clean shutdown).
set -m
for n in 1 2 3; do
	mkdir -p "$DIR/node$n"
	# shellcheck disable=SC2046
	"$BIN" serve $(flags $n) --log-format text >>"$DIR/node$n.log" 2>&1 &
	pids+=($!)
	echo $! >"$DIR/node$n.pid"
done
echo "three nodes starting: Kafka on 127.0.0.1:9092, :9192, :9292; logs in $DIR/node{1,2,3}.log"
echo "restart a node you killed with: scripts/cluster.sh node N; Ctrl-C stops them all"
# Wait until Ctrl-C; a node that exits (killed by hand, say) is reported and
# the others go on.
while [ "${#pids[@]}" -gt 0 ]; do
	set +e
	wait -n -p done "${pids[@]}"
	rc=$?
	set -e
	[ -n "${done:-}" ] || continue
	echo "node pid $done exited ($rc); see its log in $DIR"
	left=()
	for p in "${pids[@]}"; do [ "$p" = "$done" ] || left+=("$p"); done
	pids=("${left[@]}")
done
