#!/usr/bin/env bash
# Idle delay accuracy of the lab (issue 13): irtt's RTT median and p99 and
# ping's median through an idle link, with and without the delay
# calibration (`lab up --no-calibrate`), over IPv4 and IPv6, against the
# configured RTT; and irtt's own round trip over loopback in a lab host (the
# tool's overhead, which no network removes). Beside each row, the
# emulator's own release lateness (p50/p99/max over both directions since
# the lab came up, from `lab status --json`); a row whose lateness p99
# exceeded 1 ms is flagged: its latency figures carry that much timing error.
#
# Needs root, irtt, ping, jq. Traffic stays inside lab namespaces.
# Usage: [BL=path/to/bloatlab] [DELAYS="1ms 20ms 250ms"] bench/idle_accuracy.sh [SECONDS]
#   (markdown on stdout; BL defaults to target/release/bloatlab, built if missing)
set -euo pipefail

SECS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BL=${BL:-$ROOT/target/release/bloatlab}
if [ ! -x "$BL" ]; then
    cargo build --release -q -p bloatlab --bin bloatlab --manifest-path "$ROOT/Cargo.toml"
fi
DELAYS=${DELAYS:-"1ms 20ms 250ms"}
LAB=idle$$
LAB=${LAB:0:16}
cleanup() { "$BL" lab down "$LAB" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "# idle_accuracy.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# irtt's JSON: round_trips[].delay.rtt in ns -> "median p99" in ms.
irtt_stats() {
    jq -r '[.round_trips[] | .delay.rtt // empty] | sort | . as $v | length as $n
        | "\($v[($n / 2 | floor)] / 1e6) \($v[(($n * 99 / 100) | ceil) - 1] / 1e6)"'
}
ping_median() { # family target count
    "$BL" lab exec "$LAB" client -- sh -c "for i in \$(seq $3); do ping -$1 -n -c 1 -W 3 $2 | tail -1; sleep 0.01; done" |
        awk -F' = ' '/rtt/ {split($2, a, "/"); print a[2]}' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'
}

# The worst direction's release lateness "p50 p99 max" (us) of the lab.
lateness() {
    "$BL" lab status "$LAB" --json | jq -r '[.counters.directions[][1].lateness]
        | "\(map(.p50_us) | max) \(map(.p99_us) | max) \(map(.max_us) | max)"'
}

echo "| --delay (RTT) | calibration | family | irtt median ms | irtt p99 ms | ping median ms | irtt loopback median ms | emulator lateness p50/p99/max us |"
echo "|---|---|---|---|---|---|---|---|"
for d in $DELAYS; do
    for cal in on off; do
        opts=(--delay "$d")
        [ "$cal" = off ] && opts+=(--no-calibrate)
        "$BL" lab up "$LAB" "${opts[@]}" >/dev/null
        "$BL" lab exec "$LAB" server -- irtt server -b :2112 >/dev/null 2>&1 &
        srv=$!
        "$BL" lab exec "$LAB" client -- irtt server -b 127.0.0.1:2113 >/dev/null 2>&1 &
        lo=$!
        sleep 1
        lo_med=$("$BL" lab exec "$LAB" client -- irtt client -i 10ms -d 1s -Q -o - 127.0.0.1:2113 | irtt_stats | cut -d' ' -f1)
        for fam in 4 6; do
            if [ $fam = 4 ]; then tgt=10.77.0.2; else tgt=fd00:77::2; fi
            read -r med p99 < <("$BL" lab exec "$LAB" client -- irtt client -$fam -i 10ms -d "${SECS}s" -Q -o - "[$tgt]:2112" 2>/dev/null | irtt_stats)
            n=$([ "${d%ms}" -ge 100 ] && echo 9 || echo 25)
            pm=$(ping_median $fam $tgt "$n")
            sleep 0.6 # the status file is refreshed twice a second
            read -r l50 l99 lmax < <(lateness)
            flag=$(awk -v p="$l99" 'BEGIN { if (p > 1000) print " **p99 > 1 ms: timing error in this row**" }')
            printf "| %s (%s ms) | %s | IPv%s | %.3f | %.3f | %s | %.3f | %.0f/%.0f/%.0f%s |\n" "$d" "$((2 * ${d%ms}))" "$cal" "$fam" "$med" "$p99" "$pm" "$lo_med" "$l50" "$l99" "$lmax" "$flag"
        done
        kill "$srv" "$lo" 2>/dev/null || true
        wait "$srv" "$lo" 2>/dev/null || true
        "$BL" lab down "$LAB" >/dev/null
    done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
