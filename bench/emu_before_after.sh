#!/usr/bin/env bash
# Per-packet cost of the emulator core before and after a change (issue 23: "the emulator's
# cost per packet must not rise for fixed-rate links"). Builds `cargo bench -p bloatlab-emu`'s
# emu_per_packet (fixed-rate 1 Gbit/s links, every qdisc; crates/emu/benches/emu_per_packet.rs)
# at REV's crates/emu and at the working tree's, then alternates RUNS runs of each and prints
# every run's ns/packet and the medians as markdown.
#
# Usage: bench/emu_before_after.sh REV [RUNS]   (e.g. bench/emu_before_after.sh 19e4b85 5)
# Needs a clean crates/emu (it checks REV's crates/emu out for the "before" build and puts the
# working tree's back). No root, no network. Only meaningful on a quiet machine: the script
# prints the load average before and after.
set -euo pipefail
REV=${1:?usage: $0 REV [RUNS]}
RUNS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
if ! git diff --quiet HEAD -- crates/emu; then
    echo "crates/emu has uncommitted changes; commit them first" >&2
    exit 1
fi
OUT=$(mktemp -d)
trap 'git checkout -q HEAD -- crates/emu; rm -rf "$OUT"' EXIT
# shellcheck source=bench/emu_bench_build.sh
. "$ROOT/bench/emu_bench_build.sh"
emu_bench_builds "$REV" crates/emu "$OUT"
echo "# emu_before_after.sh: $(date -u +%Y-%m-%dT%H:%MZ), before = $REV, after = $(git rev-parse --short HEAD), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$RUNS"); do
    for b in before after; do
        "$OUT/$b" | awk -v b="$b" 'NR > 1 { n = NF; name = $1; for (k = 2; k <= n - 4; k++) name = name " " $k; print b "\t" name "\t" $(n - 3) }'
    done
done >"$OUT/runs.tsv"
echo
echo "| qdisc (1 Gbit/s, fixed rate) | before ns/pkt (runs) | median | after ns/pkt (runs) | median |"
echo "|---|---|---:|---|---:|"
awk -F'\t' '
    { v[$1, $2] = v[$1, $2] (v[$1, $2] == "" ? "" : "/") $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
    function median(s,   a, m, i, j, t) {
        m = split(s, a, "/")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return a[int((m + 1) / 2)]
    }
    END { for (i = 1; i <= n; i++) { q = order[i]; printf "| %s | %s | %s | %s | %s |\n", q, v["before", q], median(v["before", q]), v["after", q], median(v["after", q]) } }
' "$OUT/runs.tsv"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
