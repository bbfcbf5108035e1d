//! The flow query's drivers (docs/wire.md, "flow query"): the server keeps
//! each finished reverse/full-duplex flow's sender `TCP_INFO` in a
//! [`FlowTable`] and answers a query connection; the client asks after its
//! flow ended. The sans-IO parts are `bloatlab_wire::flow_query` (bytes) and
//! [`crate::flow_table`] (bounds, expiry).

use super::io::{ReadError, read_exact_by};
use crate::flow_table::{FlowTable, Lookup};
use crate::tcpinfo;
use bloatlab_wire::flow_query::{
    FlowQuery, FlowQueryRepr, FlowReply, FlowReplyRepr, FlowStatus, REPLY_LEN, query_bytes_needed,
};
use bloatlab_wire::permit_key::KeyCheck;
use bloatlab_wire::{SenderSummary, WireError};
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The server's table, shared by its connection threads.
pub type SharedFlowTable = Arc<Mutex<FlowTable>>;

/// How long a query waits for a flow that is still running: the server's
/// sender notices the client's RST or close within an RTT, but its thread
/// may be a moment behind the client's query.
pub const RUNNING_WAIT: Duration = Duration::from_secs(2);
/// How long a client waits for the whole answer.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(4);

fn lock(t: &SharedFlowTable) -> MutexGuard<'_, FlowTable> {
    // A thread that panicked while holding the lock left a consistent table
    // (every method finishes its bookkeeping before returning).
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running flow's entry: records the sending socket's final `TCP_INFO`
/// under the flow id on [`FlowGuard::finish`], or when dropped (every exit
/// path, errors included), from its own handle on the socket.
#[derive(Debug)]
pub struct FlowGuard {
    table: SharedFlowTable,
    id: u64,
    sock: Option<TcpStream>,
}

impl FlowGuard {
    /// Registers flow `id` from `peer` as running. `None` when the table
    /// refuses it (logged) or the socket cannot be shared.
    pub fn start(
        table: &SharedFlowTable,
        id: u64,
        peer: IpAddr,
        sock: &TcpStream,
    ) -> Option<FlowGuard> {
        let sock = sock.try_clone().ok()?;
        if let Err(e) = lock(table).start(Instant::now(), id, peer) {
            tracing::debug!("flow {id:#x} from {peer} not recorded: {e}");
            return None;
        }
        Some(FlowGuard {
            table: Arc::clone(table),
            id,
            sock: Some(sock),
        })
    }

    /// The sender is done: keep its `TCP_INFO` now.
    pub fn finish(&mut self) {
        let Some(sock) = self.sock.take() else {
            return;
        };
        let summary = tcpinfo::sender_summary(&sock).ok();
        lock(&self.table).finish(Instant::now(), self.id, summary);
    }
}

