//! Socket set-up for both roles: resolve, bind, connect with a timeout,
//! listen, and the per-socket options iperf 2 exposes (`-w -Z -S -B -V`).
//!
//! Everything here is a thin wrapper over `socket2`; the error type names
//! the option and the value that the kernel refused.

use crate::config::SocketOptions;
use bloatlab_units::CongestionControl;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Why a socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SockError {
    #[error("cannot resolve `{host}`: {source}")]
    Resolve { host: String, source: io::Error },
    #[error("`{host}` has no {family} address")]
    NoAddress { host: String, family: &'static str },
    #[error("connect to {addr} failed after {elapsed_ms:.1} ms: {source}")]
    Connect {
        addr: SocketAddr,
        elapsed_ms: f64,
        source: io::Error,
    },
    #[error("cannot bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
    #[error("option {option} = {value} rejected by the kernel: {source}")]
    Option {
        option: &'static str,
        value: String,
        source: io::Error,
    },
    #[error("socket(): {0}")]
    Create(io::Error),
}

/// Resolves `host:port`, preferring IPv6 with `-V` and IPv4 otherwise (an
/// IPv6-only name still resolves without `-V`, like iperf 2).
pub fn resolve(host: &str, port: u16, ipv6: bool) -> Result<SocketAddr, SockError> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|source| SockError::Resolve {
            host: host.to_owned(),
            source,
        })?
        .collect();
    let pick = if ipv6 {
        addrs.iter().find(|a| a.is_ipv6())
    } else {
        addrs.iter().find(|a| a.is_ipv4()).or(addrs.first())
    };
    pick.copied().ok_or(SockError::NoAddress {
        host: host.to_owned(),
        family: if ipv6 { "IPv6" } else { "IPv4" },
    })
}

fn opt_err(option: &'static str, value: impl ToString) -> impl FnOnce(io::Error) -> SockError {
    let value = value.to_string();
    move |source| SockError::Option {
        option,
        value,
        source,
    }
}

/// Applies `-w`, `-Z`, `-S` to a fresh or accepted socket. `v6` picks
/// IPV6_TCLASS over IP_TOS.
pub fn apply_options(sock: &Socket, opts: &SocketOptions, v6: bool) -> Result<(), SockError> {
    if let Some(w) = opts.window {
        let n = usize::try_from(w.0).unwrap_or(usize::MAX);
        sock.set_send_buffer_size(n).map_err(opt_err("-w", w.0))?;
        sock.set_recv_buffer_size(n).map_err(opt_err("-w", w.0))?;
    }
    if let Some(cc) = &opts.congestion {
        sock.set_tcp_congestion(cc.as_str().as_bytes())
            .map_err(opt_err("-Z/--tcp-congestion", cc))?;
    }
    if let Some(mark) = opts.mark {
        sock.set_mark(mark).map_err(opt_err("--fwmark", mark))?;
    }
    if let Some(tos) = opts.tos {
        if v6 {
            sock.set_tclass_v6(u32::from(tos))
                .map_err(opt_err("-S/--tos", format!("{tos:#x}")))?;
        } else {
            sock.set_tos_v4(u32::from(tos))
                .map_err(opt_err("-S/--tos", format!("{tos:#x}")))?;
        }
    }
    Ok(())
}

/// The congestion control in effect on `sock` (e.g. `cubic`), NUL padding trimmed.
pub fn congestion_in_effect(sock: &Socket) -> Option<String> {
    let raw = sock.tcp_congestion().ok()?;
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8(raw[..end].to_vec()).ok()
}

/// Sets TCP_NOTSENT_LOWAT: the socket counts as writable (and a blocking
/// write waits) while more than `bytes` of written data is still unsent, so
/// a sender keeps at most about that much queued in its own buffer.
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: u32) -> Result<(), SockError> {
    let v: libc::c_int = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    bloatlab_os::sockopt::set_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, v)
        .map_err(opt_err("--notsent-lowat", bytes))
}

/// TCP_NOTSENT_LOWAT in effect (`None` when unset: the kernel reports
/// `UINT_MAX`, or when the call fails).
pub fn notsent_lowat(sock: &impl AsRawFd) -> Option<u32> {
    let v =
        bloatlab_os::sockopt::get_uint(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT).ok()?;
    (v != 0 && v != libc::c_uint::MAX).then_some(v)
}

/// Sets the congestion control of a connected socket (`-Z`, or what a
/// bloatlab client asked the server's sender to use).
pub fn set_congestion(stream: &TcpStream, cc: &CongestionControl) -> Result<(), SockError> {
    socket2::SockRef::from(stream)
        .set_tcp_congestion(cc.as_str().as_bytes())
        .map_err(opt_err("-Z/--tcp-congestion", cc))
}

