//! Regions as C sees them: allocate, register caller memory, allocate
//! symmetrically, exchange keys, free; local access; the arrival log;
//! address registers; waiting on a signal word.
//!
//! Owns: `mw_region`, which keeps a `Region<'static>` borrowing the endpoint
//! (counted, see `endpoint`) and, for registered memory, the caller's
//! promise that the memory outlives the region. Must not: run remote
//! operations (`rma`, `atomic` do).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use mw_core::{Access, ArrivalKind, Cmp, Region, RegionKey};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::status::{guard, mw_status, Failure};
use crate::*;

/// Memory this rank exposes to remote operations, named remotely by its key.
/// Opaque; created by `mw_region_alloc_shared` (alias `mw_region_alloc`),
/// `mw_region_alloc_symmetric` or `mw_region_register`, destroyed by
/// `mw_region_free`.
#[derive(Debug)]
pub struct mw_region {
    /// Always `Some` until dropped; taken first in `drop` so the region
    /// deregisters before the endpoint stops counting it.
    region: Option<Region<'static>>,
    owner: &'static mw_endpoint,
    /// Multicast groups that borrow the region (`mcast`): `mw_region_free`
    /// refuses while any exists.
    pub(crate) groups: AtomicUsize,
}

impl mw_region {
    fn new(owner: &'static mw_endpoint, region: Region<'static>) -> mw_region {
        owner.retain();
        mw_region { region: Some(region), owner, groups: AtomicUsize::new(0) }
    }

    pub(crate) fn get(&self) -> &Region<'static> {
        self.region.as_ref().expect("a region is present until it is dropped")
    }

    pub(crate) fn owner(&self) -> &'static mw_endpoint {
        self.owner
    }
}

impl Drop for mw_region {
    fn drop(&mut self) {
        drop(self.region.take());
        self.owner.release();
    }
}

/// Validates `MW_ACCESS_*` bits.
pub(crate) fn access_from(bits: mw_access) -> Result<Access, Failure> {
    u8::try_from(bits).ok().and_then(Access::from_bits).ok_or(Failure::invalid("unknown MW_ACCESS_* bits"))
}

fn cmp_from(cmp: mw_cmp) -> Result<Cmp, Failure> {
    Ok(match cmp {
        MW_CMP_EQ => Cmp::Eq,
        MW_CMP_NE => Cmp::Ne,
        MW_CMP_GT => Cmp::Gt,
        MW_CMP_GE => Cmp::Ge,
        MW_CMP_LT => Cmp::Lt,
        MW_CMP_LE => Cmp::Le,
        _ => return Err(Failure::invalid("unknown MW_CMP_* value")),
    })
}

fn arrival_kind(kind: ArrivalKind) -> mw_arrival_kind {
    match kind {
        ArrivalKind::Put => MW_ARRIVAL_PUT,
        ArrivalKind::PutSignal => MW_ARRIVAL_PUT_SIGNAL,
        ArrivalKind::Signal => MW_ARRIVAL_SIGNAL,
        ArrivalKind::PutStrided => MW_ARRIVAL_PUT_STRIDED,
        ArrivalKind::PutIov => MW_ARRIVAL_PUT_IOV,
        ArrivalKind::PutMasked => MW_ARRIVAL_PUT_MASKED,
        ArrivalKind::RegisterPut => MW_ARRIVAL_REGISTER_PUT,
        ArrivalKind::Atomic => MW_ARRIVAL_ATOMIC,
        ArrivalKind::Get => MW_ARRIVAL_GET,
    }
}

/// The region behind a C pointer.
///
/// # Safety
/// `region`, if non-NULL, must come from this library and not be freed.
pub(crate) unsafe fn region<'a>(region: *const mw_region) -> Result<&'a mw_region, Failure> {
    // SAFETY: forwarded contract.
    unsafe { ffi::obj(region, "region") }
}

fn too_big(len: usize) -> Result<(), Failure> {
    if len > isize::MAX as usize {
        return Err(Failure::invalid("region length exceeds the address space"));
    }
    Ok(())
}

