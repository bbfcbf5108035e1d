//! The probes' view of the OS: the stamping clock and kernel receive timestamps (both from
//! `bloatlab-os`), and the clock domain.

/// CLOCK_REALTIME now, since the Unix epoch: the stamping clock of every probe.
pub use bloatlab_os::clock::realtime_now as now;

/// An id of this kernel's CLOCK_REALTIME: a hash of the boot id, which every network
/// namespace of one boot shares. Two ends with the same id stamp on the same clock.
/// 0 if unknown.
pub fn clock_domain() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| {
            // FNV-1a, 64 bit: a stable hash we do not have to depend on a crate for.
            let h = id.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
            h.max(1)
        })
        .unwrap_or(0)
}

/// Kernel receive timestamps (`SO_TIMESTAMPNS`) and `recvmsg` with them, from `bloatlab-os`
/// (the UDP engine stamps its datagrams with the same code).
pub use bloatlab_os::sockmsg::{Received, enable_rx_timestamps, recv_with_timestamp};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_domain_is_stable_and_known_here() {
        let a = clock_domain();
        assert_ne!(a, 0, "/proc/sys/kernel/random/boot_id should be readable");
        assert_eq!(a, clock_domain());
    }
}
