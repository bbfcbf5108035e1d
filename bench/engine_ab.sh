#!/usr/bin/env bash
# A/B of two bloatlab builds on the same machine, in alternation (run 1 of A,
# run 1 of B, run 2 of A, ...): a single TCP stream over loopback, each build's
# client to its own server, to tell a code change from a machine change.
#
#   bench/engine_ab.sh OLD_BINARY NEW_BINARY [RUNS]          # plain TCP
#   TT=1 bench/engine_ab.sh OLD_BINARY NEW_BINARY [RUNS]     # -e --trip-times
#
# Build the old one with e.g. `git worktree add /tmp/old COMMIT` and
# `cargo build --release` there (its own target dir, so the two builds do not
# share artifacts). Prints one line per run: receiver Gbit/s (the client's CSV
# total), client CPU (user sys, s) and the server's CPU ticks. Loopback only;
# 10 s per run. Not a test: nothing here asserts performance.
set -euo pipefail
OLD=${1:?old binary}
NEW=${2:?new binary}
RUNS=${3:-3}
SRV=()
CLI=()
if [[ -n "${TT:-}" ]]; then SRV=(-e); CLI=(-e --trip-times); fi
WORK=$(mktemp -d /tmp/bl-ab-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
for r in $(seq "$RUNS"); do
    for v in old new; do
        B=$OLD; [[ $v == new ]] && B=$NEW
        P=$((24000 + RANDOM % 1000))
        "$B" server "${SRV[@]}" -p "$P" >/dev/null 2>&1 &
        S=$!
        sleep 0.5
        /usr/bin/time -f "%U %S" -o "$WORK/cpu" "$B" client 127.0.0.1 -p "$P" -t 10 "${CLI[@]}" -y C \
            >"$WORK/out" 2>/dev/null || true
        TICKS=$(awk '{print $14 + $15}' "/proc/$S/stat")
        kill "$S"
        wait "$S" 2>/dev/null || true
        GBPS=$(tail -n 1 "$WORK/out" | awk -F, '{printf "%.2f", $9 / 1e9}')
        echo "run $r $v: $GBPS Gbit/s, client CPU $(cat "$WORK/cpu") s, server ticks $TICKS"
    done
done
