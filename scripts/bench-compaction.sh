#!/usr/bin/env bash
# Reproduces the log-compaction rows of the README's "Performance" section on
# real `moonmq serve` processes (make bench-compaction runs it):
#
#   scripts/bench-compaction.sh throughput   the cleaner's MB/s (log read plus
#                                            written) from /stats, per codec
#   scripts/bench-compaction.sh latency      produce p99 at 5,000 records/s with
#                                            and without the cleaner at work
#   scripts/bench-compaction.sh all          both (the default)
#
# throughput: a broker without cleaner threads is filled with a compacted,
# one-partition topic (RECORDS records of SIZE bytes over KEYS keys, random
# order, segments of SEGMENT_BYTES), then stopped: that data directory is the
# template (reused by a later run with the same parameters and KEEP=1). Each
# run starts a broker with one cleaner thread on a copy of it, waits (polling
# /stats, with a deadline) until the topic has been cleaned and reads the
# /stats "cleaner" object: (bytes_read + bytes_written) / time_seconds. The
# topic is all dirty (ratio 1), so each run is one cleaning of the whole log
# below the active segment.
#
# latency: the template is a compacted topic of DIRTY_PARTITIONS partitions
# and DIRTY_RECORDS records (8 GB: a cleaning of it outlasts the run). Each
# round starts a broker on a fresh copy once with --log-cleaner-threads 0
# ("without") and once per I/O limit of CLEANER_LIMITS with the cleaner
# (--log-cleaner-io-max-bytes-per-second; 0 is unlimited, the default), and
# runs the README's latency command (`--records 50000 --size 1024 --acks
# all --rate 5000 --linger 0s` on a new 4-partition topic); with the
# cleaner, the run starts once /stats shows a cleaning under way, and the
# share of the run it was under way is logged (polled every 250 ms, in both
# variants).
#
# The broker runs on core BROKER_CPU and the load generator on LOAD_CPU
# (taskset), so each has its own core, as the README's measurements do. Every
# measurement is repeated RUNS times; the summary gives min, median and max,
# and the log the load average and CPU pressure when each run began (the
# numbers mean little on a busy machine). Everything lives under WORK
# (default: a new temporary directory, removed at the end unless KEEP=1); it
# needs about twice the template's size free (10 GB for the throughput
# template, 16 GB for the latency one).
#
# Environment (defaults): BIN (bin/moonmq), RUNS (3), WORK, KEEP (0),
# CODECS ("none zstd"), RECORDS (1500000), KEYS (100000), SIZE (1024),
# SEGMENT_BYTES (67108864), DIRTY_PARTITIONS (4), DIRTY_RECORDS (8000000),
# DIRTY_CODEC (none), CLEANER_LIMITS ("0 200000000"), THROUGHPUT_LIMITS
# ("0 200000000": unlimited, and the default limit), BROKER_CPU (0),
# LOAD_CPU (1), PORT (19092; PORT+1 is the HTTP port).
set -euo pipefail

BIN=${BIN:-bin/moonmq}
RUNS=${RUNS:-3}
CODECS=${CODECS:-none zstd}
RECORDS=${RECORDS:-1500000}
KEYS=${KEYS:-100000}
SIZE=${SIZE:-1024}
SEGMENT_BYTES=${SEGMENT_BYTES:-67108864}
DIRTY_PARTITIONS=${DIRTY_PARTITIONS:-4}
DIRTY_RECORDS=${DIRTY_RECORDS:-8000000}
DIRTY_CODEC=${DIRTY_CODEC:-none}
BROKER_CPU=${BROKER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
PORT=${PORT:-19092}
HTTP_PORT=$((PORT + 1))
CLEANER_LIMITS=${CLEANER_LIMITS:-0 200000000}
THROUGHPUT_LIMITS=${THROUGHPUT_LIMITS:-0 200000000}
WHAT=${1:-all}

case "$WHAT" in throughput | latency | all) ;; *)
	echo "usage: $0 [throughput|latency|all]" >&2
	exit 2
	;;
esac
for tool in jq curl taskset; do
	command -v "$tool" >/dev/null || { echo "bench-compaction.sh: $tool is needed" >&2; exit 1; }
done
if [ ! -x "$BIN" ]; then
	echo "bench-compaction.sh: $BIN not found: run make build (or set BIN)" >&2
	exit 1
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

