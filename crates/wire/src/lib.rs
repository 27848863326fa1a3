//! memwire's packet format, and nothing else.
//!
//! Owns: the byte layout of every datagram memwire sends: the versioned
//! little-endian [`header`], the typed operation views in [`op`] that sit at the
//! start of a reassembled message, and the layout of the optional trailer (a
//! MAC, or a CRC32C checksum that this crate computes).
//! [`mcast`] owns the payload of the packets of an IP multicast transfer.
//! Each type comes as a checked view over `&[u8]` (`*::new_checked`) plus a
//! validated representation (`*Repr::parse` / `emit` / `buffer_len`), in the
//! style of smoltcp's `wire` module. Operations are emitted header-only
//! ([`OpRepr::emit_header`]) so that a body is never copied next to its header.
//!
//! Must not: do I/O, read a clock, allocate on the parse path, or panic on any
//! input. Decoding any byte string returns a value or a typed [`Error`]; this is
//! property-tested and fuzzed (`fuzz/`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod header;
pub mod mcast;
pub mod op;

pub use error::{Error, Result};
pub use header::{
    check_preamble, checksum_matches, packet_checksum, packet_checksum_parts, peek_packet_type, Flags, Header,
    HeaderRepr, PacketType, CHECKSUM_LEN, HEADER_LEN, MAC_LEN, MAGIC, VERSION,
};
pub use op::{OpCode, OpRepr};