/// Allocates `len` zeroed bytes, 64-byte aligned, that remote ranks may
/// access with the rights in `access`, and stores the region in `*region`.
/// Same-host peers map it and access it directly. Other ranks need its key
/// (`mw_region_exchange_keys`).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `region` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_alloc_shared(
    ep: *mut mw_endpoint,
    len: usize,
    access: mw_access,
    region: *mut *mut mw_region,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(region, "region")?) };
        let access = access_from(access)?;
        too_big(len)?;
        let r = owner.ep.alloc_shared(len, access)?;
        out.set(ffi::give(mw_region::new(owner, r)));
        Ok(())
    })
}

/// Short name of `mw_region_alloc_shared`; identical in every respect.
///
/// # Safety
/// As `mw_region_alloc_shared`.
#[no_mangle]
pub unsafe extern "C" fn mw_region_alloc(
    ep: *mut mw_endpoint,
    len: usize,
    access: mw_access,
    region: *mut *mut mw_region,
) -> mw_status {
    // SAFETY: forwarded contract.
    unsafe { mw_region_alloc_shared(ep, len, access, region) }
}

/// Collective: every rank allocates `len` zeroed bytes under the same key,
/// so `(rank, key, offset)` names the same place on every rank and no key
/// exchange is needed. Every rank must pass the same `len`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `region` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_alloc_symmetric(
    ep: *mut mw_endpoint,
    len: usize,
    access: mw_access,
    region: *mut *mut mw_region,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(region, "region")?) };
        let access = access_from(access)?;
        too_big(len)?;
        let r = owner.ep.alloc_symmetric(len, access)?;
        out.set(ffi::give(mw_region::new(owner, r)));
        Ok(())
    })
}

/// Registers the caller's memory `addr..addr+len` so remote ranks may access
/// it with the rights in `access`; stores the region in `*region`.
/// The memory must stay valid (not freed, not reused) until
/// `mw_region_free`; remote operations write it directly, so read what
/// peers put only after synchronizing (a completed `mw_wait_until`,
/// `mw_barrier`, or the writer's `mw_flush` followed by a message).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `addr..addr+len` readable and
/// writable until the region is freed; `region` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_register(
    ep: *mut mw_endpoint,
    addr: *mut c_void,
    len: usize,
    access: mw_access,
    region: *mut *mut mw_region,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(region, "region")?) };
        let access = access_from(access)?;
        if addr.is_null() {
            return Err(Failure::null("addr"));
        }
        too_big(len)?;
        // SAFETY: the caller keeps `addr..addr+len` valid until `mw_region_free`,
        // which drops (and so deregisters) the region.
        let r = unsafe { owner.ep.register_raw(addr.cast::<u8>(), len, access) }?;
        out.set(ffi::give(mw_region::new(owner, r)));
        Ok(())
    })
}

/// Deregisters the region, frees its memory if the library allocated it,
/// and sets `*region` to NULL. Later remote operations naming its key fail
/// with `MW_ERR_BAD_KEY`; address registers pointing into it are cleared.
/// A NULL `*region` is a no-op (so freeing twice through the same variable
/// is harmless). A region that a multicast group uses is refused with
/// `MW_ERR_IN_USE` (free the group first).
///
/// # Safety
/// `region` must be NULL or point to the caller's variable holding NULL or a
/// region from this library; no other thread may use the region meanwhile.
#[no_mangle]
pub unsafe extern "C" fn mw_region_free(region: *mut *mut mw_region) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe {
            ffi::take_checked(region, "region", |r: &mw_region| match r.groups.load(Ordering::Acquire) {
                0 => Ok(()),
                _ => Err(Failure::in_use("a multicast group still uses this region; free it first")),
            })
        }?);
        Ok(())
    })
}

/// Stores the region's key (what remote ranks name it by) in `*key`.
///
/// # Safety
/// `region` must be NULL or a live region; `key` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_key(region: *const mw_region, key: *mut mw_key) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::out(key, "key")?) };
        out.set(r.get().key().0);
        Ok(())
    })
}

/// Stores the address of the region's first byte in `*addr` (for
/// registered memory, the address that was registered). The memory may be
/// read and written directly, under the synchronization rule of
/// `mw_region_register`.
///
/// # Safety
/// `region` must be NULL or a live region; `addr` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_ptr(region: *const mw_region, addr: *mut *mut c_void) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::out(addr, "addr")?) };
        out.set(r.get().as_ptr().cast::<c_void>());
        Ok(())
    })
}

