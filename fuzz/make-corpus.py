#!/usr/bin/env python3
"""Writes the seed corpus, fuzz/corpus/<target>/, from golden captures and real producers.

The bytes are iperf 2.1.8 captures (the words crates/wire/tests/golden.rs
holds), the committed sample documents (crates/*/tests/data/)
and probe/netlink messages laid out as our code writes and the kernel sends
them. Seeds are small: libFuzzer mutates from them instead of from nothing
(issue 11: probe_packet got no further than its magic words in 10 s without one).

    fuzz/make-corpus.py          # rewrites the seed files (idempotent)

scripts/fuzz-smoke.sh runs every target on fuzz/corpus/<target>/. Files that
libFuzzer adds there are ignored by git (.gitignore); the seeds are committed.
"""
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(ROOT, "corpus")


def words(s):
    return b"".join(int(w, 16).to_bytes(4, "big") for w in s.split())


# iperf 2.1.8 captures (see crates/wire/tests/golden.rs for the commands).
W01_TCP = words("40010078 00000001 00001451 00000000 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00000000 00000000 00000000")
W01_ACK = words("00000002 0000001c 00000000 00020001 00080003 00000000 00000000")
W02_TCP = words("400100a0 00000001 00001452 000003e8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0feb78 0000a6ea 00000000 00000000")
W02_BURST = words("400100a0 00000001 00001452 6b0feb78 0000a705 6b0feb78 0000a766 00000000 00100000 00020001 00080003 00000001 000003e8 000003ea 00000000 00000000 6b0feb78 0000a6ea 00000000 00000000 00000000 00000000 00000000")
W02_ACK = words("00000002 00000034 00000000 00020001 00080003 00000000 00000000 6b0feb78 0000a6ea 6b0feb78 0000a805 6b0feb78 0000a8bc")
W03_TCP = words("440100a0 00000001 00001453 000003e8 00000000 ffffff9c 00000000 00000000 04100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0feb88 00018c8c 00000000 00000000")
W13_TCP = words("5001007c 00000001 0000145d 000003e8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00013880 00000000 00000000 000a7365 63726574 6b657931")
W06_UDP = words("00000001 6b0feb9f 000dd051 00000000 48010098 00000001 00001456 000000c8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000") + bytes(120)
W07_UDP = words("00000001 6b0feba6 0001ce70 00000000 680100d8 00000001 00001457 000000c8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0feba6 0001ce70 00000000 00000000") + bytes(72)
W07_FIN = words("ffffffbe 6b0feba7 00022d6a ffffffff 680100d8 00000001 00001457 000000c8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0feba6 0001ce70 00000000 00000000") + bytes(72)
W07_ACK_FIN = words("00000000 00000000 00000000 00000000 c8000000 00000000 00003390 00000001 00005f22 00000000 00000000 00000042 00000000 00000002 00000000 00000004 00000000 0000003e 00000000 000009d6 00000000 00000026 00000d0c 000765f0 00000000 00000002 00000042 00000040 00000001 00000000 00000000 00000000")
W12_REQ = words("00000001 6b0febd4 000460d8 00000000 6c0100d8 00000001 0000145c 000000c8 00000000 ffffff9c 00000000 00000000 04100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0febd4 000460d8 00000000 00000000") + bytes(72)
W12_SERVER = words("00000001 6b0febd4 00046219 00000000 680100d8 00000001 0000145c 000000c8 00000000 ffffff9c 00000000 00000000 00180000 00020001 00080003 00000000 00100000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0febd4 00046219 00000000 00000000") + bytes(72)


def udp_seq(base, seq):
    """The same datagram with another 64-bit sequence number (id, id2)."""
    lo, hi = seq & 0xFFFFFFFF, (seq >> 32) & 0xFFFFFFFF
    return struct.pack(">I", lo) + base[4:12] + struct.pack(">I", hi) + base[16:]


def probe(kind, session, seq, send_ns, rx=0, tx=0, count=0, seen=0, domain=0, length=80):
    """A probe datagram as crates/probe/src/packet.rs lays it out."""
    magic = 0x626C7071 if kind == "request" else 0x626C7072
    head = struct.pack(">IBBBBII", magic, 1, 1 if rx else 0, 1, 0, magic ^ 0xFFFFFFFF, 0)
    body = struct.pack(">QQQQQQQQ", session, seq, send_ns, rx, tx, count, seen, domain)
    return (head + body).ljust(length, b"\0")


def blxr(payload):
    return b"BLXR" + struct.pack(">II", 1, len(payload)) + payload


def nlattr(ty, payload):
    n = 4 + len(payload)
    return struct.pack("=HH", n, ty) + payload + bytes((-n) % 4)


