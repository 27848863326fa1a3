//! The decode property shared by the fuzz target (`fuzz/fuzz_targets/decode.rs`),
//! the seed-corpus test and the proptests: decoding any bytes never panics,
//! and whatever decodes re-emits to the very same bytes and re-parses equal.

use mw_wire::mcast::McastData;
use mw_wire::{HeaderRepr, OpRepr, PacketType, HEADER_LEN};

/// Checks `data` as a whole packet (and then its payload as an operation),
/// and on its own as an operation message.
pub fn check(data: &[u8]) {
    if let Ok((header, payload)) = HeaderRepr::parse_packet(data) {
        assert_eq!(header.buffer_len(), data.len());
        let mut again = vec![0u8; header.buffer_len()];
        header.emit_into(&mut again);
        again[HEADER_LEN..].copy_from_slice(&data[HEADER_LEN..]);
        assert_eq!(again, data, "header re-emits differently");
        let (reparsed, payload2) = HeaderRepr::parse_packet(&again).expect("re-emitted packet parses");
        assert_eq!(reparsed, header);
        assert_eq!(payload2, payload);
        let _ = header.to_string();
        if header.packet_type == PacketType::Mcast {
            check_mcast(payload);
        }
        check_op(payload);
    }
    check_op(data);
}

fn check_mcast(payload: &[u8]) {
    let Ok(segment) = McastData::parse(payload) else { return };
    assert!(segment.offset + segment.data.len() as u64 <= segment.total);
    let mut again = vec![0u8; segment.buffer_len()];
    assert_eq!(segment.emit(&mut again), payload.len());
    assert_eq!(again, payload, "mcast segment re-emits differently");
    let _ = segment.to_string();
}

fn check_op(msg: &[u8]) {
    let Ok(op) = OpRepr::parse(msg) else { return };
    assert_eq!(op.buffer_len(), msg.len());
    let mut whole = vec![0u8; op.header_len()];
    assert_eq!(op.emit_header(&mut whole), op.header_len());
    assert_eq!(&whole[..], &msg[..op.header_len()], "{op}: header re-emits differently");
    whole.extend_from_slice(op.body());
    assert_eq!(whole, msg);
    let again = OpRepr::parse(&whole).expect("re-emitted op parses");
    assert_eq!(again, op);
    let _ = op.to_string();
}
