//! Regions: memory made remotely accessible, and the protection checks every
//! incoming operation passes before it touches a byte.
//!
//! Owns: the table from [`RegionKey`] to memory, access rights, optional
//! arrival log; the address registers (Cenju-4) that point into regions; the
//! bounds check ([`checked_range`]) that is overflow-safe. Must not: send
//! packets or know about peers; the endpoint asks, this module answers
//! `Ok(range)` or a [`Status`] to send back.

mod raw;

#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use raw::AlignedBuf;
pub(crate) use raw::{OwnedMem, PeerWindow, RawMem};

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use mw_wire::op::Status;

/// Rights a region grants to remote operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access(u8);

impl Access {
    /// Remote reads (get, get_strided, atomic load).
    pub const READ: Access = Access(1);
    /// Remote writes (put and its variants, atomic store).
    pub const WRITE: Access = Access(2);
    /// Remote atomics (read-modify-write).
    pub const ATOMIC: Access = Access(4);
    /// Read and write.
    pub const READ_WRITE: Access = Access(3);
    /// Everything.
    pub const ALL: Access = Access(7);
    /// Nothing (the owner only reads it locally).
    pub const NONE: Access = Access(0);

    /// Whether every right in `other` is granted.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
    /// Raw bits (for the C API).
    pub const fn bits(self) -> u8 {
        self.0
    }
    /// From raw bits; unknown bits are an error.
    pub fn from_bits(bits: u8) -> Option<Access> {
        (bits & !7 == 0).then_some(Access(bits))
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// The name of a region on the wire: random, so that a key cannot be guessed
/// from another (a counter would let one rank probe another's regions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionKey(pub u64);

/// The checked byte range `offset..offset+len` inside a region of `region_len`
/// bytes, or `OutOfBounds`. Overflow-safe for any u64 inputs.
pub fn checked_range(offset: u64, len: u64, region_len: usize) -> Result<(usize, usize), Status> {
    let end = offset.checked_add(len).ok_or(Status::OutOfBounds)?;
    if end > region_len as u64 {
        return Err(Status::OutOfBounds);
    }
    // Both fit in usize because end <= region_len.
    Ok((offset as usize, len as usize))
}

/// What kind of remote operation landed, as recorded in an arrival log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalKind {
    /// A put (any contiguous form).
    Put,
    /// The data part of a put_signal.
    PutSignal,
    /// The signal word of a put_signal.
    Signal,
    /// A strided put.
    PutStrided,
    /// A vectored put.
    PutIov,
    /// A masked put.
    PutMasked,
    /// A put through an address register.
    RegisterPut,
    /// An atomic operation.
    Atomic,
    /// A get (read).
    Get,
}

/// One entry of a region's arrival log (Cenju-4's log buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Operation kind.
    pub kind: ArrivalKind,
    /// Initiating rank.
    pub source: u32,
    /// First byte touched.
    pub offset: u64,
    /// Bytes touched (extent for strided forms).
    pub len: u64,
}

#[derive(Debug)]
struct ArrivalLog {
    entries: VecDeque<Arrival>,
    capacity: usize,
    overflowed: u64,
}

/// One registered region.
#[derive(Debug)]
pub struct RegionEntry {
    /// The memory.
    pub mem: RawMem,
    /// Rights granted to remote operations.
    pub access: Access,
    log: Option<ArrivalLog>,
}

impl RegionEntry {
    /// Checks `need` rights and the range; the common gate of every operation.
    pub fn check(&self, need: Access, offset: u64, len: u64) -> Result<(usize, usize), Status> {
        if !self.access.contains(need) {
            return Err(Status::NoPermission);
        }
        checked_range(offset, len, self.mem.len())
    }

    /// Records an arrival if this region keeps a log.
    pub fn log(&mut self, arrival: Arrival) {
        if let Some(log) = &mut self.log {
            if log.entries.len() == log.capacity {
                // Keep the newest: the owner learns how many it missed.
                log.entries.pop_front();
                log.overflowed += 1;
            }
            log.entries.push_back(arrival);
        }
    }
}

/// Where an address register points (Cenju-4): a region and a window in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterTarget {
    /// Region the register lands in.
    pub key: RegionKey,
    /// Offset of the landing window.
    pub offset: u64,
    /// Size of the landing window; a longer put is rejected.
    pub len: u64,
}

/// The hasher of tables keyed by region keys. Keys are random 64-bit
/// numbers, so one multiply spreads them well enough; SipHash (the std
/// default, built against attacker-chosen keys *inserted* into a table)
/// was ~190 instructions per lookup, and every incoming operation does one
/// to three. Lookups with a forged key only probe, they insert nothing.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing: the high bits (hashbrown's control byte) and
        // the low bits (its bucket index) both depend on every key bit.
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
}

/// A `HashMap` keyed by region keys (or other random 64-bit ids).
pub(crate) type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// All regions and address registers of one endpoint.
#[derive(Debug, Default)]
pub struct RegionTable {
    regions: KeyMap<RegionKey, RegionEntry>,
    registers: HashMap<u16, RegisterTarget>,
}

