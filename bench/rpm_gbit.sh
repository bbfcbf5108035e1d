#!/usr/bin/env bash
# Benchmark: does `bloatlab rpm` saturate a 1 Gbit/s lab link? (issue 20)
#
# A lab at 1000 Mbit/s (--offload, 5 ms each way, fq_codel), `bloatlab server --https` in the
# server namespace, and in the client namespace, one after the other:
#   * `bloatlab rpm --download-only` and `--upload-only` (our client),
#   * Cloudflare's `mach rpm --config` (networkquality-rs, built by scripts/setup.sh into
#     /opt/bloatlab-peers) as the peer, when it is installed.
# Each capacity is shown beside the link's TCP payload capacity: 1000 Mbit/s of IP bytes
# carry at most 1448/1500 of it as payload (MSS 1448 with timestamps), 965.3 Mbit/s.
# Target: our client's download and upload >= 90 % of that.
#
# Needs root. Traffic stays inside the lab's namespaces (10.77.0.0/24).
# Usage: [NO_BUILD=1] [RUNS=2] bench/rpm_gbit.sh     (markdown on stdout)
set -euo pipefail

RUNS=${RUNS:-2}
echo "# rpm_gbit.sh: $(date -u +%Y-%m-%dT%H:%MZ), $(uname -r), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -q -p bloatlab --bin bloatlab --manifest-path "$ROOT/Cargo.toml"
fi
BL=$CARGO_TARGET_DIR/release/bloatlab
MACH=${MACH:-/opt/bloatlab-peers/bin/mach}
LAB=brpm$$
LAB=${LAB:0:16}
SRVPID=

cleanup() {
    if [ -n "$SRVPID" ]; then kill "$SRVPID" 2>/dev/null || true; fi
    "$BL" lab down "$LAB" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$BL" lab up "$LAB" --rate 1000mbit --delay 5ms --qdisc fq_codel --offload >/dev/null
# `lab exec` execs, so $! is the server's PID.
"$BL" lab exec "$LAB" server -- "$BL" server --no-iperf -B 10.77.0.2 --https 8443 \
    >/tmp/bl-bench-rpm-server.log 2>&1 &
SRVPID=$!
for _ in $(seq 50); do grep -q "https://" /tmp/bl-bench-rpm-server.log && break; sleep 0.1; done
URL=https://10.77.0.2:8443/.well-known/nq

ours() { # --download-only | --upload-only -> Mbit/s
    "$BL" lab exec "$LAB" client -- "$BL" rpm "$URL" --insecure --json "$1" 2>/dev/null |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
leg = d["download"] or d["upload"]
print("%.1f" % (leg["capacity_bps"] / 1e6))'
}

mach() { # -> "down_mbit up_mbit"
    "$BL" lab exec "$LAB" client -- timeout 120 "$MACH" rpm --config "$URL" --insecure \
        --disable-aim-scores 2>/dev/null |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%.1f %.1f" % (d["download"]["throughput"] / 1e6, d["upload"]["throughput"] / 1e6))'
}

PAYLOAD=965.3
pct() { python3 -c "print(f'{100 * $1 / $PAYLOAD:.1f}')"; }

echo "| run | client | download Mbit/s | % of 965.3 | upload Mbit/s | % of 965.3 |"
echo "| --- | --- | --- | --- | --- | --- |"
for r in $(seq "$RUNS"); do
    d=$(ours --download-only)
    u=$(ours --upload-only)
    echo "| $r | bloatlab rpm | $d | $(pct "$d") | $u | $(pct "$u") |"
    if [ -x "$MACH" ]; then
        read -r md mu < <(mach)
        echo "| $r | mach rpm | $md | $(pct "$md") | $mu | $(pct "$mu") |"
    fi
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
