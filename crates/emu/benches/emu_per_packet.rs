//! Per-packet cost of the emulator core, for every qdisc (`cargo bench -p bloatlab-emu`).
//!
//! Not a test: it prints ns per packet (enqueue + dequeue), the packet rate one core could
//! sustain on the algorithm alone, and heap allocations per packet in steady state, counted by a
//! wrapping global allocator. The bench allocates each packet's buffer itself, so 1.00 allocation
//! per packet means the emulator adds none. The lab's target (1.5 Gbit/s at MTU 1500 = 125 kpps)
//! leaves about 8 µs per packet for everything, syscalls included.

use bloatlab_emu::{Limit, Link, LinkConfig, Qdisc, QdiscConfig};
use bloatlab_units::BitRate;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn packet(flow: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[1] = 0b10;
    p[9] = 6;
    p[12..16].copy_from_slice(&[10, 0, 0, 1]);
    p[16..20].copy_from_slice(&[10, 0, 0, 2]);
    p[20..22].copy_from_slice(&flow.to_be_bytes());
    p
}

/// Offers packets at 1.2x the link rate from 8 flows for `n` packets; returns (ns/packet, allocations/packet).
fn run(cfg: &LinkConfig, n: u64) -> (f64, f64) {
    let mut link = Link::new(cfg, 1).unwrap();
    // 1500 B at 1 Gbit/s = 12 µs; offer one every 10 µs.
    let gap = Duration::from_micros(10);
    let mut now = Duration::ZERO;
    let step = |link: &mut Link, i: u64, now: &mut Duration| {
        *now += gap;
        link.enqueue(*now, packet((i % 8) as u16, 1500));
        while let Some(p) = link.dequeue(*now) {
            std::hint::black_box(p);
        }
    };
    // Warm up: queues reach their steady size and capacity.
    for i in 0..n / 4 {
        step(&mut link, i, &mut now);
    }
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    for i in 0..n {
        step(&mut link, i, &mut now);
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    let allocs = (ALLOCS.load(Ordering::Relaxed) - a0) as f64 / n as f64;
    std::hint::black_box(link.counters());
    (ns, allocs)
}

fn main() {
    // EMU_BENCH_PACKETS and EMU_BENCH_QDISC (a name as printed, e.g. "fq_codel 1000p") make a
    // short run of one configuration, for counting instructions under callgrind
    // (bench/emu_instructions.sh), where timing would be meaningless.
    let n = std::env::var("EMU_BENCH_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400_000);
    let only = std::env::var("EMU_BENCH_QDISC").ok();
    println!(
        "{:<16} {:>10} {:>10} {:>14} {:>12}",
        "qdisc", "ns/pkt", "Mpps", "Gbit/s@1500B", "allocs/pkt"
    );
    // Default limits first (FQ-CoDel and CAKE then hold 10 240 packets = 15 MB, far beyond the
    // caches), then all with a 1000-packet limit.
    for limit in [None, Some(Limit::Packets(1000))] {
        for kind in [
            Qdisc::Fifo,
            Qdisc::Codel,
            Qdisc::FqCodel,
            Qdisc::Pie,
            Qdisc::Cake,
        ] {
            let mut qdisc = QdiscConfig::defaults(kind);
            if let Some(l) = limit {
                qdisc.set_limit(l);
            }
            let name = format!("{kind}{}", limit.map_or(String::new(), |l| format!(" {l}")));
            if only.as_ref().is_some_and(|o| *o != name) {
                continue;
            }
            let cfg = LinkConfig {
                rate: Some(BitRate(1_000_000_000)),
                delay: Duration::from_millis(10),
                qdisc,
                ..LinkConfig::default()
            };
            let (ns, allocs) = run(&cfg, n);
            let mpps = 1e3 / ns;
            println!(
                "{name:<16} {ns:>10.0} {mpps:>10.2} {:>14.1} {allocs:>12.2}",
                mpps * 1500.0 * 8.0 / 1e3
            );
        }
    }
}
