#!/usr/bin/env bash
# What arrived, side by side (issue 18, deliverable 8): the same 8-flow upload through one
# lab, measured by `bloatlab test tcp_nup`, flent's tcp_nup (netperf), iperf3 -P 8 and
# crusader --upload, one after the other, each beside what the emulator delivered in the up
# direction while it ran (IP bytes counted by the emulator, `lab status --json`, sampled
# every 0.5 s) and the link's TCP payload capacity (MSS 1448 with timestamps of every 1500
# IP bytes: 19.31 Mbit/s at 20 Mbit/s). No tool's figure can honestly exceed that capacity.
#
# The peers are built outside the repo (never vendored): netperf from source with
# `--enable-demo` (flent reads its interim lines), crusader with cargo, both under
# $PEERS (default /opt/bloatlab-peers: bin/netperf, bin/netserver, and crusader at
# $CRUSADER, default $PEERS/target-crusader/release/crusader). A missing peer's row says so.
# crusader's workspace builds offline from crates.io once its GUI members and their git-sourced
# [patch] are left out of its Cargo.toml: CARGO_TARGET_DIR=$PEERS/target-crusader cargo build
# --release -p crusader. netperf: ./autogen.sh && ./configure --enable-demo --prefix=$PEERS.
#
# Needs root, jq, python3, flent, iperf3. Traffic stays inside the lab's namespaces.
# Usage: [NO_BUILD=1] [RATE=20mbit] [DELAY=10ms] [SECS=10] bench/upload_peers.sh  (markdown)
set -euo pipefail