impl RegionTable {
    /// Adds a region under `key` (the caller picks a fresh random key).
    pub fn insert(&mut self, key: RegionKey, mem: RawMem, access: Access) -> bool {
        if self.regions.contains_key(&key) {
            return false;
        }
        self.regions.insert(key, RegionEntry { mem, access, log: None });
        true
    }

    /// Removes a region; later operations naming it get `BadKey`.
    pub fn remove(&mut self, key: RegionKey) -> bool {
        self.registers.retain(|_, target| target.key != key);
        self.regions.remove(&key).is_some()
    }

    /// The region for `key`, or `BadKey`.
    pub fn get(&self, key: RegionKey) -> Result<&RegionEntry, Status> {
        self.regions.get(&key).ok_or(Status::BadKey)
    }

    /// The region for `key` mutably, or `BadKey`.
    pub fn get_mut(&mut self, key: RegionKey) -> Result<&mut RegionEntry, Status> {
        self.regions.get_mut(&key).ok_or(Status::BadKey)
    }

    /// Turns on the arrival log of a region, keeping the newest `capacity` entries.
    pub fn enable_log(&mut self, key: RegionKey, capacity: usize) -> bool {
        match self.regions.get_mut(&key) {
            Some(entry) => {
                entry.log = Some(ArrivalLog { entries: VecDeque::new(), capacity: capacity.max(1), overflowed: 0 });
                true
            }
            None => false,
        }
    }

    /// Takes the oldest logged arrival of a region.
    pub fn pop_arrival(&mut self, key: RegionKey) -> Option<Arrival> {
        self.regions.get_mut(&key)?.log.as_mut()?.entries.pop_front()
    }

    /// How many arrivals were discarded because the log was full.
    pub fn arrivals_lost(&self, key: RegionKey) -> u64 {
        self.regions.get(&key).and_then(|e| e.log.as_ref()).map_or(0, |log| log.overflowed)
    }

    /// Points address register `register` at a window of a region.
    pub fn set_register(&mut self, register: u16, target: RegisterTarget) -> Result<(), Status> {
        let entry = self.get(target.key)?;
        entry.check(Access::NONE, target.offset, target.len)?;
        self.registers.insert(register, target);
        Ok(())
    }

    /// Clears an address register.
    pub fn clear_register(&mut self, register: u16) {
        self.registers.remove(&register);
    }

    /// Where a register points, or `Unsupported` when it is not set.
    pub fn register(&self, register: u16) -> Result<RegisterTarget, Status> {
        self.registers.get(&register).copied().ok_or(Status::Unsupported)
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_overflow_safe() {
        assert_eq!(checked_range(0, 16, 16), Ok((0, 16)));
        assert_eq!(checked_range(16, 0, 16), Ok((16, 0)));
        assert_eq!(checked_range(1, 16, 16), Err(Status::OutOfBounds));
        assert_eq!(checked_range(u64::MAX, 2, 16), Err(Status::OutOfBounds));
        assert_eq!(checked_range(2, u64::MAX, 16), Err(Status::OutOfBounds));
        assert_eq!(checked_range(17, 0, 16), Err(Status::OutOfBounds));
    }

    #[test]
    fn rights_and_keys() {
        let buf = AlignedBuf::zeroed(64);
        // SAFETY: the table (and with it every copy of the view) drops before `buf`.
        let mem = unsafe { buf.raw() };
        let mut table = RegionTable::default();
        assert!(table.insert(RegionKey(9), mem, Access::READ));
        assert!(!table.insert(RegionKey(9), mem, Access::READ));
        let entry = table.get(RegionKey(9)).unwrap();
        assert_eq!(entry.check(Access::WRITE, 0, 8), Err(Status::NoPermission));
        assert_eq!(entry.check(Access::READ, 0, 8), Ok((0, 8)));
        assert_eq!(table.get(RegionKey(10)).unwrap_err(), Status::BadKey);
        table.set_register(3, RegisterTarget { key: RegionKey(9), offset: 8, len: 8 }).unwrap();
        assert_eq!(
            table.set_register(4, RegisterTarget { key: RegionKey(9), offset: 60, len: 8 }),
            Err(Status::OutOfBounds)
        );
        assert!(table.remove(RegionKey(9)));
        assert_eq!(table.register(3), Err(Status::Unsupported));
    }

    #[test]
    fn arrival_log_keeps_newest() {
        let buf = AlignedBuf::zeroed(64);
        // SAFETY: the table (and with it every copy of the view) drops before `buf`.
        let mem = unsafe { buf.raw() };
        let mut table = RegionTable::default();
        table.insert(RegionKey(1), mem, Access::ALL);
        table.enable_log(RegionKey(1), 2);
        for offset in 0..3 {
            let arrival = Arrival { kind: ArrivalKind::Put, source: 1, offset, len: 1 };
            table.get_mut(RegionKey(1)).unwrap().log(arrival);
        }
        assert_eq!(table.arrivals_lost(RegionKey(1)), 1);
        assert_eq!(table.pop_arrival(RegionKey(1)).unwrap().offset, 1);
        assert_eq!(table.pop_arrival(RegionKey(1)).unwrap().offset, 2);
        assert!(table.pop_arrival(RegionKey(1)).is_none());
    }
}
