#!/usr/bin/env bash
# Replays issue 11's attacks against a bloatlab server on loopback and checks
# that the server survives them: threads, fds and RSS after each attack, and a
# real TCP and UDP test passing at the end.
#
#   bench/attack.sh                  # uses target/release/bloatlab (builds it)
#   BLOATLAB=target/debug/bloatlab bench/attack.sh
#
# Attacks (python3 crafts the packets; loopback only; bounded in count):
#   silent    200 TCP connections that send nothing, held 6 s
#   garbage   2000 TCP connections sending 200 random bytes each
#   big-ask   100 TCP `-R -l 16M` headers whose client never reads
#   udp-rand  2000 random UDP datagrams of 76..200 bytes (UDP server)
#   udp-rev   200 valid UDP `-R` requests from sockets closed at once (as a
#             spoofed source would: the traffic goes to a port nobody reads)
#   pin       4400 UDP flows claiming 1 bit/s, one per source port
#   udp-refl  (issue 19) one 200-byte iperf-style UDP `-R` request (-t 10 at
#             10 Mbit/s) from a socket that reads what comes back for 3 s: a
#             default server must send nothing (it sent 8,501 datagrams)
# The UDP server's stderr is kept and its lines counted: every line goes
# through the log budget (issue 19: 24,576 idle-end lines in 50 s).
# Attacks come from 127.0.0.2 and the real tests from 127.0.0.1, as an attacker
# and a user would be different sources (the servers' caps are per source).
# Prints a table (threads / fds / RSS MiB of each server after each attack)
# and PASS/FAIL lines; exits 1 if a server died, a real test failed, or a
# server kept more than LIMIT_THREADS threads / LIMIT_RSS_MB after the attacks.
set -euo pipefail
cd "$(dirname "$0")/.."
BL=${BLOATLAB:-target/release/bloatlab}
[ -x "$BL" ] || cargo build --release -p bloatlab >/dev/null
LIMIT_THREADS=${LIMIT_THREADS:-32}
LIMIT_RSS_MB=${LIMIT_RSS_MB:-256}
TCP_PORT=${TCP_PORT:-47811}
UDP_PORT=${UDP_PORT:-47812}

"$BL" server -p "$TCP_PORT" >/dev/null 2>&1 &
TCP_PID=$!
UDP_LOG=$(mktemp)
"$BL" server -u -p "$UDP_PORT" >/dev/null 2>"$UDP_LOG" &
UDP_PID=$!
START=$(date +%s)
cleanup() { kill "$TCP_PID" "$UDP_PID" 2>/dev/null || true; wait 2>/dev/null || true; rm -f "$UDP_LOG" "$UDP_LOG.refl"; }
trap cleanup EXIT
sleep 1

usage() { # pid -> "threads fds rss_mib" or "dead"
    local pid=$1
    [ -d "/proc/$pid" ] || { echo "dead"; return; }
    local th rss fds
    th=$(awk '/^Threads:/{print $2}' "/proc/$pid/status")
    rss=$(awk '/^VmRSS:/{printf "%d", $2/1024}' "/proc/$pid/status")
    fds=$(ls "/proc/$pid/fd" | wc -l)
    echo "$th $fds $rss"
}

