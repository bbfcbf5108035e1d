#!/usr/bin/env bash
# Installs what bloatlab's tests and benchmarks need on a fresh Debian machine.
# Idempotent: skips what is already there. Needs root for apt-get.
# flent opens our .flent.gz exports in a test (it reads files without netperf).
# curl and openssl check the HTTP test service (tests/it/http_service.rs). tcpdump captures RPM
# clients' probe connections in a lab host (tests/it/harness/wire.rs).
# slurm-wlm and munge: the test of docs/experiments.md's Slurm recipe (experiment_slurm) starts
# a single-node Slurm itself, without systemd.
# nginx with the echo module (its upload sink) is the RPM server no one here wrote
# (tests/it/rpm_interop.rs, bench/http_loopback.sh); h2load (nghttp2-client) loads it and ours in
# the benchmark. cmake and libclang-dev build Cloudflare's mach (BoringSSL, bindgen) below; npm
# installs Cloudflare's browser speed test (@cloudflare/speedtest) below.
# Debian does not start nginx at install in a container (policy-rc.d), and the tests run their
# own instances with their own config.
set -euo pipefail

need_apt=()
for pair in iperf:iperf iperf3:iperf3 irtt:irtt fping:fping ip:iproute2 nstat:iproute2 ping:iputils-ping chromium:chromium jq:jq flent:flent curl:curl openssl:openssl slurmctld:slurm-wlm munged:munge nginx:nginx h2load:nghttp2-client cmake:cmake npm:npm tcpdump:tcpdump; do
    cmd=${pair%%:*}
    pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# Packages without a command of their own: checked by a file they install.
for pair in '/usr/lib/nginx/modules/ngx_http_echo_module.so:libnginx-mod-http-echo' \
    '/usr/lib/llvm-*/lib/libclang.so:libclang-dev'; do
    compgen -G "${pair%%:*}" >/dev/null || need_apt+=("${pair#*:}")
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

# Cloudflare's RPM client (crate cf-mach, binary mach) for the interop tests
# (tests/it/rpm_interop.rs), built from crates.io into a directory outside the repo; a fast no-op
# when that version is there. The tests find it at $BLOATLAB_MACH or /opt/bloatlab-peers/bin/mach.
MACH_VERSION=0.4.0
PEERS=${BLOATLAB_PEERS:-/opt/bloatlab-peers}
if ! "$PEERS/bin/mach" --version 2>/dev/null | grep -qx "cf-mach $MACH_VERSION"; then
    cargo install cf-mach --locked --version "$MACH_VERSION" --root "$PEERS" --quiet
fi

# Cloudflare's browser speed test (npm package @cloudflare/speedtest), which tests/it/cf_speedtest.rs
# runs in headless Chromium against our /__down and /__up, installed outside the repo; a no-op when
# that version is there. The test finds it at $BLOATLAB_CF_SPEEDTEST or
# /opt/bloatlab-peers/cf-speedtest/node_modules/@cloudflare/speedtest.
CF_SPEEDTEST_VERSION=1.14.1
if ! grep -qs "\"version\": \"$CF_SPEEDTEST_VERSION\"" \
    "$PEERS/cf-speedtest/node_modules/@cloudflare/speedtest/package.json"; then
    npm install --prefix "$PEERS/cf-speedtest" --no-audit --no-fund --save-exact \
        "@cloudflare/speedtest@$CF_SPEEDTEST_VERSION"
fi