impl Drop for FlowGuard {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Why a query connection got no answer (server side, for the log).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("flow query: {0}")]
    Read(#[from] ReadError),
    #[error("malformed flow query: {0}")]
    Wire(#[from] WireError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Serves one query connection whose first 4 bytes (`first`, the query
/// magic) were already read: reads the rest by `deadline`, checks the
/// permit key, waits up to [`RUNNING_WAIT`] for a running flow, answers
/// and returns the status sent.
pub fn answer(
    s: &mut TcpStream,
    first: Vec<u8>,
    peer: IpAddr,
    table: &SharedFlowTable,
    permit_key: Option<&str>,
    deadline: Instant,
) -> Result<FlowStatus, AnswerError> {
    let mut buf = first;
    loop {
        let more = query_bytes_needed(&buf)?;
        if more == 0 {
            break;
        }
        let at = buf.len();
        buf.resize(at + more, 0);
        read_exact_by(s, &mut buf[at..], deadline)?;
    }
    let q = FlowQueryRepr::parse(&FlowQuery::new_unchecked(&buf[..]))?;
    let allowed = KeyCheck::verdict(q.key, permit_key.map(str::as_bytes)) == KeyCheck::Accepted;
    let (status, summary) = if allowed {
        wait_for(table, q.flow_id, peer)
    } else {
        (FlowStatus::Refused, None)
    };
    let reply = FlowReplyRepr {
        flow_id: q.flow_id,
        status,
        summary,
    };
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(&reply.to_bytes())?;
    Ok(status)
}

fn wait_for(table: &SharedFlowTable, id: u64, peer: IpAddr) -> (FlowStatus, Option<SenderSummary>) {
    let until = Instant::now() + RUNNING_WAIT;
    loop {
        match lock(table).take(Instant::now(), id, peer) {
            Lookup::Found(s) => return (FlowStatus::Found, Some(s)),
            Lookup::Unknown => return (FlowStatus::Unknown, None),
            Lookup::Running if Instant::now() >= until => return (FlowStatus::Running, None),
            Lookup::Running => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Why a client's query brought no summary.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("connecting: {0}")]
    Connect(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no answer: {0}")]
    Read(#[from] ReadError),
    #[error("unreadable answer: {0}")]
    Wire(#[from] WireError),
    #[error("the answer is about another flow")]
    OtherFlow,
    #[error("the server {0}")]
    Status(&'static str),
}

/// Asks the bloatlab server at `server` for flow `id`'s sender summary,
/// from `local` (the flow's own local address, so the server sees the same
/// source), within [`QUERY_TIMEOUT`].
pub fn query(
    server: SocketAddr,
    local: IpAddr,
    id: u64,
    key: Option<&str>,
) -> Result<SenderSummary, QueryError> {
    let deadline = Instant::now() + QUERY_TIMEOUT;
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    sock.bind(&SocketAddr::new(local, 0).into())
        .map_err(QueryError::Connect)?;
    sock.connect_timeout(&server.into(), Duration::from_secs(2))
        .map_err(QueryError::Connect)?;
    let mut s: TcpStream = sock.into();
    let bytes = FlowQueryRepr {
        flow_id: id,
        key: key.map(str::as_bytes),
    }
    .to_vec()?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(&bytes)?;
    let mut buf = [0u8; REPLY_LEN];
    read_exact_by(&mut s, &mut buf, deadline)?;
    let r = FlowReplyRepr::parse(&FlowReply::new_unchecked(&buf[..]))?;
    if r.flow_id != id {
        return Err(QueryError::OtherFlow);
    }
    match (r.status, r.summary) {
        (FlowStatus::Found, Some(s)) => Ok(s),
        (FlowStatus::Found, None) | (FlowStatus::Unknown, _) => {
            Err(QueryError::Status("does not know the flow"))
        }
        (FlowStatus::Refused, _) => Err(QueryError::Status("refused the query (permit key)")),
        (FlowStatus::Running, _) => Err(QueryError::Status("still had the flow running")),
    }
}

/// A random nonzero flow id (`getrandom`; the OS-seeded hasher if that fails).
pub fn new_flow_id() -> u64 {
    let mut b = [0u8; 8];
    let id = if bloatlab_os::fdio::getrandom(&mut b).ok() == Some(8) {
        u64::from_ne_bytes(b)
    } else {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(bloatlab_os::clock::realtime_now().as_nanos());
        h.finish()
    };
    id.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_table::FlowTableLimits;
    use std::net::TcpListener;

    /// A one-connection server answering with `answer`.
    fn serve_once(table: SharedFlowTable, key: Option<&'static str>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, peer) = l.accept().unwrap();
            let mut first = vec![0u8; 4];
            let dl = Instant::now() + Duration::from_secs(4);
            read_exact_by(&mut s, &mut first, dl).unwrap();
            let _ = answer(&mut s, first, peer.ip(), &table, key, dl);
        });
        addr
    }

    #[test]
    fn a_query_gets_the_recorded_summary_once_and_keys_are_checked() {
        let table: SharedFlowTable =
            Arc::new(Mutex::new(FlowTable::new(FlowTableLimits::default())));
        let lo: IpAddr = [127, 0, 0, 1].into();
        let s = SenderSummary {
            retransmits: 5,
            ..SenderSummary::default()
        };
        {
            let mut t = lock(&table);
            t.start(Instant::now(), 42, lo).unwrap();
            t.finish(Instant::now(), 42, Some(s));
        }
        let got = query(serve_once(Arc::clone(&table), None), lo, 42, None).unwrap();
        assert_eq!(got, s);
        let again = query(serve_once(Arc::clone(&table), None), lo, 42, None);
        assert!(matches!(again, Err(QueryError::Status(_))), "{again:?}");
        // A keyed server answers only a keyed query.
        {
            let mut t = lock(&table);
            t.start(Instant::now(), 43, lo).unwrap();
            t.finish(Instant::now(), 43, Some(s));
        }
        let keyed = Some("abcd1234");
        let refused = query(serve_once(Arc::clone(&table), keyed), lo, 43, None);
        assert!(
            matches!(refused, Err(QueryError::Status(m)) if m.contains("permit key")),
            "{refused:?}"
        );
        let ok = query(serve_once(Arc::clone(&table), keyed), lo, 43, keyed).unwrap();
        assert_eq!(ok, s);
    }

    #[test]
    fn a_peer_that_closes_or_is_not_bloatlab_gives_an_error_not_a_hang() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            // An old server: reads the query as a bad header and closes.
            let (s, _) = l.accept().unwrap();
            drop(s);
        });
        let r = query(addr, [127, 0, 0, 1].into(), 1, None);
        assert!(r.is_err(), "{r:?}");
    }
}
