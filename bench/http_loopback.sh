#!/usr/bin/env bash
# Loopback goodput of the HTTP test service (issue 20): bloatlab's h2 over TLS
# 1.3 large-object download against Debian's nginx serving network-quality/
# server's nginx layout (HTTP/2, TLS, /files/large as a sparse 64 GiB file),
# same machine, same run, same load generator, same certificate. Rounds
# alternate between the servers so a noisy neighbour hits both.
#
#   bench/http_loopback.sh              # uses target/release/bloatlab (builds it)
#   CLIENTS=8 ROUNDS=5 SECONDS_EACH=8 bench/http_loopback.sh
#   LOADGEN=curl bench/http_loopback.sh # one curl --http2 download at a time
#
# The load generator: h2load (nghttp2-client; default) with CLIENTS connections
# (default 4), one stream each, for SECONDS_EACH; or curl (one connection,
# which on this machine decrypts slower than either server encrypts).
# Needs nginx (apt-get install nginx, or NGINX_BIN=path to one unpacked with
# apt-get download nginx && dpkg-deb -x), h2load or curl, and openssl.
# Prints each round's goodput (Mbit/s) and the median ratio bloatlab/nginx;
# issue 20's target is >= 0.9. Record results in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BL=${BLOATLAB:-target/release/bloatlab}
[ -x "$BL" ] || cargo build --release -p bloatlab >/dev/null
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_EACH:-8}
LOADGEN=${LOADGEN:-h2load}
CLIENTS=${CLIENTS:-4}
BL_PORT=${BL_PORT:-47911}
NG_PORT=${NG_PORT:-47912}
# Not NGINX: nginx reads that variable as inherited listening sockets.
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX_BIN" ] || { echo "nginx not found (apt-get install nginx-light)" >&2; exit 1; }

DIR=$(mktemp -d /tmp/bl-bench-http.XXXXXX)
chmod 755 "$DIR"
BL_PID="" NG_PID=""
cleanup() {
    [ -n "$BL_PID" ] && kill "$BL_PID" 2>/dev/null || true
    [ -n "$NG_PID" ] && kill "$NG_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

# One self-signed certificate for both servers (P-256, as rcgen makes).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj /CN=localhost -days 1 -keyout "$DIR/key.pem" -out "$DIR/cert.pem" 2>/dev/null
chmod 644 "$DIR/key.pem"
mkdir -p "$DIR/root/files" "$DIR/logs"
truncate -s 64G "$DIR/root/files/large"
printf x >"$DIR/root/files/small"
cat >"$DIR/nginx.conf" <<CONF
worker_processes 2;
pid $DIR/nginx.pid;
error_log $DIR/logs/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nodelay on;
    output_buffers 2 128k;
    client_body_temp_path $DIR/tmp_body;
    proxy_temp_path $DIR/tmp_proxy;
    fastcgi_temp_path $DIR/tmp_fcgi;
    uwsgi_temp_path $DIR/tmp_uwsgi;
    scgi_temp_path $DIR/tmp_scgi;
    server {
        listen 127.0.0.1:$NG_PORT ssl http2;
        ssl_certificate $DIR/cert.pem;
        ssl_certificate_key $DIR/key.pem;
        ssl_protocols TLSv1.3;
        location /files/ { root $DIR/root; }
    }
}
CONF
"$NGINX_BIN" -p "$DIR" -c "$DIR/nginx.conf" -g 'daemon off;' &
NG_PID=$!
"$BL" server -B 127.0.0.1 --no-iperf --https "$BL_PORT" \
    --tls-cert "$DIR/cert.pem" --tls-key "$DIR/key.pem" >/dev/null &
BL_PID=$!
sleep 1

goodput() { # url -> Mbit/s over SECS seconds of h2 downloads
    local bytes
    if [ "$LOADGEN" = curl ]; then
        bytes=$(curl -sk --http2 --tlsv1.3 -o /dev/null --max-time "$SECS" \
            -w '%{size_download}' "$1" || true)
    else
        # h2load's "traffic: 2.1GB (2254857216) total": every byte read,
        # headers included (a few hundred per request, one request per client).
        bytes=$(h2load -c "$CLIENTS" -t 1 -m 1 -D "$SECS" "$1" 2>/dev/null |
            sed -n 's/^traffic: [^(]*(\([0-9]*\)) total.*/\1/p')
    fi
    awk -v b="${bytes:-0}" -v s="$SECS" 'BEGIN { printf "%.0f", b * 8 / s / 1e6 }'
}

echo "load: $LOADGEN$([ "$LOADGEN" = curl ] || echo " -c $CLIENTS"), $SECS s per round; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round  bloatlab_Mbps  nginx_Mbps  ratio"
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    b=$(goodput "https://127.0.0.1:$BL_PORT/api/v1/large")
    n=$(goodput "https://127.0.0.1:$NG_PORT/files/large")
    ratio=$(awk -v b="$b" -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? b / n : 0) }')
    ratios+=("$ratio")
    printf "%5d  %13s  %10s  %5s\n" "$r" "$b" "$n" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio bloatlab/nginx: $median (target >= 0.9)"
