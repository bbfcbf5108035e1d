#!/usr/bin/env bash
# Side-by-side loopback benchmark of the traffic engine (issue 2, deliverable 7).
#
#   bench/engine_loopback.sh                 # 3 runs x 5 s per case, ~4.5 min
#   ONLY="bloatlab-tcp iperf2-tcp" bench/engine_loopback.sh   # some cases only
#   RUNS=5 DURATION=10 bench/engine_loopback.sh
#
# Cases, run in alternation (run 1 of every case, then run 2, ...):
#   tcp       single TCP stream: bloatlab, iperf 2 (`iperf`), iperf 3 (`iperf3`)
#   tcp-tt    bloatlab with `-e --trip-times` (server `-e`)
#   tcp-rxcopy  bloatlab with `--rx-copy` on both ends (every byte copied, as before issue 24)
#   tcp-tt-rxcopy  `-e --trip-times --rx-copy`: trip-times with the copying receiver
#   tcp-zc    bloatlab with `--zerocopy` on the client (sendfile from a memfd)
#   tcp-P4    four TCP streams: bloatlab, iperf 2, iperf 3
#   udp64     UDP, 64-byte datagrams, offered far above what loopback carries
#             (`-b 10g`): bloatlab and iperf 2
#   udp1470   the same with 1470-byte datagrams
# After the table it prints the ratios issue 24 asks for: client+server CPU
# seconds per GB of bloatlab against iperf 2 and iperf 3 (below 1 = bloatlab
# cheaper), and `-e --trip-times` against plain (throughput and CPU per GB),
# with the load average before and after (a busy machine inflates throughput
# noise far more than CPU per GB). For bloatlab TCP it also prints the
# client+server CPU per GB bloatlab reports itself (client --json: `cpu` plus
# the server's `peer_cpu` from its report frame; bloatlab-to-bloatlab only),
# beside the script's external measure.
# Recorded per run: receiver-side throughput (Gbit/s, from the server's own
# report: bloatlab --json, iperf 2 CSV; iperf 3's sum_received), received
# packets per second for UDP, and CPU seconds (user+sys) of the client (bash
# `time`) and of the server (/proc/PID/stat utime+stime, read after the test).
# Prints a markdown table of medians. Needs: cargo, iperf (2.1.8), iperf3, jq.
# Not a test: nothing here asserts performance.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
DURATION="${DURATION:-5}"
PORT="${PORT:-$((20000 + RANDOM % 20000))}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
WORK="$(mktemp -d /tmp/bl-bench-XXXXXX)"
CLK_TCK="$(getconf CLK_TCK)"

for tool in iperf iperf3 jq; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing" >&2; exit 1; }
done

echo "bench: building bloatlab (release) ..." >&2
cargo build --release -p bloatlab --quiet
BL="$TARGET_DIR/release/bloatlab"

SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# CPU seconds (user + sys) of a live process, all threads.
proc_cpu() {
    awk -v tck="$CLK_TCK" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / tck }' "/proc/$1/stat"
}

wait_listen() { # $1 = tcp|udp, $2 = port
    local hex i
    hex="$(printf ':%04X' "$2")"
    for i in $(seq 1 250); do
        if cat "/proc/net/$1" "/proc/net/${1}6" 2>/dev/null | awk -v h="$hex" -v p="$1" \
            'NR > 1 && $2 ~ h"$" && (p == "udp" || $4 == "0A") { f = 1 } END { exit !f }'; then
            return 0
        fi
        sleep 0.02
    done
    echo "bench: server did not bind port $2" >&2
    return 1
}

start_server() { # $1 = proto, rest = command
    local proto="$1"; shift
    "$@" >"$WORK/server.out" 2>"$WORK/server.err" &
    SERVER_PID=$!
    wait_listen "$proto" "$PORT"
}

