//! Facts about this host: CPU utilisation from `/proc/stat` (parsed by a pure function),
//! kernel identity and the sysctls that shape TCP behaviour, for the results metadata.

use std::collections::BTreeMap;

use bloatlab_results::schema::KernelRecord;

/// Cumulative CPU time counters of one `cpu` line of `/proc/stat` (USER_HZ ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// idle + iowait.
    pub idle: u64,
    /// Everything.
    pub total: u64,
}

/// Parses the aggregate `cpu ` line of `/proc/stat` (user nice system idle iowait irq
/// softirq steal ...; proc(5)). `None` if it is missing or malformed.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (fields 9, 10) are already included in user and nice.
    let total = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some(CpuTimes { idle, total })
}

/// Utilisation (0..=1) between two readings; `None` if no time passed.
pub fn utilisation(a: CpuTimes, b: CpuTimes) -> Option<f64> {
    let total = b.total.checked_sub(a.total)?;
    let idle = b.idle.checked_sub(a.idle)?;
    (total > 0).then(|| 1.0 - idle.min(total) as f64 / total as f64)
}

/// Reads `/proc/stat` now.
pub fn read_cpu() -> Option<CpuTimes> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// This kernel's sysname, release, version and machine (all unknown if `uname` failed).
pub fn kernel() -> KernelRecord {
    match bloatlab_os::process::uname() {
        Some([sysname, release, version, machine, _]) => KernelRecord {
            sysname: Some(sysname),
            release: Some(release),
            version: Some(version),
            machine: Some(machine),
        },
        None => KernelRecord::default(),
    }
}

/// This host's node name (`uname -n`).
pub fn node_name() -> Option<String> {
    bloatlab_os::process::uname()
        .map(|[.., n]| n)
        .filter(|n| !n.is_empty())
}

/// The sysctls that change what a latency-under-load test measures.
pub const SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_notsent_lowat",
    "net.core.default_qdisc",
];

/// Reads [`SYSCTLS`] from `/proc/sys` (absent ones are left out).
pub fn sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/{}", name.replace('.', "/"));
            let v = std::fs::read_to_string(path).ok()?;
            Some((
                (*name).to_owned(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_utilisation() {
        let a = parse_proc_stat("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                idle: 800,
                total: 1000
            }
        );
        let b = parse_proc_stat("cpu  400 0 200 800 100 0 0 0 0 0\n").unwrap();
        // 500 ticks passed, 100 idle: 80 % busy.
        assert!((utilisation(a, b).unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(utilisation(a, a), None);
        assert_eq!(utilisation(b, a), None, "counters going back are no data");
        assert_eq!(parse_proc_stat("intr 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn this_host_has_a_kernel() {
        let k = kernel();
        assert_eq!(k.sysname.as_deref(), Some("Linux"));
        assert!(k.release.is_some_and(|r| !r.is_empty()));
        assert!(node_name().is_some());
    }
}
