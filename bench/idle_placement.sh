#!/usr/bin/env bash
# Idle median vs CPU placement (issue 18, D10; docs/lab.md "Where the endpoints run"):
# a 20 Mbit/s, 2 x 40 ms FIFO lab (lab_physics's; floor 80.086 ms), a bloatlab server in host
# `server` (pinned with SCPU=N), and 2-s `bloatlab ping -i 10ms` windows from host `client`
# pinned to each CPU in CPUS ("any": not pinned), ROUNDS times. Each line has the window's
# median and the CPUs the emulator's threads were on (`ps -L`: main, emu-up, emu-down,
# emu-path-track).
#
# Needs root and taskset. Traffic stays inside the lab's namespaces; the lab is taken down.
# Usage: [BL=path/to/bloatlab] [SCPU=0] [CPUS="0 1 any"] [ROUNDS=3] bench/idle_placement.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BL=${BL:-$ROOT/target/release/bloatlab}
L=idleplace
$BL lab down $L >/dev/null 2>&1
$BL lab up $L --rate 20mbit --delay 40ms --qdisc fifo >/dev/null || exit 1
SP=
cleanup() { [ -n "$SP" ] && kill "$SP" 2>/dev/null; $BL lab down $L >/dev/null 2>&1; }
trap cleanup EXIT
$BL lab exec $L server -- ${SCPU:+taskset -c $SCPU} "$BL" server -p 5001 >/dev/null 2>&1 &
SP=$!
sleep 2
EPID=$($BL lab status $L --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
echo "emulator threads (tid cpu class name): $(ps -L -o tid=,psr=,cls=,comm= -p "$EPID" | tr '\n' ';')"
median() {
    python3 -c '
import json, sys
v = json.load(sys.stdin)
s = sorted(x["delay_ns"] / 1e6 for l in v["raw"]["latency"] if l["kind"] == "rtt"
           for x in l["samples"] if x.get("delay_ns") is not None)
print("%.3f n=%d" % (s[len(s) // 2], len(s)))'
}
for round in $(seq 1 "${ROUNDS:-3}"); do
    for cpu in ${CPUS:-0 1 any}; do
        if [ "$cpu" = any ]; then pre=""; else pre="taskset -c $cpu"; fi
        m=$($BL lab exec $L client -- $pre "$BL" ping 10.77.0.2 -p 5001 -i 10ms -t 2 --json | median)
        echo "round $round client_cpu $cpu server_cpu ${SCPU:-any} median $m" \
            "emu_cpus $(ps -L -o psr= -p "$EPID" | tr '\n' ' ')load $(cut -d' ' -f1 /proc/loadavg)"
    done
done
