#!/usr/bin/env bash
# Installs what bloatlab's tests and benchmarks need on a fresh Debian machine.
# Idempotent: skips what is already there. Needs root for apt-get.
# flent opens our .flent.gz exports in a test (it reads files without netperf).
# curl and openssl check the HTTP test service (tests/it/http_service.rs).
# slurm-wlm and munge: the test of docs/experiments.md's Slurm recipe (experiment_slurm) starts
# a single-node Slurm itself, without systemd.
set -euo pipefail

need_apt=()
for pair in iperf:iperf iperf3:iperf3 irtt:irtt fping:fping ip:iproute2 nstat:iproute2 ping:iputils-ping chromium:chromium jq:jq flent:flent curl:curl openssl:openssl slurmctld:slurm-wlm munged:munge; do
    cmd=${pair%%:*}
    pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if ((${#need_apt[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to apt-get install ${need_apt[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" </dev/null
fi

# cargo-fuzz drives the short fuzz run in scripts/test.sh.
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
fi