/// Stores in `*addr` where `rank`'s region `key` can be reached by plain
/// loads and stores from this process, or NULL when it cannot: the peer
/// is on another host or reached over UDP (`MW_TRANSPORT=udp`), declared
/// down, or the region is registered memory (`mw_region_register`, which
/// same-host peers reach with a kernel copy), or `rank` has no region
/// `key`. For the calling rank itself it is the region's own address.
/// Same-host peers' `mw_region_alloc_*` regions are mapped into this
/// process (the mapping memwire's direct puts and gets use) and stay
/// mapped while the peer keeps the region and the endpoint lives; the
/// pointer must not be used after the peer frees the region. Accesses
/// follow the synchronization rule of `mw_region_register`; atomics on a
/// word others update remotely must be the CPU's atomic instructions
/// (memwire applies those on mapped words too). Region rights bind remote
/// operations only, not accesses through the pointer. A rank outside
/// `0..size` is `MW_ERR_BAD_RANK`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `addr` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_peer_ptr(
    ep: *mut mw_endpoint,
    rank: u32,
    key: mw_key,
    addr: *mut *mut c_void,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, out) = unsafe { (endpoint(ep)?, ffi::out(addr, "addr")?) };
        let ptr = owner.ep.peer_region_ptr(rank, RegionKey(key))?;
        out.set(ptr.map_or(std::ptr::null_mut(), |p| p.as_ptr().cast::<c_void>()));
        Ok(())
    })
}

/// Stores the region's length in bytes in `*len`.
///
/// # Safety
/// `region` must be NULL or a live region; `len` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_len(region: *const mw_region, len: *mut usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::out(len, "len")?) };
        out.set(r.get().len());
        Ok(())
    })
}

/// Copies `len` bytes at `offset` of the region into `out`, consistently
/// with remote writes (the progress engine is held off during the copy).
///
/// # Safety
/// `region` must be NULL or a live region; `out` NULL (only if `len` is 0)
/// or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_read(
    region: *const mw_region,
    offset: u64,
    out: *mut c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::bytes_mut(out, len, "out")?) };
        Ok(r.get().read(offset, out)?)
    })
}

/// Copies `len` bytes from `data` to `offset` of the region, consistently
/// with remote operations.
///
/// # Safety
/// `region` must be NULL or a live region; `data` NULL (only if `len` is 0)
/// or readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_write(
    region: *const mw_region,
    offset: u64,
    data: *const c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, data) = unsafe { (self::region(region)?, ffi::bytes(data, len, "data")?) };
        Ok(r.get().write(offset, data)?)
    })
}

/// Atomically loads the 64-bit word at `offset` (8-byte aligned) of the
/// region into `*value` (acquire ordering: data put before a signal is
/// visible once the signal is).
///
/// # Safety
/// `region` must be NULL or a live region; `value` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_load_u64(region: *const mw_region, offset: u64, value: *mut u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::out(value, "value")?) };
        out.set(r.get().load_u64(offset)?);
        Ok(())
    })
}

/// Atomically stores `value` in the 64-bit word at `offset` (8-byte aligned)
/// of the region (release ordering).
///
/// # Safety
/// `region` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn mw_region_store_u64(region: *const mw_region, offset: u64, value: u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        Ok(unsafe { self::region(region) }?.get().store_u64(offset, value)?)
    })
}

/// Collective: every rank passes its region; `keys[r]` receives rank r's
/// key, for every rank r. `count` must be at least the job size.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `region` NULL or a live region;
/// `keys` NULL or writable for `count` keys.
#[no_mangle]
pub unsafe extern "C" fn mw_region_exchange_keys(
    ep: *mut mw_endpoint,
    region: *const mw_region,
    keys: *mut mw_key,
    count: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, r, keys) = unsafe { (endpoint(ep)?, self::region(region)?, ffi::array_mut(keys, count, "keys")?) };
        if count < owner.ep.size() as usize {
            return Err(Failure::invalid("keys array shorter than the job size"));
        }
        let all = owner.ep.exchange_keys(r.get())?;
        for (slot, key) in keys.iter_mut().zip(all) {
            *slot = key.0;
        }
        Ok(())
    })
}

