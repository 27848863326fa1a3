//! Putting the protocol's datagrams on the wire.
//!
//! Owns: the choice of send path per datagram size and fault setting, the
//! gathered batch of Ethernet-sized datagrams ([`GatherBatch`]: headers and
//! trailers here, payloads lent in place from the protocol's retransmission
//! buffer, runs to one peer sent as GSO super-datagrams with one
//! `sendmmsg`), and the retry rule for a full socket. Must not: decide what
//! is sent (the protocol does) or keep a lent payload past one batch (the
//! next `&mut` call on the protocol may move its buffer).

use std::net::SocketAddr;

use mw_proto::time::Instant as ProtoInstant;

use crate::endpoint::State;
use crate::stats::CoreStats;

/// Datagrams up to this size are sent in gathered batches
/// ([`State::transmit`]); larger ones (loopback's 65,000 bytes) one
/// gathered `sendmsg` each, where batching saves little.
pub(crate) const BATCH_MAX_DATAGRAM: usize = 16 << 10;

/// Payloads from this size on are sent in place with a gathered `sendmsg`;
/// smaller ones are copied behind their header and sent with `sendto` (the
/// copy costs less than gathering, and keeps the latency path as it was).
const VECTORED_SEND_MIN: usize = 1024;

/// Bytes of one datagram's header and trailer.
const HEAD_SLOT: usize = mw_wire::HEADER_LEN + mw_proto::TRAILER_RESERVE;

/// Most datagrams one batch takes from the protocol (one `sendmmsg`).
const BATCH_DATAGRAMS: usize = mw_transport::udp::SEND_CHUNK;

/// Headers and trailers of one batch of datagrams, and where their
/// payloads are.
#[derive(Debug)]
pub(crate) struct GatherBatch {
    heads: Vec<u8>,
    taken: Vec<mw_proto::GatherTx>,
}

impl GatherBatch {
    pub(crate) fn new() -> GatherBatch {
        GatherBatch { heads: vec![0; HEAD_SLOT * BATCH_DATAGRAMS], taken: Vec::with_capacity(BATCH_DATAGRAMS) }
    }
}

impl State {
    /// Sends every datagram the protocol has ready now.
    pub(crate) fn transmit(&mut self, now: ProtoInstant) -> bool {
        match self.gather {
            Some(_) if self.fault.is_none() => self.transmit_gathered(now),
            _ => self.transmit_each(now),
        }
    }

    /// Ethernet-sized datagrams, a batch at a time: the protocol writes each
    /// one's header and trailer into the batch and lends its payload in
    /// place, and the kernel gathers the pieces (no copy of the payload on
    /// the way), runs to one peer as GSO super-datagrams, so a bulk transfer
    /// costs one system call per ~64 datagrams.
    fn transmit_gathered(&mut self, now: ProtoInstant) -> bool {
        let State { proto, peers, udp, stats, gather, .. } = self;
        let batch = gather.as_mut().expect("transmit_gathered needs the batch");
        let mut worked = false;
        loop {
            batch.taken.clear();
            for slot in batch.heads.chunks_exact_mut(HEAD_SLOT) {
                match proto.poll_transmit_gather(now, slot) {
                    Some(tx) => batch.taken.push(tx),
                    None => break,
                }
            }
            if batch.taken.is_empty() {
                return worked;
            }
            worked = true;
            let proto: &mw_proto::Endpoint = proto;
            let mut list = [(NOWHERE, [&[][..]; 4]); BATCH_DATAGRAMS];
            for ((entry, tx), slot) in list.iter_mut().zip(&batch.taken).zip(batch.heads.chunks_exact(HEAD_SLOT)) {
                let [a, b] = proto.gather_payload(tx);
                let trailer = &slot[tx.head_len..tx.head_len + tx.trailer_len];
                *entry = (peers[tx.peer as usize], [&slot[..tx.head_len], a, b, trailer]);
            }
            let n = batch.taken.len();
            send_all(udp, stats, &list[..n]);
            if n < BATCH_DATAGRAMS {
                return worked;
            }
        }
    }

