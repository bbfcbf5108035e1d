#!/usr/bin/env bash
# Build and run every cargo-fuzz target listed in fuzz/Cargo.toml for a short
# time each. Exits non-zero if any target fails to build or finds a crash.
#
#   scripts/fuzz-smoke.sh            # 10 s per target
#   FUZZ_SECONDS=60 scripts/fuzz-smoke.sh
#   scripts/fuzz-smoke.sh wire_ack_fin wire_tcp_header   # only these targets
#
# Needs `cargo install cargo-fuzz --locked`. cargo-fuzz passes nightly-only
# flags (-Zsanitizer), so on a stable toolchain we set RUSTC_BOOTSTRAP=1.
# FUZZ_SANITIZER (default: address) is passed to `cargo fuzz --sanitizer`;
# `none` builds faster (all our parsers are safe Rust).
#
# Each target starts from its committed seed corpus, fuzz/corpus/<target>/
# (written by fuzz/make-corpus.py from golden captures and sample files);
# inputs libFuzzer adds there are not committed (.gitignore).
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-10}"
sanitizer="${FUZZ_SANITIZER:-address}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: cargo-fuzz is missing; run: cargo install cargo-fuzz --locked" >&2
    exit 1
fi

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    # Every `name = "..."` inside a [[bin]] block of fuzz/Cargo.toml.
    mapfile -t targets < <(awk '
        /^\[\[bin\]\]/ { inbin = 1; next }
        /^\[/          { inbin = 0 }
        inbin && /^name[[:space:]]*=/ { gsub(/.*=[[:space:]]*"|".*/, ""); print }
    ' fuzz/Cargo.toml)
fi
if [ "${#targets[@]}" -eq 0 ]; then
    echo "fuzz-smoke: no [[bin]] targets in fuzz/Cargo.toml" >&2
    exit 1
fi

echo "fuzz-smoke: building ${#targets[@]} targets (sanitizer: $sanitizer)"
if [ "$#" -gt 0 ]; then
    for t in "${targets[@]}"; do cargo fuzz build --sanitizer "$sanitizer" "$t"; done
else
    cargo fuzz build --sanitizer "$sanitizer"
fi

failed=()
stamp="$(mktemp)"
trap 'rm -f "$stamp"' EXIT
for t in "${targets[@]}"; do
    echo "fuzz-smoke: $t for ${seconds}s"
    mkdir -p "fuzz/corpus/$t"
    [ -n "$(ls -A "fuzz/corpus/$t")" ] || echo "fuzz-smoke: WARN: no seeds for $t (run fuzz/make-corpus.py)" >&2
    # -max_total_time bounds the run; libFuzzer exits non-zero on a crash,
    # a leak, a timeout (-timeout per input) or an out-of-memory.
    if ! cargo fuzz run --sanitizer "$sanitizer" "$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        2>&1 | tail -n 40; then
        # A new file under fuzz/artifacts/<target>/ means libFuzzer found an input;
        # otherwise the target did not build or run (see the output above).
        if [ -n "$(find "fuzz/artifacts/$t" -type f -newer "$stamp" 2>/dev/null)" ]; then
            failed+=("$t (crash: $(find "fuzz/artifacts/$t" -type f -newer "$stamp" | head -n 1))")
        else
            failed+=("$t (build or run error)")
        fi
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-smoke: FAILED:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    echo "fuzz-smoke: reproduce a crash with: RUSTC_BOOTSTRAP=1 cargo fuzz run <target> <artifact>" >&2
    exit 1
fi
echo "fuzz-smoke: all ${#targets[@]} targets ran ${seconds}s without a crash"
