#!/usr/bin/env bash
# Probe responder under a session flood (issue 11, deliverable 4).
#
#   bench/probe_flood.sh                       # 1 000 000 datagrams at 100 000/s
#   DATAGRAMS=2000000 PPS=200000 bench/probe_flood.sh
#
# Runs crates/probe/tests/flood.rs with a larger flood than the suite's
# 100 000: a responder on 127.0.0.1, a flood of valid probe requests from
# 127.0.0.2 with a new session id in every datagram (each would create
# responder state), and a real `bloatlab_probe` client at 100 Hz from
# 127.0.0.1 for the flood's length + 1 s. Prints the flood rate, the replies
# the responder sent, and the client's probes sent/received/lost; fails if the
# client's loss reaches 1 %. Loopback only; bounded by DATAGRAMS and PPS.
set -euo pipefail
cd "$(dirname "$0")/.."
export BLOATLAB_FLOOD_DATAGRAMS=${DATAGRAMS:-1000000}
export BLOATLAB_FLOOD_PPS=${PPS:-100000}
cargo test --release -p bloatlab-probe --test flood -- --nocapture 2>&1 | grep -E '^flood:|test result|panicked'