    /// One datagram per system call: loopback-sized datagrams (the payload
    /// gathered from the retransmission buffer, not copied) and everything
    /// under fault injection.
    fn transmit_each(&mut self, now: ProtoInstant) -> bool {
        let mut worked = false;
        let State { proto, tx_buf, head_buf, peers, fault, udp, stats, .. } = self;
        while let Some(tx) = proto.poll_transmit_parts(now, head_buf) {
            worked = true;
            let dst = peers[tx.peer as usize];
            match fault {
                // DESIGN §3: bulk payloads go from the protocol's stream buffer
                // into the kernel with one gathered sendmsg, not via a copy.
                None if tx.payload_len() >= VECTORED_SEND_MIN => {
                    let _ = send_retrying_with(stats, || udp.send_parts(&tx.slices(), dst));
                }
                None => {
                    let len = tx.copy_to(tx_buf);
                    let _ = send_retrying(udp, stats, &tx_buf[..len], dst);
                }
                Some(fault) => {
                    let len = tx.copy_to(tx_buf);
                    let _ = fault.send(&tx_buf[..len], dst, |bytes, to| {
                        let _ = send_retrying(udp, stats, bytes, to);
                        Ok(())
                    });
                }
            }
        }
        if let Some(fault) = fault {
            // A datagram held back for reordering must not wait forever.
            if !worked {
                let _ = fault.flush(|bytes, to| {
                    let _ = send_retrying(udp, stats, bytes, to);
                    Ok(())
                });
            }
        }
        worked
    }
}

/// Unspecified address, filling unused entries of a batch's list.
const NOWHERE: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// Sends every datagram of `list`, in order. A full socket is transient:
/// wait briefly and go on, as [`send_retrying`] does, rather than leave the
/// rest to a retransmission timeout; a datagram the kernel refuses is
/// counted and skipped (the protocol retransmits it).
fn send_all(udp: &mut mw_transport::udp::UdpTransport, stats: &mut CoreStats, mut list: &[(SocketAddr, [&[u8]; 4])]) {
    let mut stalls = 0;
    while !list.is_empty() {
        match udp.send_gathered(list) {
            Ok(sent) => list = &list[sent..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && stalls < 999 => {
                stalls += 1;
                std::thread::yield_now();
            }
            Err(_) => {
                stats.send_errors += 1;
                list = &list[1..];
            }
        }
    }
}

/// Sends one datagram. A full socket buffer is transient: retry briefly
/// rather than lose the packet (the protocol would recover, but only after a
/// retransmission timeout). Other errors are counted and returned.
pub(crate) fn send_retrying(
    udp: &mut mw_transport::udp::UdpTransport,
    stats: &mut CoreStats,
    packet: &[u8],
    dst: SocketAddr,
) -> std::io::Result<()> {
    send_retrying_with(stats, || udp.send_to(packet, dst))
}

/// [`send_retrying`] for any send attempt.
fn send_retrying_with(stats: &mut CoreStats, mut send: impl FnMut() -> std::io::Result<()>) -> std::io::Result<()> {
    let mut attempt = 0;
    loop {
        match send() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && attempt < 999 => {
                attempt += 1;
                std::thread::yield_now();
            }
            Err(e) => {
                stats.send_errors += 1;
                return Err(e);
            }
        }
    }
}

/// Sends one datagram outside the protocol (a multicast segment) through the
/// fault injector when one is configured, like every other datagram. An
/// error is the kernel's refusal of this datagram itself.
pub(crate) fn send_datagram(
    udp: &mut mw_transport::udp::UdpTransport,
    fault: Option<&mut mw_transport::fault::FaultInjector>,
    stats: &mut CoreStats,
    packet: &[u8],
    dst: SocketAddr,
) -> std::io::Result<()> {
    match fault {
        None => send_retrying(udp, stats, packet, dst),
        Some(fault) => fault.send(packet, dst, |bytes, to| send_retrying(udp, stats, bytes, to)),
    }
}
