//! Which datagrams each transport takes as its replies (the pure half of the one receive
//! path), and the receive path itself over loopback.

use super::*;

fn udp(key: Option<&[u8]>) -> UdpTransport {
    UdpTransport {
        socket: UdpSocket::bind("127.0.0.1:0").unwrap(),
        session: 7,
        key: key.map(<[u8]>::to_vec),
    }
}

/// A responder's reply to probe `seq` of session 7, tagged with `key` when given.
fn udp_reply(seq: u64, kind: Kind, key: Option<&[u8]>) -> Vec<u8> {
    let mut r = Repr::request(7, seq, Duration::from_millis(5));
    r.kind = kind;
    r.server_rx = Some(Duration::from_millis(6));
    r.server_tx = Some(Duration::from_millis(7));
    let mut buf = vec![0u8; crate::auth::MIN_LEN];
    r.emit(&mut buf).unwrap();
    if let Some(k) = key {
        assert!(crate::auth::sign(&mut buf, k));
    }
    buf
}

#[test]
fn udp_takes_replies_and_nothing_else() {
    let t = udp(None);
    let r = t.accept(&udp_reply(3, Kind::Reply, None), None).unwrap();
    assert_eq!((r.session, r.seq), (Some(7), 3));
    assert_eq!(r.server_tx, Some(Duration::from_millis(7)));
    // A request (our own, reflected) and garbage are not replies.
    assert!(t.accept(&udp_reply(3, Kind::Request, None), None).is_none());
    assert!(t.accept(b"not a probe", None).is_none());
    assert!(t.accept(&[], None).is_none());
}

#[test]
fn a_keyed_udp_client_takes_only_replies_tagged_with_its_key() {
    let t = udp(Some(b"k1"));
    assert!(
        t.accept(&udp_reply(1, Kind::Reply, Some(b"k1")), None)
            .is_some()
    );
    assert!(
        t.accept(&udp_reply(1, Kind::Reply, Some(b"k2")), None)
            .is_none()
    );
    assert!(t.accept(&udp_reply(1, Kind::Reply, None), None).is_none());
}

#[test]
fn icmp_takes_echo_replies_from_its_target_only() {
    let target: SocketAddr = "[fd00:77::2]:0".parse().unwrap();
    let t = IcmpTransport {
        // accept() never touches the socket; any socket will do.
        socket: Socket::new(Domain::IPV6, Type::DGRAM, None).unwrap(),
        target,
        ident: 0xabcd,
    };
    let mut reply = [0u8; 40];
    assert!(icmp::emit_echo6_request(
        &mut reply,
        0xabcd,
        9,
        Duration::from_millis(5)
    ));
    reply[0] = icmp::ECHO6_REPLY;
    let r = t.accept(&reply, Some(target)).unwrap();
    assert_eq!((r.session, r.seq), (None, 9));
    assert_eq!(r.client_send, Duration::from_millis(5));
    // Another host's echo reply, one with another ident, and our own request.
    let other: SocketAddr = "[fd00:77::3]:0".parse().unwrap();
    assert!(t.accept(&reply, Some(other)).is_none());
    assert!(t.accept(&reply, None).is_none());
    let mut theirs = reply;
    theirs[4] = 0;
    assert!(t.accept(&theirs, Some(target)).is_none());
    let mut request = reply;
    request[0] = icmp::ECHO6_REQUEST;
    assert!(t.accept(&request, Some(target)).is_none());
}

#[test]
fn the_receive_path_stamps_accepted_replies_and_skips_the_rest() {
    let t = udp(None);
    t.socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    sys::enable_rx_timestamps(&t.socket).unwrap();
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = t.socket.local_addr().unwrap();
    let mut buf = vec![0u8; 2048];
    // Nothing came: the timeout is not an error.
    assert!(recv(&t, &mut buf).unwrap().is_none());
    peer.send_to(b"noise", to).unwrap();
    assert!(recv(&t, &mut buf).unwrap().is_none());
    let before = sys::now();
    peer.send_to(&udp_reply(4, Kind::Reply, None), to).unwrap();
    let (r, rx) = recv(&t, &mut buf).unwrap().expect("the reply");
    assert_eq!(r.seq, 4);
    assert!(rx >= before && rx <= sys::now(), "{rx:?} not in the call");
}
