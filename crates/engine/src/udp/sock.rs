//! Opening and configuring UDP sockets from the shared socket options
//! (`-w`, `-S`, `-V`, `-B`).

use super::UdpError;
use crate::config::SocketOptions;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// Resolves `host:port` (shared with TCP: IPv6 with `-V`, else IPv4 first).
pub fn resolve(host: &str, port: u16, ipv6: bool) -> Result<SocketAddr, UdpError> {
    Ok(crate::sock::resolve(host, port, ipv6)?)
}

fn apply_common(sock: &Socket, opts: &SocketOptions, v6: bool) -> Result<(), UdpError> {
    if let Some(tos) = opts.tos {
        let r = if v6 {
            sock.set_tclass_v6(u32::from(tos))
        } else {
            sock.set_tos_v4(u32::from(tos))
        };
        r.map_err(|e| UdpError::SocketOption {
            option: "-S/--tos",
            source: e,
        })?;
    }
    if let Some(w) = opts.window {
        let n = usize::try_from(w.0).unwrap_or(usize::MAX);
        sock.set_send_buffer_size(n)
            .and_then(|()| sock.set_recv_buffer_size(n))
            .map_err(|e| UdpError::SocketOption {
                option: "-w",
                source: e,
            })?;
    }
    Ok(())
}

/// A client socket connected to `remote` (bound to `-B` if given).
pub fn client_socket(remote: SocketAddr, opts: &SocketOptions) -> Result<UdpSocket, UdpError> {
    let v6 = remote.is_ipv6();
    let sock = Socket::new(
        Domain::for_address(remote),
        Type::DGRAM,
        Some(Protocol::UDP),
    )
    .map_err(|e| UdpError::Socket { source: e })?;
    apply_common(&sock, opts, v6)?;
    let local = opts.bind.unwrap_or(if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    });
    sock.bind(&local.into()).map_err(|e| UdpError::Bind {
        addr: local,
        source: e,
    })?;
    sock.connect(&remote.into())
        .map_err(|e| UdpError::Connect {
            addr: remote,
            source: e,
        })?;
    Ok(sock.into())
}

/// The server's listening socket on `port` (or `-B`), with kernel receive
/// timestamps enabled and a receive buffer large enough for bursts.
pub fn server_socket(port: u16, opts: &SocketOptions) -> Result<UdpSocket, UdpError> {
    let addr = match opts.bind {
        Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), port),
        Some(a) => a,
        None if opts.ipv6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
    };
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| UdpError::Socket { source: e })?;
    sock.set_reuse_address(true)
        .map_err(|e| UdpError::SocketOption {
            option: "SO_REUSEADDR",
            source: e,
        })?;
    if opts.window.is_none() {
        // One thread serves every flow; a larger queue absorbs scheduling
        // gaps at high packet rates. The kernel caps it at rmem_max.
        let _ = sock.set_recv_buffer_size(4 << 20);
    }
    apply_common(&sock, opts, addr.is_ipv6())?;
    sock.bind(&addr.into())
        .map_err(|e| UdpError::Bind { addr, source: e })?;
    let sock: UdpSocket = sock.into();
    super::mmsg::enable_rx_timestamps(&sock).map_err(|e| UdpError::SocketOption {
        option: "SO_TIMESTAMPNS",
        source: e,
    })?;
    Ok(sock)
}
