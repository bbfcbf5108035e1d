#!/usr/bin/env bash
# The test command (README "Run the tests"): unit tests, loopback and
# namespace integration tests, iperf 2 interop, and a short fuzz run of every
# parser. Run as root on Linux (namespaces need CAP_NET_ADMIN).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Every tier: a test that needs root fails here instead of skipping (crates/testkit/src/tier.rs).
export BLOATLAB_TEST_TIER=full
cargo test --workspace --all-targets
# The tun_copy bench example needs the lab's `internals` feature (not in --all-targets).
cargo build -p bloatlab-lab --features internals --examples
cargo test --workspace --doc
FUZZ_SECONDS="${FUZZ_SECONDS:-10}" bash scripts/fuzz-smoke.sh
echo "bloatlab tests: all passed"
