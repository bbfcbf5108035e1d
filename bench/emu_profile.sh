#!/usr/bin/env bash
# Where the machine's time goes while the emulator shapes a fast link (issue 24, D3: "the
# ceiling stated with a profile showing where the time goes").
#
# One `lab up --offload --rate RATE` FIFO lab (5 ms each way, as bench/emu_forwarding.sh's part
# 2), 4 per-socket cubic iperf3 flows through it, and during SECONDS of the flows:
#   - the machine's CPU time from /proc/stat (busy share of all CPUs: a ceiling shows as ~100 %),
#   - the emulator's wire rate and CPU from two `lab status --json` samples,
#   - a system-wide `perf record -a -g` split by command (emulator threads, the iperf3 sender and
#     receiver, softirq and kernel threads), and the emulator's top symbols.
#
# Needs root, iperf3, perf and python3. Traffic stays inside the lab's namespaces
# (10.77.0.0/24); the lab and every process started here are ended on exit.
# Usage: [NO_BUILD=1] [RATE=2500] bench/emu_profile.sh [SECONDS]
set -euo pipefail

SECS=${1:-4}
RATE=${RATE:-2500}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -q -p bloatlab --bin bloatlab --manifest-path "$ROOT/Cargo.toml"
fi
BL=$CARGO_TARGET_DIR/release/bloatlab
LAB=prof$$
LAB=${LAB:0:16}
OUT=$(mktemp -d /tmp/bl-emu-profile.XXXXXX)
BGPIDS=()
cleanup() {
    for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    "$BL" lab down "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "# emu_profile.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ${RATE} Mbit/s, --offload, FIFO of max(1000, rate) packets, 5 ms each way, 4 cubic flows, ${SECS} s window after 2 s"
LIMIT=$((RATE > 1000 ? RATE : 1000))
"$BL" lab up "$LAB" --offload --rate "${RATE}mbit" --delay 5ms --qdisc fifo --limit "${LIMIT}p" >/dev/null
EPID=$("$BL" lab status "$LAB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
ip netns exec "bl-$LAB-server" iperf3 -s -1 >/dev/null 2>&1 &
BGPIDS+=($!)
sleep 1
ip netns exec "bl-$LAB-client" iperf3 -c 10.77.0.2 -C cubic -P 4 -t $((SECS + 4)) >/dev/null &
IP=$!
BGPIDS+=($IP)
sleep 2

sample() { # -> one JSON line: the up direction's wire bytes and the thread's clock
    "$BL" lab status "$LAB" --json | python3 -c '
import json, sys
st = json.load(sys.stdin)
up = [d[1] for d in st["counters"]["directions"] if d[0] == "up"][0]
print(json.dumps({"tx": up["io"]["tx_bytes"], "at": up["at_s"]}))'
}
cpu_ticks() { awk '/^cpu /{busy=$2+$3+$4+$7+$8+$9; print busy, busy+$5+$6}' /proc/stat; }
E0=$(sample)
read -r B0 T0 < <(cpu_ticks)
P0=$(awk '{print $14+$15}' "/proc/$EPID/stat")
perf record -q -a -g -F 499 -o "$OUT/perf.data" -- sleep "$SECS" 2>/dev/null
read -r B1 T1 < <(cpu_ticks)
P1=$(awk '{print $14+$15}' "/proc/$EPID/stat")
E1=$(sample)
wait "$IP" || true

python3 - "$E0" "$E1" "$B0" "$T0" "$B1" "$T1" "$P0" "$P1" "$SECS" "$RATE" "$(nproc)" "$(getconf CLK_TCK)" <<'EOF'
import json, sys
e0, e1 = json.loads(sys.argv[1]), json.loads(sys.argv[2])
b0, t0, b1, t1, p0, p1 = map(float, sys.argv[3:9])
secs, rate, ncpu, hz = float(sys.argv[9]), float(sys.argv[10]), int(sys.argv[11]), float(sys.argv[12])
busy = 100 * (b1 - b0) / (t1 - t0)
emu_cpu = 100 * (p1 - p0) / hz / secs
line = f"machine busy {busy:.1f} % of {ncpu} CPUs; emulator process {emu_cpu:.0f} % of a core"
if e0.get("tx") is not None and e1.get("tx") is not None and e1["at"] > e0["at"]:
    wire = (e1["tx"] - e0["tx"]) * 8 / (e1["at"] - e0["at"]) / 1e6
    line += f"; up wire {wire:.1f} Mbit/s ({wire / rate:.4f} of {rate:g})"
print(line)
EOF
echo
echo "## Samples by command (all CPUs; the emulator's threads are emu-up, emu-down, bloatlab)"
perf report -i "$OUT/perf.data" --no-children -g none --sort comm --stdio 2>/dev/null |
    grep -v '^#' | grep -v '^$' | grep '%' | head -12
echo
echo "## The emulator process by object (share of its own samples: kernel = TUN copies, syscalls and the hosts' stacks run in its writes)"
perf report -i "$OUT/perf.data" --no-children -g none --percentage relative --pid "$EPID" --sort dso --stdio 2>/dev/null |
    grep -v '^#' | grep '%' | head -6
echo
echo "## The emulator process's top symbols (share of its own samples)"
perf report -i "$OUT/perf.data" --no-children -g none --percentage relative --pid "$EPID" --sort dso,sym --stdio 2>/dev/null |
    grep -v '^#' | grep -v '^$' | grep '%' | grep -v '^ *|' | grep -v -- '---' | head -25
rm -rf "$OUT"