attack() { # name -> runs the python attack
    REFL_OUT="$UDP_LOG.refl" python3 - "$1" "$TCP_PORT" "$UDP_PORT" <<'PY'
import os, random, socket, struct, sys, time
name, tcp, udp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(11)
SRC = "127.0.0.2"

def tcp_conn():
    return socket.create_connection(("127.0.0.1", tcp), source_address=(SRC, 0))

def udp_sock():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((SRC, 0))
    return s

def header(flags=0x40010078, upper=0, buf_len=0, amount=-100, rate=0):
    # The 60-byte iperf 2.1.8 test header (README 5.3), version 2.1.8.
    return struct.pack(">IIIIIiIIHHIIHHIII", flags, 1, 0, buf_len, 0, amount, 0, 0,
                       upper, 0, 0x00020001, 0x00080003, 0, 0, rate, 0, 0)

def udp_datagram(hdr, seq=1, length=200):
    now = time.time()
    d = struct.pack(">IIII", seq, int(now), int((now % 1) * 1e6), 0) + hdr
    return d.ljust(length, b"0")

if name == "silent":
    conns = [tcp_conn() for _ in range(200)]
    time.sleep(6)
elif name == "garbage":
    for _ in range(2000):
        try:
            s = tcp_conn()
            s.sendall(rnd.randbytes(200))
            s.close()
        except OSError:
            pass
elif name == "big-ask":
    conns = []
    for _ in range(100):
        s = tcp_conn()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # EXTEND|VERSION2, upper REVERSE, -l 16M, -t 30: then never read.
        s.sendall(header(flags=0x44010078, upper=0x0400, buf_len=16 << 20, amount=-3000))
        conns.append(s)
    time.sleep(5)
elif name == "udp-rand":
    s = udp_sock()
    for _ in range(2000):
        s.sendto(rnd.randbytes(rnd.randint(76, 200)), ("127.0.0.1", udp))
    time.sleep(3)
elif name == "udp-rev":
    # UDPTESTS|SEQNO64B|VERSION2|EXTEND, upper REVERSE: the server should send.
    hdr = header(flags=0x6c010078, upper=0x0400, buf_len=200, amount=-1000, rate=10_000_000)
    for _ in range(200):
        s = udp_sock()
        s.sendto(udp_datagram(hdr), ("127.0.0.1", udp))
        s.close()
    time.sleep(3)
elif name == "pin":
    hdr = header(flags=0x68010078, buf_len=200, amount=-100, rate=1)
    socks = []
    for i in range(4400):
        s = udp_sock()
        s.sendto(udp_datagram(hdr), ("127.0.0.1", udp))
        socks.append(s)
        if len(socks) > 500:
            socks.pop(0).close()
    time.sleep(2)
elif name == "udp-refl":
    hdr = header(flags=0x6c010078, upper=0x0400, buf_len=200, amount=-1000, rate=10_000_000)
    s = udp_sock()
    s.settimeout(0.1)
    s.sendto(udp_datagram(hdr), ("127.0.0.1", udp))
    n = got = 0
    end = time.time() + 3
    while time.time() < end:
        try:
            got += len(s.recv(65536))
            n += 1
        except socket.timeout:
            pass
    with open(os.environ["REFL_OUT"], "w") as f:
        f.write(f"{n} {got}\n")
PY
}

printf '| attack | TCP server threads/fds/RSS MiB | UDP server threads/fds/RSS MiB |\n|---|---|---|\n'
printf '| (start) | %s | %s |\n' "$(usage $TCP_PID)" "$(usage $UDP_PID)"
for a in silent garbage big-ask udp-rand udp-rev pin udp-refl; do
    t0=$(date +%s.%N)
    attack "$a" || echo "attack $a: python failed" >&2
    printf '| %s (%.1f s) | %s | %s |\n' "$a" "$(echo "$(date +%s.%N) - $t0" | bc)" \
        "$(usage $TCP_PID)" "$(usage $UDP_PID)"
done

fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }
sleep 5
read -r tth tfd trss <<<"$(usage $TCP_PID)"
read -r uth ufd urss <<<"$(usage $UDP_PID)"
check "TCP server alive" '[ "$tth" != dead ]'
check "UDP server alive" '[ "$uth" != dead ]'
check "TCP server threads <= $LIMIT_THREADS ($tth)" '[ "$tth" != dead ] && [ "$tth" -le "$LIMIT_THREADS" ]'
check "UDP server threads <= $LIMIT_THREADS ($uth)" '[ "$uth" != dead ] && [ "$uth" -le "$LIMIT_THREADS" ]'
check "TCP server RSS <= $LIMIT_RSS_MB MiB ($trss)" '[ "$tth" != dead ] && [ "$trss" -le "$LIMIT_RSS_MB" ]'
check "UDP server RSS <= $LIMIT_RSS_MB MiB ($urss)" '[ "$uth" != dead ] && [ "$urss" -le "$LIMIT_RSS_MB" ]'
read -r refl_n refl_b <"$UDP_LOG.refl" || { refl_n=missing; refl_b=0; }
check "UDP -R without a cookie got nothing ($refl_n datagrams, $refl_b bytes)" '[ "$refl_n" = 0 ]'
log_lines=$(wc -l <"$UDP_LOG")
log_cap=$(( 20 + 2 * ($(date +%s) - START) + 5 ))
check "UDP server log within its budget ($log_lines lines <= $log_cap)" '[ "$log_lines" -le "$log_cap" ]'
check "a real TCP test passes" '"$BL" client 127.0.0.1 -p "$TCP_PORT" -t 1 >/dev/null 2>&1'
check "a real UDP test passes" '"$BL" client 127.0.0.1 -u -p "$UDP_PORT" -t 1 -b 10m >/dev/null 2>&1'
exit "$fail"