stop_server() { # prints the server's CPU seconds
    sleep 1 # let the server finish its final report
    proc_cpu "$SERVER_PID"
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

# Runs the client, prints its CPU seconds; output in $WORK/client.out.
run_client() {
    local t
    t="$( { TIMEFORMAT='%3U %3S'; time "$@" >"$WORK/client.out" 2>"$WORK/client.err"; } 2>&1 )" \
        || { echo "bench: client failed: $*" >&2; cat "$WORK/client.err" >&2; return 1; }
    awk '{ printf "%.2f", $1 + $2 }' <<<"$t"
}

# One run of one case; appends "case gbps pps client_cpu server_cpu bytes" to results.
run_case() {
    local case="$1" ccpu scpu gbps bytes pps="-"
    PORT=$((PORT + 1))
    case "$case" in
    bloatlab-tcp | bloatlab-tcp-tt | bloatlab-tcp-rxcopy | bloatlab-tcp-tt-rxcopy | bloatlab-tcp-zc | bloatlab-tcp-P4)
        local extra=() sextra=()
        case "$case" in
        bloatlab-tcp-tt) extra=(-e --trip-times); sextra=(-e) ;;
        bloatlab-tcp-rxcopy) extra=(--rx-copy); sextra=(--rx-copy) ;;
        bloatlab-tcp-tt-rxcopy) extra=(-e --trip-times --rx-copy); sextra=(-e --rx-copy) ;;
        bloatlab-tcp-zc) extra=(--zerocopy) ;;
        bloatlab-tcp-P4) extra=(-P 4) ;;
        esac
        start_server tcp "$BL" server -p "$PORT" --json "${sextra[@]}"
        ccpu="$(run_client "$BL" client 127.0.0.1 -p "$PORT" -t "$DURATION" --json "${extra[@]}")"
        scpu="$(stop_server)"
        # bloatlab's own client+server CPU per GB (issue 24: the server's CPU
        # reaches the client in its report frame).
        jq -r --arg c "$case" 'select(.peer_cpu != null) |
            "\($c) \((.cpu.user_s + .cpu.system_s + .peer_cpu.user_s + .peer_cpu.system_s) / (.cpu.bytes / 1e9))"' \
            "$WORK/client.out" >>"$WORK/selfreport" || true
        # The server's JSON (METRICS' Document): the receiving streams' summaries.
        local r='[.[0].streams[] | select(.direction == "receive") | .summary]'
        bytes="$(jq -s "$r | map(.bytes) | add" "$WORK/server.out")"
        gbps="$(jq -s "$r | map(.bits_per_second) | add / 1e9" "$WORK/server.out")"
        ;;
    iperf2-tcp | iperf2-tcp-P4)
        local extra=()
        if [ "$case" = iperf2-tcp-P4 ]; then extra=(-P 4); fi
        start_server tcp stdbuf -oL iperf -s -p "$PORT" -y C
        ccpu="$(run_client iperf -c 127.0.0.1 -p "$PORT" -t "$DURATION" "${extra[@]}")"
        scpu="$(stop_server)"
        # CSV: ...,id(6),interval,bytes,bits_per_second: one row per stream
        # (added up for -P; a [SUM] row, id -1, is left out so nothing counts twice).
        local agg='NF >= 9 && $6 != "-1" { b += $8; g += $9 } END { printf "%.0f %.4f\n", b, g / 1e9 }'
        read -r bytes gbps < <(awk -F, "$agg" "$WORK/server.out")
        if [ -n "${DEBUG_CSV:-}" ]; then cat "$WORK/server.out" >&2; fi
        ;;
    iperf3-tcp | iperf3-tcp-P4)
        local extra=()
        if [ "$case" = iperf3-tcp-P4 ]; then extra=(-P 4); fi
        start_server tcp iperf3 -s -p "$PORT"
        ccpu="$(run_client iperf3 -c 127.0.0.1 -p "$PORT" -t "$DURATION" -J "${extra[@]}")"
        scpu="$(stop_server)"
        bytes="$(jq '.end.sum_received.bytes' "$WORK/client.out")"
        gbps="$(jq '.end.sum_received.bits_per_second / 1e9' "$WORK/client.out")"
        ;;
    bloatlab-udp64 | bloatlab-udp1470)
        local sz="${case#bloatlab-udp}"
        start_server udp "$BL" server -u -p "$PORT" --json
        ccpu="$(run_client "$BL" client 127.0.0.1 -p "$PORT" -u -l "$sz" -b 10g -t "$DURATION")"
        scpu="$(stop_server)"
        local r='.[0].streams[0].summary'
        bytes="$(jq -s "$r.bytes" "$WORK/server.out")"
        gbps="$(jq -s "$r.bits_per_second / 1e9" "$WORK/server.out")"
        pps="$(jq -s "$r.udp_recv.datagrams_received / ($r.end_s - $r.start_s) | floor" "$WORK/server.out")"
        ;;
    iperf2-udp64 | iperf2-udp1470)
        local sz="${case#iperf2-udp}"
        start_server udp stdbuf -oL iperf -s -u -p "$PORT" -y C
        ccpu="$(run_client iperf -c 127.0.0.1 -p "$PORT" -u -l "$sz" -b 10g -t "$DURATION")"
        scpu="$(stop_server)"
        # CSV: ...,interval(7),bytes,bps,jitter,lost(11),total(12),pct,ooo
        local l
        l="$(grep -v '^$' "$WORK/server.out" | tail -n 1)"
        bytes="$(awk -F, '{ print $8 }' <<<"$l")"
        gbps="$(awk -F, '{ print $9 / 1e9 }' <<<"$l")"
        pps="$(awk -F, '{ split($7, iv, "-"); printf "%d", ($12 - $11) / (iv[2] - iv[1]) }' <<<"$l")"
        ;;
    esac
    echo "$case $gbps $pps $ccpu $scpu $bytes" >>"$WORK/results"
    printf 'bench: %-16s run: %.2f Gbit/s pps=%s client %ss server %ss\n' "$case" "$gbps" "$pps" "$ccpu" "$scpu" >&2
}