/// Turns on the region's arrival log: each remote operation that lands in
/// it is recorded (kind, source rank, offset, length); the newest
/// `capacity` entries are kept (`mw_region_arrivals_lost` counts the rest).
///
/// # Safety
/// `region` must be NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn mw_region_enable_arrival_log(region: *const mw_region, capacity: usize) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let r = unsafe { self::region(region) }?;
        if capacity == 0 {
            return Err(Failure::invalid("arrival log capacity must be at least 1"));
        }
        r.get().enable_arrival_log(capacity);
        Ok(())
    })
}

/// Takes the oldest logged arrival: if there is one, stores it in `*arrival`
/// and sets `*found` to true; otherwise sets `*found` to false and leaves
/// `*arrival` unchanged. Call `mw_progress` (or any waiting call) to let
/// new arrivals in.
///
/// # Safety
/// `region` must be NULL or a live region; `arrival` and `found` NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_pop_arrival(
    region: *const mw_region,
    arrival: *mut mw_arrival,
    found: *mut bool,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, arrival, found) =
            unsafe { (self::region(region)?, ffi::out(arrival, "arrival")?, ffi::out(found, "found")?) };
        match r.get().pop_arrival() {
            Some(a) => {
                arrival.set(mw_arrival { kind: arrival_kind(a.kind), source: a.source, offset: a.offset, len: a.len });
                found.set(true);
            }
            None => found.set(false),
        }
        Ok(())
    })
}

/// Stores in `*lost` how many arrivals the log discarded because it was full.
///
/// # Safety
/// `region` must be NULL or a live region; `lost` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_region_arrivals_lost(region: *const mw_region, lost: *mut u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (r, out) = unsafe { (self::region(region)?, ffi::out(lost, "lost")?) };
        out.set(r.get().arrivals_lost());
        Ok(())
    })
}

/// Points this rank's address register `reg` at `len` bytes from `offset`
/// of `region`: remote `mw_put_to_register(this rank, reg, ...)` calls land
/// there (Cenju-4's address registers). Replaces an earlier setting.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `region` NULL or a live region.
#[no_mangle]
pub unsafe extern "C" fn mw_set_register(
    ep: *mut mw_endpoint,
    reg: u16,
    region: *const mw_region,
    offset: u64,
    len: u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, r) = unsafe { (endpoint(ep)?, self::region(region)?) };
        Ok(owner.ep.set_register(reg, r.get(), offset, len)?)
    })
}

/// Clears this rank's address register `reg`; later puts to it fail with
/// `MW_ERR_UNSUPPORTED` at the sender.
///
/// # Safety
/// `ep` must be NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn mw_clear_register(ep: *mut mw_endpoint, reg: u16) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { endpoint(ep) }?.ep.clear_register(reg);
        Ok(())
    })
}

/// Waits, serving peers meanwhile, until the 64-bit word at `offset`
/// (8-byte aligned) of this rank's `region` satisfies `word <cmp> value`
/// (`MW_CMP_*`); stores the word's value then in `*seen` unless `seen` is
/// NULL. The target side of `mw_put_signal`: once it returns, the data put
/// before the signal is in the region.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `region` NULL or a live region;
/// `seen` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mw_wait_until(
    ep: *mut mw_endpoint,
    region: *const mw_region,
    offset: u64,
    cmp: mw_cmp,
    value: u64,
    seen: *mut u64,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, r, seen) = unsafe { (endpoint(ep)?, self::region(region)?, ffi::out_opt(seen, "seen")?) };
        let cmp = cmp_from(cmp)?;
        if !std::ptr::eq(owner, r.owner()) {
            return Err(Failure::invalid("region belongs to another endpoint"));
        }
        let word = owner.ep.wait_until(r.get(), offset, cmp, value)?;
        if let Some(seen) = seen {
            seen.set(word);
        }
        Ok(())
    })
}

/// The key of a region as the core names it.
pub(crate) fn key(key: mw_key) -> RegionKey {
    RegionKey(key)
}
