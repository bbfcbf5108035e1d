//! Return-routability check for UDP tests that make the server send
//! (`-R`, `--full-duplex`): a stateless cookie, as irtt's three-way
//! handshake and DTLS's HelloVerifyRequest (RFC 6347 4.2.1) do.
//!
//! A UDP source address can be forged, so a reverse-test header alone must
//! not start traffic towards it (the server would be a reflector). A
//! bloatlab client's header (BLAB-marked) without a valid cookie gets one
//! [`REPLY_LEN`]-byte reply, and no state is created: 16 zero bytes (id 0,
//! time 0: ignored by any iperf receiver), `BLCK`, and a 16-byte cookie,
//! a keyed hash of the source address and a 10 s time bucket. The client
//! copies the cookie into its datagrams at [`COOKIE_OFFSET`] (past every
//! header layout, in the payload iperf 2 fills with a pattern) and sends
//! again; only a datagram carrying a cookie valid for its own source
//! address, from this bucket or the previous one, starts the server's
//! sender. The reply is smaller than the request, so the check amplifies
//! nothing.
//!
//! The keyed hash is SipHash-1-3 (std's `RandomState`) with a per-process
//! random key: unforgeable without the key for the cookie's 20 s life,
//! and nothing is stored per request.
//!
//! iperf 2 clients do not know the exchange; they are "unverified" and are
//! refused unless the operator opts in with `--unverified-reverse-rate/-time`
//! (off by default since issue 19; docs/security.md, "Amplification").
//! Nor can a bloatlab client whose `-l` is below [`ECHO_MIN_LEN`] carry a
//! cookie: it is treated like an iperf 2 client.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::time::Duration;

/// Where a client puts the cookie in its datagrams.
pub const COOKIE_OFFSET: usize = 160;
/// Marks a cookie, in the reply and in the client's datagrams.
pub const COOKIE_MAGIC: [u8; 4] = *b"BLCK";
/// Cookie bytes.
pub const COOKIE_LEN: usize = 16;
/// Shortest datagram that can carry a cookie.
pub const ECHO_MIN_LEN: usize = COOKIE_OFFSET + COOKIE_MAGIC.len() + COOKIE_LEN;
/// Length of the server's cookie reply.
pub const REPLY_LEN: usize = 16 + COOKIE_MAGIC.len() + COOKIE_LEN;
/// A cookie is valid in the bucket it was made in and the next one.
pub const BUCKET: Duration = Duration::from_secs(10);

/// A cookie.
pub type Cookie = [u8; COOKIE_LEN];

/// The server's cookie maker and checker (sans-IO: `now` is passed in).
#[derive(Debug, Clone)]
pub struct CookieJar {
    key: RandomState,
}

impl Default for CookieJar {
    fn default() -> Self {
        CookieJar {
            key: RandomState::new(),
        }
    }
}

impl CookieJar {
    fn mac(&self, peer: SocketAddr, bucket: u64) -> Cookie {
        let a = self.key.hash_one((0xb1c0_0c1e_u32, peer, bucket));
        let b = self.key.hash_one((0x5eed_c0de_u32, peer, bucket, a));
        let mut c = [0u8; COOKIE_LEN];
        c[..8].copy_from_slice(&a.to_be_bytes());
        c[8..].copy_from_slice(&b.to_be_bytes());
        c
    }

    fn bucket(now: Duration) -> u64 {
        now.as_secs() / BUCKET.as_secs()
    }

    /// The reply datagram carrying `peer`'s cookie at `now`.
    pub fn reply(&self, peer: SocketAddr, now: Duration) -> Vec<u8> {
        let mut out = vec![0u8; REPLY_LEN];
        out[16..20].copy_from_slice(&COOKIE_MAGIC);
        out[20..].copy_from_slice(&self.mac(peer, Self::bucket(now)));
        out
    }

    /// True when `datagram` (from `peer`, at `now`) carries a valid cookie.
    pub fn verify(&self, peer: SocketAddr, now: Duration, datagram: &[u8]) -> bool {
        let Some(c) = carried(datagram) else {
            return false;
        };
        let b = Self::bucket(now);
        // Constant-time enough: the comparison leaks nothing useful when
        // the key never leaves the process and cookies expire in 20 s.
        c == self.mac(peer, b) || (b > 0 && c == self.mac(peer, b - 1))
    }
}

/// The cookie a client's datagram carries at [`COOKIE_OFFSET`], if any.
pub fn carried(datagram: &[u8]) -> Option<Cookie> {
    let m = datagram.get(COOKIE_OFFSET..COOKIE_OFFSET + 4)?;
    if m != COOKIE_MAGIC {
        return None;
    }
    datagram
        .get(COOKIE_OFFSET + 4..ECHO_MIN_LEN)?
        .try_into()
        .ok()
}

/// Client side: the cookie in a server's reply datagram, if it is one.
pub fn from_reply(datagram: &[u8]) -> Option<Cookie> {
    if datagram.len() != REPLY_LEN
        || datagram[..16] != [0u8; 16]
        || datagram[16..20] != COOKIE_MAGIC
    {
        return None;
    }
    datagram[20..].try_into().ok()
}

/// Client side: writes `cookie` into a datagram (template) long enough to
/// carry it; false when it is too short.
pub fn embed(datagram: &mut [u8], cookie: &Cookie) -> bool {
    let Some(slot) = datagram.get_mut(COOKIE_OFFSET..ECHO_MIN_LEN) else {
        return false;
    };
    slot[..4].copy_from_slice(&COOKIE_MAGIC);
    slot[4..].copy_from_slice(cookie);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    #[test]
    fn a_reply_cookie_echoed_from_the_same_address_verifies() {
        let jar = CookieJar::default();
        let now = Duration::from_secs(1_000_000);
        let reply = jar.reply(peer(4000), now);
        assert_eq!(reply.len(), REPLY_LEN);
        let cookie = from_reply(&reply).unwrap();
        let mut d = vec![b'7'; 1470];
        assert!(!jar.verify(peer(4000), now, &d));
        assert!(embed(&mut d, &cookie));
        assert!(jar.verify(peer(4000), now, &d));
        // Next bucket still fine, the one after not.
        assert!(jar.verify(peer(4000), now + BUCKET, &d));
        assert!(!jar.verify(peer(4000), now + BUCKET * 2, &d));
        // Another address (a spoofer who never saw the reply) fails.
        assert!(!jar.verify(peer(4001), now, &d));
        assert!(!jar.verify(SocketAddr::from(([192, 0, 2, 2], 4000)), now, &d));
        // Another server process (another key) fails.
        assert!(!CookieJar::default().verify(peer(4000), now, &d));
    }

    #[test]
    fn short_datagrams_cannot_carry_one_and_data_is_not_a_reply() {
        let mut short = vec![0u8; ECHO_MIN_LEN - 1];
        assert!(!embed(&mut short, &[1; 16]));
        assert_eq!(carried(&short), None);
        let mut data = vec![0u8; REPLY_LEN];
        data[3] = 1; // id 1: a data datagram
        assert_eq!(from_reply(&data), None);
        assert_eq!(from_reply(&[0u8; 16]), None);
    }
}
