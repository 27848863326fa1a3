//! What a message that does not parse still says about who waits for it.
//!
//! Owns: [`Unparsed`] and [`Unparsed::of`]: for bytes [`OpRepr::parse`]
//! rejected, which request of the sender (or of the receiver, for a reply)
//! they name, read from the fields every layout keeps in place (the opcode
//! at byte 0 and `req` at bytes 4..8, see the module layout in `op`; a
//! rendezvous RTS's `sender_req` at 24..28). With it the receiver answers a
//! refusal instead of dropping the message unseen, so the sender's request
//! fails rather than completing as if it had happened (or never completing).
//!
//! Must not: decide the answer's status or send anything (mw-core's target
//! does), or trust any other field of the rejected bytes.

use super::bytes::get32;
use super::{OpCode, OpRepr};

/// Bytes 4..8 of every operation header: the request id (the context or an
/// amount in the few ops without one).
const REQ: core::ops::Range<usize> = 4..8;
/// [`RndvRts`](super::RndvRts)'s `sender_req`.
const RTS_SENDER_REQ: core::ops::Range<usize> = 24..28;

/// What a rejected message names, and so how it can be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unparsed {
    /// A request whose sender waits for an [`OpStatus`](super::OpStatus)
    /// (or any error reply) under `req`: every put kind, atomics, FIFO
    /// pushes, active-message requests, and opcodes this build does not
    /// know (`opcode` is then `None`; the layout still puts `req` at 4..8).
    Request {
        /// The opcode byte, if known.
        opcode: Option<OpCode>,
        /// The sender's request id (nonzero).
        req: u32,
    },
    /// A get request (plain or strided): answered with an error
    /// [`GetResponse`](super::GetResponse), since the sender counts get
    /// answers per peer.
    Get {
        /// The sender's request id (nonzero).
        req: u32,
    },
    /// A rendezvous ready-to-send: answered with a [`RndvDone`](super::RndvDone)
    /// carrying an error, which also releases the sender's exposed buffer.
    Rendezvous {
        /// The sender's request id, echoed in the `RndvDone`.
        sender_req: u32,
    },
    /// A reply to the receiver's own request `req`: never answered (a reply
    /// to a reply could loop), but the receiver fails that request.
    Reply {
        /// Which reply it claims to be.
        opcode: OpCode,
        /// The receiver's request id (nonzero).
        req: u32,
    },
    /// Names no request: shorter than its `req` field, `req` zero (no reply
    /// wanted), or an op without one (eager messages, credits, multicast
    /// feedback). Only counting it is possible.
    Anonymous,
}

impl Unparsed {
    /// Reads what `msg`, which [`OpRepr::parse`] rejected, names. Never
    /// panics; looks only at the opcode and the request field.
    pub fn of(msg: &[u8]) -> Unparsed {
        let Some(&code) = msg.first() else {
            return Unparsed::Anonymous;
        };
        let opcode = OpCode::from_u8(code).ok();
        let field = match opcode {
            Some(OpCode::RndvRts) => RTS_SENDER_REQ,
            _ => REQ,
        };
        let req = match msg.get(field.clone()) {
            Some(_) => get32(msg, field),
            None => return Unparsed::Anonymous,
        };
        if req == 0 {
            return Unparsed::Anonymous;
        }
        match opcode {
            None => Unparsed::Request { opcode: None, req },
            Some(op) => match op {
                OpCode::Put
                | OpCode::PutInline
                | OpCode::AtomicRequest
                | OpCode::PutSignal
                | OpCode::PutStrided
                | OpCode::PutIov
                | OpCode::PutMasked
                | OpCode::RegisterPut
                | OpCode::AmRequest
                | OpCode::FifoPush => Unparsed::Request { opcode: Some(op), req },
                OpCode::GetRequest | OpCode::GetStridedRequest => Unparsed::Get { req },
                OpCode::RndvRts => Unparsed::Rendezvous { sender_req: req },
                OpCode::GetResponse
                | OpCode::AtomicResponse
                | OpCode::OpStatus
                | OpCode::AmReply
                | OpCode::RndvDone => Unparsed::Reply { opcode: op, req },
                OpCode::Eager | OpCode::Credit | OpCode::McastFeedback => Unparsed::Anonymous,
            },
        }
    }

    /// [`Unparsed::of`] for any message: `None` when `msg` parses (nothing
    /// was refused).
    pub fn check(msg: &[u8]) -> Option<Unparsed> {
        OpRepr::parse(msg).is_err().then(|| Unparsed::of(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{self, AtomicOp, AtomicWidth};

    fn emitted(repr: OpRepr<'_>) -> Vec<u8> {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf);
        buf
    }

    #[test]
    fn a_rejected_message_names_the_request_its_layout_puts_at_bytes_4_to_8() {
        let mut atomic = emitted(OpRepr::AtomicRequest(op::AtomicRequest {
            req: 77,
            key: 1,
            offset: 8,
            op: AtomicOp::Add,
            width: AtomicWidth::U64,
            fetch: false,
            operand: 1,
            compare: 0,
        }));
        assert_eq!(Unparsed::check(&atomic), None, "a valid message is not refused");
        atomic[32] = 7; // a compare value on an add
        assert_eq!(Unparsed::check(&atomic), Some(Unparsed::Request { opcode: Some(OpCode::AtomicRequest), req: 77 }));
        let mut get = emitted(OpRepr::GetRequest(op::GetRequest { req: 5, key: 1, offset: 0, len: 8 }));
        get.push(0);
        assert_eq!(Unparsed::check(&get), Some(Unparsed::Get { req: 5 }));
        let mut rts = emitted(OpRepr::RndvRts(op::RndvRts {
            context: 1,
            tag: 2,
            total_len: 3,
            sender_req: 9,
            key: 4,
            offset: 5,
        }));
        rts[30] = 1;
        assert_eq!(Unparsed::check(&rts), Some(Unparsed::Rendezvous { sender_req: 9 }));
        let mut status = emitted(OpRepr::OpStatus(op::OpStatus { req: 3, status: op::Status::Ok }));
        status[1] = 0xee;
        assert_eq!(Unparsed::of(&status), Unparsed::Reply { opcode: OpCode::OpStatus, req: 3 });
        assert_eq!(Unparsed::of(&[0xfe, 0, 0, 0, 4, 0, 0, 0]), Unparsed::Request { opcode: None, req: 4 });
        assert_eq!(Unparsed::of(&[1, 0, 0, 0, 4, 0, 0]), Unparsed::Anonymous, "too short for req");
        assert_eq!(Unparsed::of(&[1, 1, 0, 0, 0, 0, 0, 0]), Unparsed::Anonymous, "req 0 wants no reply");
        assert_eq!(Unparsed::of(&[16, 1, 0, 0, 4, 0, 0, 0]), Unparsed::Anonymous, "an eager message has no req");
        assert_eq!(Unparsed::of(&[]), Unparsed::Anonymous);
    }
}
