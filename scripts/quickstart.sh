#!/usr/bin/env bash
# The main job (README): bufferbloat, reproduced and fixed on one machine.
#
# Builds bloatlab, brings up an emulated 20 Mbit/s link with 40 ms each way
# (80 ms RTT), and measures latency under load twice: through a deep FIFO
# (the bloated baseline) and through FQ-CoDel. Each run loads the link with
# one bulk TCP upload (`bloatlab client -e --trip-times`) while probing the
# RTT with `bloatlab ping`; the two runs are then printed side by side.
# Everything it creates is removed on every exit path (trap + `lab down`).
#
# Needs root (network namespaces). Takes about a minute after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "quickstart: needs root (it creates network namespaces)" >&2
    exit 3
fi

if [ -n "${BLOATLAB_BIN:-}" ]; then
    bl="$BLOATLAB_BIN"
else
    cargo build --release --quiet --bin bloatlab
    bl="$PWD/target/release/bloatlab"
fi
lab="bl-qs-$$"
server_ip=10.77.0.2
load_secs="${LOAD_SECS:-15}"
out="$(mktemp -d)"
server_pid=""

cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    "$bl" lab down "$lab" >/dev/null 2>&1 || true
    rm -rf "$out"
}
trap cleanup EXIT INT TERM

# run_case NAME QDISC-ARGS...: one lab, idle probe, loaded probe, teardown.
run_case() {
    local name=$1
    shift
    "$bl" lab up "$lab" --rate 20mbit --delay 40ms "$@" >/dev/null
    "$bl" lab exec "$lab" server -- "$bl" server >/dev/null 2>&1 &
    server_pid=$!
    sleep 1

    # Idle RTT first, then the same probe while a bulk upload fills the queue.
    "$bl" lab exec "$lab" client -- "$bl" ping "$server_ip" -c 200 --interval 10ms --json \
        >"$out/$name.idle.json"
    "$bl" lab exec "$lab" client -- "$bl" client "$server_ip" -Z cubic -e --trip-times -t "$load_secs" --json \
        >"$out/$name.load.json" &
    local load_pid=$!
    sleep 3 # let TCP leave slow start and build its standing queue
    "$bl" lab exec "$lab" client -- "$bl" ping "$server_ip" -t $((load_secs - 5)) --interval 10ms --json \
        >"$out/$name.loaded.json"
    wait "$load_pid"

    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
    "$bl" lab down "$lab" >/dev/null
}

echo "bloatlab quickstart: 20 Mbit/s, 40 ms each way, one bulk TCP (cubic) upload for ${load_secs} s"
echo "  1/2 deep FIFO (1000 packets)..."
run_case fifo --qdisc fifo --limit 1000p
echo "  2/2 FQ-CoDel..."
run_case fq_codel --qdisc fq_codel

python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]

def load(path):
    with open(path) as f:
        return json.load(f)

def rtt_ms(doc):
    # `bloatlab ping --json` is a bloatlab-results document (docs/probes.md).
    s = doc["metadata"]["extra"]["probe"]["summary"]["rtt"]
    return s["median_ns"] / 1e6, s["p90_ns"] / 1e6, s["p99_ns"] / 1e6

def goodput_mbit(doc):
    # `bloatlab client --json` (docs/metrics.md): the receiver's view when the
    # server is bloatlab, else the sender's.
    st = doc["streams"][0]
    side = st.get("server_side") or st
    return side["summary"]["bits_per_second"] / 1e6

rows = []
for name in ("fifo", "fq_codel"):
    idle = rtt_ms(load(os.path.join(out, f"{name}.idle.json")))
    loaded = rtt_ms(load(os.path.join(out, f"{name}.loaded.json")))
    rate = goodput_mbit(load(os.path.join(out, f"{name}.load.json")))
    rows.append((name, idle[0], loaded[0], loaded[1], loaded[2], loaded[0] - idle[0], rate))

print()
print(f"{'queue':<10} {'idle RTT':>9} {'loaded RTT p50':>15} {'p90':>8} {'p99':>8} {'induced':>9} {'upload':>12}")
for name, idle, p50, p90, p99, induced, rate in rows:
    print(f"{name:<10} {idle:>6.1f} ms {p50:>12.1f} ms {p90:>5.1f} ms {p99:>5.1f} ms {induced:>6.1f} ms {rate:>6.1f} Mbit/s")
PY
