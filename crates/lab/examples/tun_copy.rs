//! The benchmark's floor: a bare TUN-to-TUN copy loop with no emulator.
//!
//! `tun_copy NAME SECONDS [offload]` creates namespaces `bl-NAME-client` and
//! `bl-NAME-server`, each with a TUN (`bl-client` 10.77.0.1/24,
//! `bl-server` 10.77.0.2/24), and copies packets between them with one
//! thread per direction doing blocking `read`/`write`, for SECONDS seconds
//! (or until SIGINT/SIGTERM), with SCHED_FIFO like the emulator's threads. It prints `ready` once traffic can flow and
//! the packets copied per direction at the end. Everything is removed on
//! exit. `bench/emu_forwarding.sh` runs iperf3 across it. A third argument
//! `offload` opens the TUNs the way `lab up --offload` does and passes
//! every frame (`virtio_net_hdr` + super-packet) through unchanged: the
//! floor for the offload mode.

#![forbid(unsafe_code)]

use bloatlab_lab::netlink::Netlink;
use bloatlab_lab::netns::{self, NetnsGuard};
use bloatlab_lab::tun::{self, Offload, Tun};
use bloatlab_lab::{names, signals};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn make(ns: &str, ifname: &str, addr: Ipv4Addr, offload: Offload) -> bloatlab_lab::Result<Tun> {
    netns::run_in(ns, || {
        let t = Tun::create(ifname, offload)?;
        let mut nl = Netlink::open()?;
        let lo = nl.link_index("lo")?;
        nl.set_link(lo, None, None)?;
        let i = nl.link_index(ifname)?;
        nl.set_link(i, Some(1500), Some(500))?;
        nl.add_addr_v4(i, addr, 24)?;
        Ok(t)
    })
}

fn copy(from: i32, to: i32, stop: &AtomicBool, count: &AtomicU64) {
    // Same scheduling as the emulator's threads, for a fair floor.
    bloatlab_lab::driver::timing::tight_timer_slack();
    bloatlab_lab::driver::timing::realtime();
    let mut buf = vec![0u8; bloatlab_lab::offload::MAX_FRAME];
    let mut pfd = [bloatlab_os::poll::pollfd(from, libc::POLLIN)];
    while !stop.load(Ordering::Relaxed) {
        match tun::read_packet(from, &mut buf) {
            Ok(Some(n)) => {
                let _ = tun::write_packet(to, &buf[..n]);
                count.fetch_add(1, Ordering::Relaxed);
            }
            // Nothing waiting: block in poll (100 ms cap to notice stop).
            Ok(None) => {
                let _ = bloatlab_os::poll::poll(&mut pfd, Some(Duration::from_millis(100)));
            }
            Err(_) => break,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(String::as_str).unwrap_or("floor");
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let offload = match args.get(3).map(String::as_str) {
        None => Offload::Off,
        Some("offload") => Offload::Tso,
        Some(other) => return Err(format!("third argument {other:?}: expected `offload`").into()),
    };
    names::validate(name)?;
    signals::install();
    let (nc, ns) = (names::netns(name, "client"), names::netns(name, "server"));
    let _gc = NetnsGuard::create(&nc)?;
    let _gs = NetnsGuard::create(&ns)?;
    let c = make(&nc, "bl-client", Ipv4Addr::new(10, 77, 0, 1), offload)?;
    let s = make(&ns, "bl-server", Ipv4Addr::new(10, 77, 0, 2), offload)?;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let (cfd, sfd) = (c.fd().as_raw_fd(), s.fd().as_raw_fd());
    let threads: Vec<_> = [(cfd, sfd, 0), (sfd, cfd, 1)]
        .into_iter()
        .map(|(a, b, i)| {
            let (st, n) = (stop.clone(), counts[i].clone());
            std::thread::spawn(move || copy(a, b, &st, &n))
        })
        .collect();
    println!("ready");
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end && !signals::stop_requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    println!(
        "copied up {} down {} packets",
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed)
    );
    // Close the TUNs before the namespaces go (guards drop after).
    drop((c, s));
    Ok(())
}
