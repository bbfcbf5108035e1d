//! Test tiers. Plain `cargo test` as a normal user runs everything it can and says what it
//! skips: tests that need root (network namespaces, raw or ICMP sockets, per-socket
//! congestion control the host does not allow everyone). The README's test command
//! (`scripts/test.sh`, which CI runs as root) sets `BLOATLAB_TEST_TIER=full`: there a missing
//! privilege is a failure, never a skip, so nothing is skipped silently where it counts.

/// Whether test `test`, which needs root, may run here; prints why not when it is skipped.
pub fn root(test: &str) -> bool {
    if bloatlab_os::process::is_root() {
        return true;
    }
    if std::env::var("BLOATLAB_TEST_TIER").as_deref() == Ok("full") {
        panic!("{test} needs root (BLOATLAB_TEST_TIER=full runs every tier; run as root)");
    }
    eprintln!(
        "skipped {test}: needs root (network namespaces or privileged sockets); \
         the README's test command runs it"
    );
    false
}