if [ -z "${WORK:-}" ]; then
	WORK=$(mktemp -d /tmp/moonmq-bench-compaction.XXXXXX)
fi
mkdir -p "$WORK"
BROKER_PID=
cleanup() {
	stop_broker
	if [ "${KEEP:-0}" != 1 ]; then
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ADDR=127.0.0.1:$PORT
STATS=http://127.0.0.1:$HTTP_PORT/stats

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
load() { cut -d' ' -f1 /proc/loadavg; }
# pressure: the load average and the share of the last 10 s in which some
# task waited for a CPU (Linux PSI): how busy the machine is besides us.
pressure() {
	local psi=
	if [ -r /proc/pressure/cpu ]; then
		psi=", cpu pressure $(awk '/^some/ { sub("avg10=", "", $2); print $2 "%" }' /proc/pressure/cpu)"
	fi
	echo "load $(load)$psi"
}

# start_broker DIR FLAGS...: a broker on DIR, pinned to BROKER_CPU; returns
# once /readyz answers (deadline 60 s).
start_broker() {
	local dir=$1
	shift
	taskset -c "$BROKER_CPU" "$BIN" serve --data "$dir" --listen "$ADDR" \
		--http "127.0.0.1:$HTTP_PORT" "$@" >"$dir.log" 2>&1 &
	BROKER_PID=$!
	local deadline=$((SECONDS + 60))
	until curl -fs "http://127.0.0.1:$HTTP_PORT/readyz" >/dev/null 2>&1; do
		if ! kill -0 "$BROKER_PID" 2>/dev/null; then
			echo "bench-compaction.sh: the broker exited; its log:" >&2
			tail -20 "$dir.log" >&2
			exit 1
		fi
		if ((SECONDS > deadline)); then
			echo "bench-compaction.sh: the broker is not ready after 60 s" >&2
			exit 1
		fi
		sleep 0.2
	done
}

# stop_broker: SIGTERM (a clean shutdown, which fsyncs and checkpoints).
stop_broker() {
	if [ -n "$BROKER_PID" ]; then
		kill -TERM "$BROKER_PID" 2>/dev/null || true
		wait "$BROKER_PID" 2>/dev/null || true
		BROKER_PID=
	fi
}

bench() { taskset -c "$LOAD_CPU" "$BIN" bench produce --addr "$ADDR" "$@"; }

# fill DIR PARTITIONS RECORDS CODEC: the template, a compacted topic "table".
# A template made with the same parameters is reused (WORK kept with KEEP=1).
fill() {
	local dir=$1 parts=$2 records=$3 codec=$4
	local params="$parts $records $codec $SIZE $KEYS $SEGMENT_BYTES"
	if [ -d "$dir" ] && [ "$(cat "$dir.params" 2>/dev/null)" = "$params" ]; then
		log "reusing $dir"
		return
	fi
	rm -rf "$dir" "$dir.log" "$dir.params" "$dir.sealed" "$dir.stat"
	mkdir -p "$dir"
	start_broker "$dir" --log-cleaner-threads 0
	log "filling $dir: $records records of $SIZE bytes over $KEYS keys, $parts partition(s), compression $codec"
	bench --topic table --create --partitions "$parts" --records "$records" --size "$SIZE" \
		--keys "$KEYS" --compression "$codec" --producers 2 \
		--topic-config "cleanup.policy=compact,segment.bytes=$SEGMENT_BYTES" --output json >"$dir.fill.json"
	stop_broker
	sync
	seal "$dir"
	echo "$params" >"$dir.params"
}

# copy TEMPLATE DIR [real]: a fresh copy of the template. By default a cheap
# one: the sealed segments' .log files (all but the last of a partition) are
# hard links, as the broker never writes into them in place (a cleaning
# writes new files and renames them over; only a truncation would, and a
# clean restart makes none); every other file is copied. Their sizes and
# times are checked against the template's after each run (check_template),
# so a broker that wrote into one is caught rather than spoiling later runs.
# A cleaning frees the segments it replaced (shortening them first), which
# would destroy the template's files through a hard link, and removing a
# hard link frees nothing anyway: the runs whose broker cleans take a real
# copy ("real"), so that freeing the space is part of what they measure.
copy() {
	local from=$1 to=$2 mode=${3:-links} f
	rm -rf "$to" "$to.log"
	if [ "$mode" = real ]; then
		cp -a "$from" "$to"
		sync
		return
	fi
	(cd "$from" && find . -type d) | (mkdir -p "$to" && cd "$to" && xargs mkdir -p)
	(cd "$from" && find . -type f) | while read -r f; do
		if grep -qxF "$f" "$from.sealed"; then
			ln "$from/$f" "$to/$f"
		else
			cp -p "$from/$f" "$to/$f"
		fi
	done
	sync
}

# seal TEMPLATE: lists its sealed segments' .log files (TEMPLATE.sealed) with
# their sizes and times (TEMPLATE.stat).
seal() {
	local dir=$1 d
	(cd "$dir" && find . -name '*.log' -printf '%h\n' | sort -u | while read -r d; do
		find "$d" -maxdepth 1 -name '*.log' | sort | head -n -1
	done) >"$dir.sealed"
	(cd "$dir" && xargs -r stat -c '%n %s %Y' <"$dir.sealed") >"$dir.stat"
}

check_template() {
	local dir=$1
	if ! (cd "$dir" && xargs -r stat -c '%n %s %Y' <"$dir.sealed") | cmp -s - "$dir.stat"; then
		echo "bench-compaction.sh: a sealed segment of the template $dir changed: the broker wrote into it; remove $dir and run again" >&2
		exit 1
	fi
}

# table_compaction: the "compaction" objects of the table's partitions.
table_compaction() {
	curl -fs "$STATS" | jq -c '[.topics[] | select(.name == "table") | .partitions[].compaction]'
}

# summary NAME VALUES...: min, median and max of the values.
summary() {
	local name=$1
	shift
	printf '%s\n' "$@" | sort -g | awk -v name="$name" '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print name ": no runs"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%s: min %.4g, median %.4g, max %.4g (%d runs)\n", name, v[1], m, v[NR], NR
		}'
}

