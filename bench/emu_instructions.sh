#!/usr/bin/env bash
# Instructions per packet of the emulator core, before and after a change (issue 23: "the
# emulator's cost per packet must not rise for fixed-rate links"), counted by valgrind's
# callgrind: a count, not a time, so it repeats on a busy machine where bench/emu_before_after.sh's
# nanoseconds vary 2x between runs of one binary.
#
# Builds `cargo bench -p bloatlab-emu`'s emu_per_packet (a fixed 1 Gbit/s link offered 1.2x its
# rate from 8 flows; crates/emu/benches/emu_per_packet.rs) against REV's crates/emu/src and the
# working tree's (the bench file itself is the working tree's in both), then for each qdisc runs
# each binary under callgrind for N and 2N packets (EMU_BENCH_PACKETS, EMU_BENCH_QDISC): the
# difference over the 1.25 N extra steps (N measured + N/4 warm-up) is the instructions per
# packet (enqueue + dequeue), without the program's start-up and set-up.
#
# Usage: bench/emu_instructions.sh REV [N]   (e.g. bench/emu_instructions.sh 19e4b85 40000)
# Needs valgrind and a committed crates/emu/src. No root, no network.
set -euo pipefail
REV=${1:?usage: $0 REV [N]}
N=${2:-40000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
if ! git diff --quiet HEAD -- crates/emu/src; then
    echo "crates/emu/src has uncommitted changes; commit them first" >&2
    exit 1
fi
OUT=$(mktemp -d)
trap 'git checkout -q HEAD -- crates/emu/src; rm -rf "$OUT"' EXIT
# shellcheck source=bench/emu_bench_build.sh
. "$ROOT/bench/emu_bench_build.sh"
emu_bench_builds "$REV" crates/emu/src "$OUT"
instructions() { # BINARY QDISC PACKETS -> total instructions (Ir)
    EMU_BENCH_PACKETS=$3 EMU_BENCH_QDISC=$2 valgrind --tool=callgrind \
        --callgrind-out-file="$OUT/cg.out" "$1" >/dev/null 2>"$OUT/vg.err"
    sed -n 's/^summary: *//p' "$OUT/cg.out"
}
echo "# emu_instructions.sh: $(date -u +%Y-%m-%dT%H:%MZ), before = $REV, after = $(git rev-parse --short HEAD), N = $N, $(valgrind --version)"
echo
echo "| qdisc (1 Gbit/s, fixed rate) | before instr/pkt | after instr/pkt | after / before |"
echo "|---|---:|---:|---:|"
for q in fifo codel fq_codel pie cake "fifo 1000p" "codel 1000p" "fq_codel 1000p" "pie 1000p" "cake 1000p"; do
    per=()
    for b in before after; do
        one=$(instructions "$OUT/$b" "$q" "$N")
        two=$(instructions "$OUT/$b" "$q" $((2 * N)))
        per+=("$(awk -v a="$one" -v c="$two" -v n="$N" 'BEGIN { printf "%.0f", (c - a) / (1.25 * n) }')")
    done
    awk -v q="$q" -v b="${per[0]}" -v a="${per[1]}" 'BEGIN { printf "| %s | %d | %d | %.3f |\n", q, b, a, a / b }'
done
