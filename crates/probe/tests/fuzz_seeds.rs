//! The committed fuzz seeds for the probe targets (fuzz/make-corpus.py) are
//! what they claim to be: a seed that does not parse would start the fuzzer
//! at the magic words again (issue 11).

use bloatlab_probe::packet::{Kind, Repr};

fn seed(target: &str, name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../../fuzz/corpus/{target}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

#[test]
fn probe_packet_seeds_parse_as_request_and_reply() {
    let req = Repr::parse_bytes(&seed("probe_packet", "seed-00")).unwrap();
    assert_eq!((req.kind, req.session, req.seq), (Kind::Request, 7, 0));
    let rep = Repr::parse_bytes(&seed("probe_packet", "seed-01")).unwrap();
    assert_eq!(
        (rep.kind, rep.rx_count, rep.clock_domain),
        (Kind::Reply, 1, 99)
    );
    assert_eq!(seed("probe_packet", "seed-02").len(), 200);
}

#[test]
fn probe_client_reply_seed_holds_eight_replies_of_session_7() {
    let b = seed("probe_client_reply", "seed-00");
    let replies: Vec<Repr> = b
        .chunks(96)
        .map(|c| Repr::parse_bytes(c).unwrap())
        .collect();
    assert_eq!(replies.len(), 8);
    for (i, r) in replies.iter().enumerate() {
        assert_eq!((r.kind, r.session, r.seq), (Kind::Reply, 7, i as u64));
    }
}