throughput() {
	local codec limit
	for codec in $CODECS; do
		local tmpl=$WORK/tp-$codec
		fill "$tmpl" 1 "$RECORDS" "$codec"
		for limit in $THROUGHPUT_LIMITS; do
			throughput_runs "$tmpl" "$codec" "$limit"
		done
	done
}

# throughput_runs TEMPLATE CODEC LIMIT: RUNS cleanings of copies of the
# template under an I/O limit (0: unlimited). Besides the /stats figure (the
# bytes the cleaner read and wrote over its time), it gives the sealed log
# cleaned per second: the size of the segments below the active one, once
# each, whatever the reads.
throughput_runs() {
	local tmpl=$1 codec=$2 limit=$3 mbps=() logmbps=() run dir=$WORK/tp-run
	local sealed
	sealed=$(awk '{ s += $2 } END { print s }' "$tmpl.stat")
	for run in $(seq "$RUNS"); do
		copy "$tmpl" "$dir" real
		local l
		l=$(pressure)
		# The backoff only matters if the first pass finds nothing.
		start_broker "$dir" --log-cleaner-threads 1 --log-cleaner-backoff 1s \
			--log-cleaner-io-max-bytes-per-second "$limit"
		local deadline=$((SECONDS + 600)) c
		while :; do
			c=$(table_compaction)
			if [ "$(jq '[.[] | select(. != null and .cleanings >= 1 and (.cleaning | not) and .dirty_bytes == 0)] | length' <<<"$c")" = 1 ]; then
				break
			fi
			if ((SECONDS > deadline)); then
				echo "bench-compaction.sh: the table was not cleaned within 600 s: $c" >&2
				exit 1
			fi
			sleep 0.2
		done
		local s r m rd wr t p
		s=$(curl -fs "$STATS" | jq -c '.cleaner')
		stop_broker
		check_template "$tmpl"
		r=$(jq -r '[(.bytes_read + .bytes_written) / .time_seconds / 1e6, .bytes_read / 1e6, .bytes_written / 1e6, .time_seconds, .passes] | map(tostring) | join(" ")' <<<"$s")
		read -r m rd wr t p <<<"$r"
		log "throughput $codec, limit $limit, run $run: $(printf '%.0f' "$m") MB/s (read $(printf '%.0f' "$rd") MB, wrote $(printf '%.0f' "$wr") MB in $(printf '%.2f' "$t") s, $p pass(es); $(printf '%.0f' "$((sealed / 1000000))") MB of sealed log), $l"
		mbps+=("$m")
		logmbps+=("$(awk -v b="$sealed" -v t="$t" 'BEGIN { print b / t / 1e6 }')")
	done
	local name="$codec, unlimited"
	[ "$limit" = 0 ] || name="$codec, --log-cleaner-io-max-bytes-per-second $limit"
	summary "cleaner throughput, $name: MB/s read+written (/stats)" "${mbps[@]}"
	summary "cleaner throughput, $name: MB/s of sealed log cleaned" "${logmbps[@]}"
}

