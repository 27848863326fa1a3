//! Parse errors. Each variant is a distinct drop reason the endpoint counts.
//!
//! Owns: the one error type of the crate. Must not: carry data from the
//! rejected bytes (no allocation, nothing an attacker controls reaches a log)
//! or say what the endpoint does about it.

/// Why a byte string is not a valid memwire packet or operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// Shorter than the fixed part of the header or operation it claims to be.
    Truncated,
    /// Magic number is not memwire's: not our packet at all.
    BadMagic,
    /// A memwire packet of a protocol version this build does not speak.
    BadVersion,
    /// Packet type, operation code or enumerated field has an unknown value.
    UnknownType,
    /// A length field disagrees with the bytes present, or exceeds its limit.
    BadLength,
    /// A field combination that no sender produces (e.g. reserved bits set).
    Malformed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let text = match self {
            Error::Truncated => "packet truncated",
            Error::BadMagic => "bad magic number",
            Error::BadVersion => "unsupported protocol version",
            Error::UnknownType => "unknown packet or operation type",
            Error::BadLength => "length field inconsistent with packet",
            Error::Malformed => "malformed field combination",
        };
        f.write_str(text)
    }
}

impl std::error::Error for Error {}

/// Result alias for this crate.
pub type Result<T> = core::result::Result<T, Error>;
