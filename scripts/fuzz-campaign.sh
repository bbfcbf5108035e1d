#!/usr/bin/env bash
# A longer fuzzing campaign than the test suite's smoke run: every cargo-fuzz
# target (or the ones named) for SECONDS each, JOBS targets at a time, each
# starting from its committed seeds (fuzz/make-corpus.py -> fuzz/corpus/<t>/)
# copied into a scratch directory, so the committed seeds stay as they are.
#
#   scripts/fuzz-campaign.sh                      # 600 s per target, 2 at a time
#   SECONDS_PER_TARGET=1800 JOBS=4 scripts/fuzz-campaign.sh probe_packet
#
# Builds with debug assertions (overflow checks on: an arithmetic overflow on
# peer input is a bug even where release builds would wrap) and without a
# sanitizer (the parsers are safe Rust; more executions per second).
# Writes OUT/summary.tsv (target, seconds, runs, cov, ft, corpus, result) and
# one log per target; crash inputs land in OUT/artifacts/<target>/.
# Exits non-zero if any target crashed or did not run.
set -euo pipefail

cd "$(dirname "$0")/.."
secs="${SECONDS_PER_TARGET:-600}"
jobs="${JOBS:-2}"
out="${OUT:-$(mktemp -d /tmp/bloatlab-fuzz-campaign.XXXXXX)}"
export RUSTC_BOOTSTRAP=1

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(awk '
        /^\[\[bin\]\]/ { inbin = 1; next }
        /^\[/          { inbin = 0 }
        inbin && /^name[[:space:]]*=/ { gsub(/.*=[[:space:]]*"|".*/, ""); print }
    ' fuzz/Cargo.toml)
fi

python3 fuzz/make-corpus.py >/dev/null
cargo fuzz build --sanitizer none --debug-assertions >&2
bin_dir="fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/release"
mkdir -p "$out"
echo "fuzz-campaign: ${#targets[@]} targets x ${secs}s, ${jobs} at a time, into $out" >&2

run_one() {
    local t="$1" secs="$2" out="$3" bin_dir="$4"
    mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
    cp -r "fuzz/corpus/$t/." "$out/corpus/$t/" 2>/dev/null || true
    local started result=ok
    started=$(date +%s)
    if ! "$bin_dir/$t" "$out/corpus/$t" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" \
        >"$out/$t.log" 2>&1; then
        result=FAILED
    fi
    local took=$(($(date +%s) - started))
    # The last status line carries cov/ft/corpus; the final stats carry the run count.
    local runs cov ft corp
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$out/$t.log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$out/$t.log" | tail -n 1 | cut -d' ' -f2)
    corp=$(grep -o 'corp: [0-9]*' "$out/$t.log" | tail -n 1 | cut -d' ' -f2)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$took" "${runs:-?}" "${cov:-?}" "${ft:-?}" \
        "${corp:-?}" "$result" >>"$out/summary.tsv"
    echo "fuzz-campaign: $t ${took}s runs ${runs:-?} cov ${cov:-?} $result" >&2
}
export -f run_one

printf 'target\tseconds\truns\tcov\tft\tcorpus\tresult\n' >"$out/summary.tsv"
printf '%s\n' "${targets[@]}" |
    xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$secs" "$out" "$bin_dir"

column -t -s $'\t' "$out/summary.tsv"
if grep -q FAILED "$out/summary.tsv"; then
    echo "fuzz-campaign: a target failed; see $out/<target>.log and $out/artifacts/" >&2
    exit 1
fi