def nlmsg(ty, payload):
    return struct.pack("=IHHII", 16 + len(payload), ty, 0, 1, 0) + payload


def qdisc_msg(kind, packets, drops, backlog):
    tcmsg = struct.pack("=BxxxiIII", 0, 3, 0x10000, 0xFFFFFFFF, 1)
    basic = nlattr(1, struct.pack("=QI4x", packets * 1500, packets))  # TCA_STATS_BASIC
    queue = nlattr(3, struct.pack("=IIIII", 5, backlog, drops, 0, 7))  # TCA_STATS_QUEUE
    return tcmsg + nlattr(1, kind + b"\0") + nlattr(7, basic + queue)  # TCA_KIND, TCA_STATS2


def read(path):
    with open(os.path.join(ROOT, "..", path), "rb") as f:
        return f.read()


T0 = 1_800_000_000 * 10**9
DOC = read("crates/metrics/tests/data/document_v1.json")
SEEDS = {
    "wire_tcp_header": [W01_TCP, W02_TCP, W03_TCP, W13_TCP],
    "wire_client_hdr_ack": [W01_ACK, W02_ACK],
    "wire_tcp_burst": [W02_BURST],
    "wire_udp_datagram": [W06_UDP, W07_UDP, W07_FIN, W12_REQ],
    "wire_ack_fin": [W07_ACK_FIN],
    "wire_report_frame": [blxr(b'{"a":1}'), blxr(b"")],
    # crates/wire/tests/golden.rs: flow_reply_golden_bytes, flow_query_golden_bytes.
    "wire_flow_reply": [
        bytes.fromhex("00424c52000000010123456789abcdef000000000000000f0000000100000002"
                      "0000002a00013a74000004b0000138800000000a000005a80000000300000000"),
        bytes.fromhex("00424c52000000010000000000000009000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"),
        bytes.fromhex("00424c51000000010123456789abcdef0000"),
        bytes.fromhex("00424c51000000010000000000000007000861626364313233340"[:-1]),
    ],
    "results_load": [read("crates/results/tests/data/v1.json")],
    "metrics_server_report": [b'{"intervals":[],"summary":null}', W07_ACK_FIN],
    "metrics_document": [DOC],
    "emu_ip_header": [
        bytes.fromhex("4500001c0001000040110000") + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + bytes.fromhex("1388138900080000"),
        bytes.fromhex("6000000000081140") + bytes(15) + b"\x01" + bytes(15) + b"\x02" + bytes.fromhex("1388138900080000"),
    ],
    "emu_link_spec": [b"10mbit", b"20ms", b"1000p", b"64kb", b"1%", b"fq_codel"],
    "engine_handshake": [W01_TCP, W02_TCP, W13_TCP, W01_ACK + blxr(b'{"a":1}'), b"128K", b"10m"],
    "engine_udp_server": [W06_UDP, W07_UDP, W12_REQ, W07_FIN],
    "probe_packet": [
        probe("request", 7, 0, T0),
        probe("reply", 7, 0, T0, T0 + 1000, T0 + 2000, 1, 0, 99),
        probe("request", 7, 5, T0, length=200),
    ],
    "lab_netlink_reply": [nlmsg(36, qdisc_msg(b"fq_codel", 10, 1, 3000))],
    "lab_state_file": [read("fuzz/seeds/lab_state.json")],
    "lab_offload_frame": [bytes([0]) + bytes(range(64))],
    # New in issue 11.
    "engine_burst_deframe": [bytes([10]) + W02_BURST + bytes(1000 - len(W02_BURST)), bytes([3]) + W02_BURST],
    "engine_udp_reverse_receive": [
        b"\xfe\xfe".join([W12_SERVER, udp_seq(W12_SERVER, 2), udp_seq(W12_SERVER, 4), udp_seq(W12_SERVER, (1 << 64) - 5)])
    ],
    "probe_client_reply": [
        b"".join(probe("reply", 7, s, T0 + s * 10**7, T0 + s * 10**7 + 5000, T0 + s * 10**7 + 6000, s + 1, (1 << s) - 1, 1, 96) for s in range(8)),
    ],
    "lab_qdisc_stats": [qdisc_msg(b"fq_codel", 10, 1, 3000), nlmsg(36, qdisc_msg(b"tbf", 3, 0, 0))],
}

for target, seeds in SEEDS.items():
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for i, s in enumerate(seeds):
        with open(os.path.join(d, f"seed-{i:02}"), "wb") as f:
            f.write(s)
    print(f"{target}: {len(seeds)} seeds")
