//! Multicast segments at the packet level: `encode_mcast` builds them like
//! every packet of the job (job id, epoch, MAC) and `accept_mcast` checks
//! them like every packet: another job's segment on the same group, a
//! forged or bit-flipped one, one for another member or from a stale
//! incarnation is rejected and counted, never accepted. A segment is never
//! mistaken for connection traffic either.

use mw_proto::time::Instant;
use mw_proto::{AuthKey, Config, DropReason, Endpoint};
use mw_wire::mcast::McastData;

const JOB_KEY: [u8; 16] = *b"memwire-mcast-k!";

fn config(auth: bool) -> Config {
    Config { auth: auth.then(|| AuthKey::from_job_key(&JOB_KEY)), ..Config::default() }
}

fn endpoint(cfg: Config, key: &[u8; 16], rank: u32, epoch: u32) -> Endpoint {
    Endpoint::new(cfg, mw_proto::job_id_from_key(key), rank, epoch, 3)
}

fn segment(data: &[u8]) -> McastData<'_> {
    McastData { team: 0xabc, transfer: 5, total: 1000, offset: 100, data }
}

fn encode(ep: &mut Endpoint, to: Option<u32>, data: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; ep.config().max_datagram];
    let len = ep.encode_mcast(to, 1, &segment(data), &mut buf).unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn segments_round_trip_with_and_without_authentication() {
    for auth in [false, true] {
        let mut root = endpoint(config(auth), &JOB_KEY, 0, 10);
        let mut member = endpoint(config(auth), &JOB_KEY, 1, 11);
        let packet = encode(&mut root, None, b"payload");
        let seg = member.accept_mcast(&packet).unwrap();
        assert_eq!((seg.from, seg.index, seg.to_group), (0, 1, true));
        assert_eq!(seg.data, segment(b"payload"));
        let mut other = endpoint(config(auth), &JOB_KEY, 2, 12);
        assert!(!other.accept_mcast(&encode(&mut root, Some(2), b"r")).unwrap().to_group, "a repair");
        let repair = encode(&mut root, Some(2), b"x");
        assert_eq!(member.accept_mcast(&repair).unwrap_err(), DropReason::WrongTarget, "a repair for rank 2");
        assert_eq!(root.stats().mcast_sent, 3);
        assert_eq!(member.stats().mcast_received, 1);
        assert_eq!(member.stats().drops.wrong_target, 1);
        // Never taken for connection traffic.
        let delivered = member.handle_datagram(Instant::ZERO, &packet, &mut |_, _| panic!("delivered"));
        assert!(delivered.is_err());
        assert_eq!(member.peer_epoch(0), None, "no connection state touched");
    }
}

#[test]
fn segment_size_fills_the_datagram() {
    for auth in [false, true] {
        let mut root = endpoint(config(auth), &JOB_KEY, 0, 10);
        let max = root.mcast_segment_size();
        let full = vec![7u8; max];
        let seg = McastData { team: 1, transfer: 1, total: max as u64, offset: 0, data: &full };
        let mut buf = vec![0u8; root.config().max_datagram];
        assert_eq!(root.encode_mcast(None, 0, &seg, &mut buf), Ok(root.config().max_datagram));
        let over = vec![7u8; max + 1];
        let seg = McastData { team: 1, transfer: 1, total: over.len() as u64, offset: 0, data: &over };
        assert!(root.encode_mcast(None, 0, &seg, &mut buf).is_err());
    }
}

#[test]
fn foreign_forged_and_stale_segments_are_rejected() {
    let mut root = endpoint(config(true), &JOB_KEY, 0, 10);
    let mut member = endpoint(config(true), &JOB_KEY, 1, 11);
    // Another job on the same group address and port: a different key.
    let other_key = *b"some-other-job!!";
    let mut stranger =
        endpoint(Config { auth: Some(AuthKey::from_job_key(&other_key)), ..Config::default() }, &other_key, 0, 10);
    let foreign = encode(&mut stranger, None, b"not yours");
    assert_eq!(member.accept_mcast(&foreign).unwrap_err(), DropReason::WrongJob);
    // Same job id but no key (a rank that does not authenticate).
    let mut keyless = endpoint(config(false), &JOB_KEY, 0, 10);
    assert_eq!(member.accept_mcast(&encode(&mut keyless, None, b"x")).unwrap_err(), DropReason::BadMac);
    // Every bit flip of a genuine segment is caught.
    let good = encode(&mut root, None, b"genuine bytes");
    for bit in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(member.accept_mcast(&bad).is_err(), "flip of bit {bit} accepted");
    }
    // Learn the root's epoch over the connection, then a segment from an
    // older incarnation of it is stale.
    let mut buf = vec![0u8; 2048];
    root.submit(Instant::ZERO, 1, &[b"hello"]).unwrap();
    let t = root.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    member.handle_datagram(Instant::ZERO, &buf[..t.len], &mut |_, _| {}).unwrap();
    assert_eq!(member.peer_epoch(0), Some(10));
    let mut old_root = endpoint(config(true), &JOB_KEY, 0, 9);
    assert_eq!(member.accept_mcast(&encode(&mut old_root, None, b"x")).unwrap_err(), DropReason::StaleEpoch);
    assert!(member.accept_mcast(&good).is_ok());
    // From ourselves (our own multicast looped back) or a rank outside the job.
    let mut me_too = endpoint(config(true), &JOB_KEY, 1, 11);
    assert_eq!(member.accept_mcast(&encode(&mut me_too, None, b"x")).unwrap_err(), DropReason::UnknownPeer);
    assert_eq!(member.accept_mcast(&[0u8; 10]).unwrap_err(), DropReason::Malformed(mw_wire::Error::Truncated));
    assert!(member.stats().drops.total() > 8 * good.len() as u64);
}