/// Closes abortively: SO_LINGER 0 makes the last close send an RST and drop
/// unsent data, so no more bytes of this connection enter the network.
pub fn abort(stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// A connected TCP stream plus what the connect measured.
#[derive(Debug)]
pub struct Connected {
    pub stream: TcpStream,
    /// How long `connect()` took (iperf 2's `ct=`).
    pub connect_time: Duration,
    /// TCP_CONGESTION read back after connect.
    pub congestion: Option<String>,
}

/// Opens a TCP connection to `addr` within `timeout`, with `opts` applied
/// before `connect()` so the window and congestion control govern the handshake.
pub fn connect_tcp(
    addr: SocketAddr,
    opts: &SocketOptions,
    timeout: Duration,
) -> Result<Connected, SockError> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(SockError::Create)?;
    apply_options(&sock, opts, addr.is_ipv6())?;
    if let Some(bind) = opts.bind {
        sock.bind(&SockAddr::from(bind))
            .map_err(|source| SockError::Bind { addr: bind, source })?;
    }
    let t0 = Instant::now();
    sock.connect_timeout(&SockAddr::from(addr), timeout)
        .map_err(|source| SockError::Connect {
            addr,
            elapsed_ms: t0.elapsed().as_secs_f64() * 1e3,
            source,
        })?;
    let connect_time = t0.elapsed();
    if opts.nodelay {
        sock.set_tcp_nodelay(true)
            .map_err(opt_err("-N/--nodelay", 1))?;
    }
    let congestion = congestion_in_effect(&sock);
    Ok(Connected {
        stream: sock.into(),
        connect_time,
        congestion,
    })
}

/// Listens on `port` (or the `-B` address), on `::` with `-V` and `0.0.0.0` otherwise.
pub fn listen_tcp(port: u16, opts: &SocketOptions) -> Result<TcpListener, SockError> {
    let addr = match opts.bind {
        Some(b) => SocketAddr::new(b.ip(), if b.port() == 0 { port } else { b.port() }),
        None if opts.ipv6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
    };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(SockError::Create)?;
    sock.set_reuse_address(true)
        .map_err(opt_err("SO_REUSEADDR", 1))?;
    // Window and congestion control set on the listener are inherited by
    // accepted sockets before the handshake completes (the window must be in
    // place before SYN-ACK to scale).
    apply_options(&sock, opts, addr.is_ipv6())?;
    sock.bind(&SockAddr::from(addr))
        .map_err(|source| SockError::Bind { addr, source })?;
    sock.listen(128)
        .map_err(|source| SockError::Listen { addr, source })?;
    Ok(sock.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(name: &str) -> CongestionControl {
        CongestionControl::new(name).unwrap()
    }

    #[test]
    fn resolve_prefers_requested_family() {
        assert!(resolve("127.0.0.1", 1, false).unwrap().is_ipv4());
        assert!(resolve("::1", 1, true).unwrap().is_ipv6());
        assert!(matches!(
            resolve("127.0.0.1", 1, true),
            Err(SockError::NoAddress { .. })
        ));
    }

    #[test]
    fn refused_connect_is_quick_and_named() {
        // Bind then drop a listener to find a port nobody listens on.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let t0 = Instant::now();
        let err = connect_tcp(addr, &SocketOptions::default(), Duration::from_secs(3)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(err.to_string().contains("refused"), "{err}");
    }

    #[test]
    fn congestion_control_is_set_and_read_back() {
        let l = listen_tcp(0, &SocketOptions::default()).unwrap();
        let port = l.local_addr().unwrap().port();
        let opts = SocketOptions {
            congestion: Some(cc("reno")),
            tos: Some(0x10),
            ..SocketOptions::default()
        };
        let c = connect_tcp(([127, 0, 0, 1], port).into(), &opts, Duration::from_secs(3)).unwrap();
        assert_eq!(c.congestion.as_deref(), Some("reno"));
        let bad = SocketOptions {
            congestion: Some(cc("nosuchcc")),
            ..SocketOptions::default()
        };
        let err =
            connect_tcp(([127, 0, 0, 1], port).into(), &bad, Duration::from_secs(3)).unwrap_err();
        assert!(err.to_string().contains("-Z"), "{err}");
    }

    #[test]
    fn notsent_lowat_and_congestion_on_a_connected_socket() {
        if !bloatlab_testkit::tier::root("notsent_lowat_and_congestion_on_a_connected_socket") {
            return;
        }
        let l = listen_tcp(0, &SocketOptions::default()).unwrap();
        let port = l.local_addr().unwrap().port();
        let c = connect_tcp(
            ([127, 0, 0, 1], port).into(),
            &SocketOptions::default(),
            Duration::from_secs(3),
        )
        .unwrap();
        assert_eq!(notsent_lowat(&c.stream), None);
        set_notsent_lowat(&c.stream, 16384).unwrap();
        assert_eq!(notsent_lowat(&c.stream), Some(16384));
        set_congestion(&c.stream, &cc("cubic")).unwrap();
        let sref = socket2::SockRef::from(&c.stream);
        assert_eq!(congestion_in_effect(&sref).as_deref(), Some("cubic"));
        assert!(set_congestion(&c.stream, &cc("nosuchcc")).is_err());
    }
}