RATE=${RATE:-20mbit}
DELAY=${DELAY:-10ms}
SECS=${SECS:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -q -p bloatlab --bin bloatlab --manifest-path "$ROOT/Cargo.toml"
fi
BL=${BL:-$CARGO_TARGET_DIR/release/bloatlab}
PEERS=${PEERS:-/opt/bloatlab-peers}
CRUSADER=${CRUSADER:-$PEERS/target-crusader/release/crusader}
LAB=bup$$
LAB=${LAB:0:16}
TMP=$(mktemp -d /tmp/bl-upload-peers.XXXXXX)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    "$BL" lab down "$LAB" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

echo "# upload_peers.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, lab $RATE $DELAY each way FIFO, $SECS s, 8 flows up"
echo
"$BL" lab up "$LAB" --rate "$RATE" --delay "$DELAY" >/dev/null
SRV=10.77.0.2
# `lab exec` execs, so each $! is the server's own PID.
"$BL" lab exec "$LAB" server -- "$BL" server >"$TMP/bl-server.log" 2>&1 &
PIDS+=($!)
"$BL" lab exec "$LAB" server -- iperf3 -s -p 5201 >"$TMP/iperf3-server.log" 2>&1 &
PIDS+=($!)
if [ -x "$PEERS/bin/netserver" ]; then
    "$BL" lab exec "$LAB" server -- "$PEERS/bin/netserver" -D -p 12865 >"$TMP/netserver.log" 2>&1 &
    PIDS+=($!)
fi
if [ -x "$CRUSADER" ]; then
    "$BL" lab exec "$LAB" server -- "$CRUSADER" serve >"$TMP/crusader-server.log" 2>&1 &
    PIDS+=($!)
fi
sleep 2

# The emulator's up direction, every 0.5 s: "at_s dequeued_bytes".
"$BL" lab status "$LAB" --json >"$TMP/status.json"
sampler() {
    while true; do
        "$BL" lab status "$LAB" --json 2>/dev/null |
            jq -r '.counters.directions[] | select(.[0] == "up") | "\(.[1].at_s) \(.[1].link.dequeued.bytes)"' || true
        sleep 0.5
    done
}
sampler >"$TMP/up.samples" &
PIDS+=($!)

# The emulator's delivered up rate between wall-clock marks: "mean_over_run loaded_median"
# (IP Mbit/s): the mean from the first to the last sample of the run, and the median of
# the 0.5 s rates while the link carried more than half its rate (the saturated part).
emu_rate() { # from_line to_line
    sed -n "$1,$2p" "$TMP/up.samples" | python3 -c '
import sys, statistics
s = sorted({float(a): int(b) for a, b in (l.split() for l in sys.stdin if len(l.split()) == 2)}.items())
r = [(b2 - b1) * 8 / (t2 - t1) / 1e6 for (t1, b1), (t2, b2) in zip(s, s[1:]) if t2 > t1]
mean = (s[-1][1] - s[0][1]) * 8 / (s[-1][0] - s[0][0]) / 1e6 if len(s) > 1 else float("nan")
cap = max(r) if r else 0
busy = [x for x in r if x > cap / 2]
print("%.3f %.3f" % (mean, statistics.median(busy) if busy else float("nan")))'
}

row() { # tool figure counted_by from_line
    local to
    to=$(wc -l <"$TMP/up.samples")
    read -r mean busy < <(emu_rate "$4" "$to")
    printf "| %s | %s | %s | %s | %s | %s |\n" "$1" "$2" "$3" "$busy" "$mean" "$(cut -d' ' -f1-3 /proc/loadavg)"
}

mark() { sleep 1; wc -l <"$TMP/up.samples"; }

echo "| tool | upload Mbit/s | counted by | emulator delivered, loaded (IP Mbit/s) | emulator, mark to end incl. setup and idle (IP Mbit/s) | load average |"
echo "|---|---|---|---|---|---|"

from=$(mark)
# (in $TMP: the test writes its results file to the current directory)
up=$(cd "$TMP" && "$BL" lab exec "$LAB" client -- "$BL" test tcp_nup $SRV --flows 8 -l "$SECS" --idle 2 2>&1 |
    tee "$TMP/bl.txt" | awk '$1 == "up" && $2 ~ /^[0-9.]+$/ {print $2; exit}')
row "bloatlab test tcp_nup --flows 8 -l $SECS" "${up:-?}" "receiver (tcpi_bytes_acked)" "$from"

from=$(mark)
if [ -x "$PEERS/bin/netperf" ]; then
    (cd "$TMP" && "$BL" lab exec "$LAB" client -- env PATH="$PEERS/bin:$PATH" \
        flent tcp_nup -H $SRV -l "$SECS" --test-parameter upload_streams=8 -D "$TMP" \
        -t peers -f summary >"$TMP/flent.txt" 2>&1) || true
    up=$(awk '/TCP upload sum/ {print $5; exit}' "$TMP/flent.txt")
    row "flent tcp_nup (netperf 8x TCP_STREAM, demo mode)" "${up:-?}" "sender (netperf's interim writes)" "$from"
else
    row "flent tcp_nup" "not run: no $PEERS/bin/netperf" "-" "$from"
fi

from=$(mark)
"$BL" lab exec "$LAB" client -- iperf3 -c $SRV -p 5201 -P 8 -t "$SECS" -J >"$TMP/iperf3.json" 2>/dev/null || true
read -r snd rcv < <(jq -r '"\(.end.sum_sent.bits_per_second / 1e6) \(.end.sum_received.bits_per_second / 1e6)"' "$TMP/iperf3.json")
row "iperf3 -c -P 8 -t $SECS (sender sum)" "$(printf %.2f "$snd")" "sender" "$from"
row "iperf3 -c -P 8 -t $SECS (receiver sum)" "$(printf %.2f "$rcv")" "receiver (the server's reads)" "$from"

from=$(mark)
if [ -x "$CRUSADER" ]; then
    (cd "$TMP" && "$BL" lab exec "$LAB" client -- "$CRUSADER" test $SRV --upload --streams 8 \
        --load-duration "$SECS" >"$TMP/crusader.txt" 2>&1) || true
    up=$(awk '/Throughput:/ {print $2; exit}' "$TMP/crusader.txt")
    row "crusader test --upload --streams 8 --load-duration $SECS" "${up:-?}" "receiver (the server's counts)" "$from"
else
    row "crusader" "not run: no $CRUSADER" "-" "$from"
fi

python3 -c "
r = float('$RATE'.replace('mbit', ''))
print()
print('link payload capacity: %.2f Mbit/s (%s of IP bytes x 1448/1500)' % (r * 1448 / 1500, '$RATE'))"
if [ -n "${KEEP:-}" ]; then cp -r "$TMP" "$KEEP"; fi