CASES=(bloatlab-tcp iperf2-tcp iperf3-tcp bloatlab-tcp-tt bloatlab-tcp-rxcopy bloatlab-tcp-tt-rxcopy
    bloatlab-tcp-zc
    bloatlab-tcp-P4 iperf2-tcp-P4 iperf3-tcp-P4 bloatlab-udp64 iperf2-udp64 bloatlab-udp1470
    iperf2-udp1470)
if [ -n "${ONLY:-}" ]; then read -r -a CASES <<<"$ONLY"; fi
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
: >"$WORK/results"
: >"$WORK/selfreport"
for run in $(seq 1 "$RUNS"); do
    echo "bench: run $run/$RUNS" >&2
    for c in "${CASES[@]}"; do run_case "$c"; done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "Loopback, ${DURATION} s per run, median of ${RUNS} alternated runs; $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), kernel $(uname -r), $(date -u +%Y-%m-%d)."
echo
echo "| case | receiver Gbit/s | received pps | client CPU s | server CPU s | CPU s per GB |"
echo "|---|---:|---:|---:|---:|---:|"
for c in "${CASES[@]}"; do
    col() { awk -v c="$c" -v k="$1" '$1 == c { print $k }' "$WORK/results"; }
    g="$(col 2 | median)"
    p="$(if [ "$(col 3 | head -n 1)" = "-" ]; then echo "-"; else col 3 | median; fi)"
    cc="$(col 4 | median)"
    sc="$(col 5 | median)"
    # CPU per GB: median over runs of (client+server CPU) / (bytes / 1e9).
    per="$(awk -v c="$c" '$1 == c && $6 > 0 { print ($4 + $5) / ($6 / 1e9) }' "$WORK/results" | median)"
    printf '| %s | %.2f | %s | %.2f | %.2f | %.3f |\n' "$c" "$g" "$p" "$cc" "$sc" "$per"