# busy_poller FILE: appends, every 250 ms until killed, whether a cleaning
# of the table is under way (true/false), from /stats; pinned with the load
# generator. It runs in both variants, so both brokers answer the same
# /stats requests.
busy_poller() {
	while :; do
		curl -fs "$STATS" 2>/dev/null |
			jq -r '[.topics[]? | select(.name == "table") | .partitions[].compaction.cleaning // false] | any' \
				>>"$1" 2>/dev/null || true
		sleep 0.25
	done
}

# latency_run NAME DIR FLAGS...: the README's latency command on a broker
# started on DIR with FLAGS; prints "p50 p99" in ms.
latency_run() {
	local name=$1 dir=$2
	shift 2
	start_broker "$dir" "$@"
	if [ "$name" = with ]; then
		local deadline=$((SECONDS + 120))
		until [ "$(table_compaction | jq '[.[] | select(. != null and .cleaning)] | length')" -ge 1 ]; do
			if ((SECONDS > deadline)); then
				echo "bench-compaction.sh: no cleaning started within 120 s" >&2
				exit 1
			fi
			sleep 0.1
		done
	fi
	: >"$dir.busy"
	taskset -c "$LOAD_CPU" bash -c "$(declare -f busy_poller); STATS=$STATS busy_poller $dir.busy" &
	local poller=$!
	local res
	res=$(bench --topic lat --create --partitions 4 --records 50000 --size 1024 --acks all --rate 5000 \
		--linger 0s --output json)
	kill "$poller" 2>/dev/null || true
	wait "$poller" 2>/dev/null || true
	stop_broker
	local busy=""
	if [ "$name" = with ]; then
		# The share of the run's samples that saw a cleaning under way.
		busy=$(awk '{ n++; if ($1 == "true") b++ } END { if (n) printf "cleaner busy in %d%% of %d samples", 100 * b / n, n }' "$dir.busy")
	fi
	log "latency $name: $(jq -c '.latency_ms | {p50, p99, p999, max}' <<<"$res") records/s $(jq '.records_per_sec | floor' <<<"$res") $busy"
	jq -r '"\(.latency_ms.p50) \(.latency_ms.p99)"' <<<"$res"
}

latency() {
	local tmpl=$WORK/lat-tmpl
	fill "$tmpl" "$DIRTY_PARTITIONS" "$DIRTY_RECORDS" "$DIRTY_CODEC"
	local run dir=$WORK/lat-run r limit
	local -A p50 p99
	for run in $(seq "$RUNS"); do
		log "latency round $run, $(pressure)"
		copy "$tmpl" "$dir"
		r=$(latency_run without "$dir" --log-cleaner-threads 0)
		p50[without]+="${r% *} " p99[without]+="${r#* } "
		check_template "$tmpl"
		for limit in $CLEANER_LIMITS; do
			copy "$tmpl" "$dir" real
			r=$(latency_run with "$dir" --log-cleaner-threads 1 --log-cleaner-backoff 1s \
				--log-cleaner-io-max-bytes-per-second "$limit")
			p50[$limit]+="${r% *} " p99[$limit]+="${r#* } "
		done
	done
	local name
	for limit in without $CLEANER_LIMITS; do
		case $limit in
		without) name="without the cleaner" ;;
		0) name="with the cleaner at work, unlimited" ;;
		*) name="with the cleaner at work, --log-cleaner-io-max-bytes-per-second $limit" ;;
		esac
		# shellcheck disable=SC2086 # the values are numbers
		summary "produce p50 ms at 5,000 records/s, $name" ${p50[$limit]}
		# shellcheck disable=SC2086
		summary "produce p99 ms at 5,000 records/s, $name" ${p99[$limit]}
	done
}

log "bench-compaction: $WHAT, $RUNS runs, work dir $WORK, broker on CPU $BROKER_CPU, load generator on CPU $LOAD_CPU, $(pressure)"
case "$WHAT" in
throughput) throughput ;;
latency) latency ;;
all)
	throughput
	latency
	;;
esac
