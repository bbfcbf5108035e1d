//! Keyed probes: an HMAC-SHA256 tag (RFC 2104, truncated to 128 bits as
//! RFC 4868 does for IPsec) over the 80-byte probe header, so a responder
//! started with a key answers only clients that hold it, and a client with a
//! key accepts only replies from a responder that holds it (irtt has the same
//! idea with its HMAC option).
//!
//! Layout: flag [`FLAG_AUTH`] set, bytes 80..96 hold the tag of bytes 0..80
//! (the tag covers the flags, session, sequence number and timestamps). A
//! keyed datagram is therefore at least [`MIN_LEN`] bytes. Replay of a
//! captured request makes the responder answer the replayer with a datagram
//! of the same size: no amplification, and the key is never revealed.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::packet::HEADER_LEN;

/// Flag bit: bytes 80..96 hold an HMAC-SHA256-128 tag of bytes 0..80.
pub const FLAG_AUTH: u8 = 0x02;
/// Tag length (bytes).
pub const TAG_LEN: usize = 16;
/// The smallest keyed datagram.
pub const MIN_LEN: usize = HEADER_LEN + TAG_LEN;
/// Offset of the flags byte.
const FLAGS: usize = 5;

fn tag(key: &[u8], header: &[u8]) -> [u8; TAG_LEN] {
    // new_from_slice accepts keys of any length (HMAC hashes long keys).
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(header);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; TAG_LEN];
    out.copy_from_slice(&full[..TAG_LEN]);
    out
}

/// Sets [`FLAG_AUTH`] and writes the tag. `false` (nothing written) if the
/// datagram is shorter than [`MIN_LEN`].
pub fn sign(datagram: &mut [u8], key: &[u8]) -> bool {
    if datagram.len() < MIN_LEN {
        return false;
    }
    datagram[FLAGS] |= FLAG_AUTH;
    let t = tag(key, &datagram[..HEADER_LEN]);
    datagram[HEADER_LEN..MIN_LEN].copy_from_slice(&t);
    true
}

/// True if the datagram carries [`FLAG_AUTH`] and a valid tag for `key`. The
/// comparison is constant-time (`Mac::verify_truncated_left`).
pub fn verify(datagram: &[u8], key: &[u8]) -> bool {
    if datagram.len() < MIN_LEN || datagram[FLAGS] & FLAG_AUTH == 0 {
        return false;
    }
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return false;
    };
    mac.update(&datagram[..HEADER_LEN]);
    mac.verify_truncated_left(&datagram[HEADER_LEN..MIN_LEN])
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Repr;
    use std::time::Duration;

    fn request(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        Repr::request(7, 3, Duration::from_secs(5))
            .emit(&mut b)
            .unwrap();
        b
    }

    #[test]
    fn signed_requests_verify_only_with_their_key() {
        let mut b = request(96);
        assert!(!verify(&b, b"k1k1"), "unsigned");
        assert!(sign(&mut b, b"k1k1"));
        assert!(verify(&b, b"k1k1"));
        assert!(!verify(&b, b"k2k2"));
        // Any change to the header breaks the tag.
        let mut t = b.clone();
        t[31] ^= 1;
        assert!(!verify(&t, b"k1k1"));
        // The flag is part of the tagged bytes and must stay set.
        let mut f = b.clone();
        f[FLAGS] &= !FLAG_AUTH;
        assert!(!verify(&f, b"k1k1"));
        // A parsed signed request is still a request.
        assert_eq!(Repr::parse_bytes(&b).unwrap().seq, 3);
    }

    #[test]
    fn short_datagrams_cannot_be_signed() {
        let mut b = request(80);
        assert!(!sign(&mut b, b"key!"));
        assert!(!verify(&b, b"key!"));
    }

    #[test]
    fn tag_matches_rfc_4231_test_case_2_truncated() {
        // RFC 4231 4.3: key "Jefe", data "what do ya want for nothing?".
        let t = tag(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            t,
            [
                0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95,
                0x75, 0xc7
            ]
        );
    }
}