done

LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
# Medians per case, for the ratios.
med() { # $1 = case, $2 = column (2 = Gbit/s, 7 = CPU s per GB)
    if [ "$2" = 7 ]; then
        awk -v c="$1" '$1 == c && $6 > 0 { print ($4 + $5) / ($6 / 1e9) }' "$WORK/results" | median
    else
        awk -v c="$1" -v k="$2" '$1 == c { print $k }' "$WORK/results" | median
    fi
}
ratio() { # $1 / $2 of medians of column $3, or "-" when a case is missing
    local a b
    a="$(med "$1" "$3")"; b="$(med "$2" "$3")"
    if [ -z "$a" ] || [ -z "$b" ]; then echo "-"; else awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; fi
}
echo
echo "Load average (1/5/15 min) before: $LOAD_BEFORE, after: $LOAD_AFTER."
echo
echo "| ratio (medians) | value |"
echo "|---|---:|"
echo "| CPU/GB bloatlab / iperf 2, TCP | $(ratio bloatlab-tcp iperf2-tcp 7) |"
echo "| CPU/GB bloatlab / iperf 3, TCP | $(ratio bloatlab-tcp iperf3-tcp 7) |"
echo "| CPU/GB bloatlab --zerocopy / iperf 2, TCP | $(ratio bloatlab-tcp-zc iperf2-tcp 7) |"
echo "| CPU/GB bloatlab --zerocopy / iperf 3, TCP | $(ratio bloatlab-tcp-zc iperf3-tcp 7) |"
echo "| CPU/GB bloatlab / iperf 2, TCP -P 4 | $(ratio bloatlab-tcp-P4 iperf2-tcp-P4 7) |"
echo "| CPU/GB bloatlab / iperf 3, TCP -P 4 | $(ratio bloatlab-tcp-P4 iperf3-tcp-P4 7) |"
echo "| CPU/GB bloatlab / iperf 2, UDP 64 B | $(ratio bloatlab-udp64 iperf2-udp64 7) |"
echo "| CPU/GB bloatlab / iperf 2, UDP 1470 B | $(ratio bloatlab-udp1470 iperf2-udp1470 7) |"
echo "| CPU/GB bloatlab default / --rx-copy | $(ratio bloatlab-tcp bloatlab-tcp-rxcopy 7) |"
echo "| throughput -e --trip-times / plain | $(ratio bloatlab-tcp-tt bloatlab-tcp 2) |"
echo "| CPU/GB -e --trip-times / plain | $(ratio bloatlab-tcp-tt bloatlab-tcp 7) |"
echo "| throughput -e --trip-times / plain, both --rx-copy (the receive path before issue 24) | $(ratio bloatlab-tcp-tt-rxcopy bloatlab-tcp-rxcopy 2) |"
echo "| CPU/GB -e --trip-times / plain, both --rx-copy | $(ratio bloatlab-tcp-tt-rxcopy bloatlab-tcp-rxcopy 7) |"
self_med() { awk -v c="$1" '$1 == c { print $2 }' "$WORK/selfreport" | median; }
echo "| client+server CPU/GB bloatlab reports itself (client --json cpu + peer_cpu), TCP / the script's measure | $(awk -v a="$(self_med bloatlab-tcp)" -v b="$(med bloatlab-tcp 7)" 'BEGIN { if (a > 0 && b > 0) printf "%.3f (%.3f CPU-s/GB)", a / b, a; else print "-" }') |"
echo "| the same, TCP -P 4 | $(awk -v a="$(self_med bloatlab-tcp-P4)" -v b="$(med bloatlab-tcp-P4 7)" 'BEGIN { if (a > 0 && b > 0) printf "%.3f (%.3f CPU-s/GB)", a / b, a; else print "-" }') |"
