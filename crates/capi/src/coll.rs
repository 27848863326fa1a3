//! Collectives as C sees them: barrier, broadcast, allgather, alltoall,
//! allreduce, reduce, gather and scatter on a team (NULL: the whole job),
//! with the algorithm the library picks (`MW_COLL_*` forces one for the job,
//! `mw_team_set_algorithm` for a team).
//!
//! Owns: the job's team for C (formed by the first collective call on it,
//! which is collective anyway; dropped by `mw_finalize` before the
//! endpoint), the `MW_DTYPE_*`/`MW_OP_*` tables, and in-place calls: a receive buffer that
//! overlaps the send buffer (MPI's `MPI_IN_PLACE` use) gets a copy of the
//! send data first, as Rust may not borrow the same bytes both ways. Must
//! not: implement an algorithm (core's `Team` does).

use std::ffi::c_void;

use mw_core::{DType, ReduceOp, Team};

use crate::endpoint::{endpoint, mw_endpoint};
use crate::ffi;
use crate::status::{guard, mw_status, Failure};
use crate::team::{self, mw_team};

/// Element type of a reduction: one of `MW_DTYPE_*` (native byte order).
pub type mw_dtype = u32;
/// `int8_t`
pub const MW_DTYPE_I8: mw_dtype = 1;
/// `uint8_t`
pub const MW_DTYPE_U8: mw_dtype = 2;
/// `int16_t`
pub const MW_DTYPE_I16: mw_dtype = 3;
/// `uint16_t`
pub const MW_DTYPE_U16: mw_dtype = 4;
/// `int32_t`
pub const MW_DTYPE_I32: mw_dtype = 5;
/// `uint32_t`
pub const MW_DTYPE_U32: mw_dtype = 6;
/// `int64_t`
pub const MW_DTYPE_I64: mw_dtype = 7;
/// `uint64_t`
pub const MW_DTYPE_U64: mw_dtype = 8;
/// `float`
pub const MW_DTYPE_F32: mw_dtype = 9;
/// `double`
pub const MW_DTYPE_F64: mw_dtype = 10;

/// Reduction operation: one of `MW_OP_*`.
pub type mw_op = u32;
/// Sum (integers wrap).
pub const MW_OP_SUM: mw_op = 1;
/// Product (integers wrap).
pub const MW_OP_PROD: mw_op = 2;
/// Minimum.
pub const MW_OP_MIN: mw_op = 3;
/// Maximum.
pub const MW_OP_MAX: mw_op = 4;
/// Bitwise and (integer types only).
pub const MW_OP_BAND: mw_op = 5;
/// Bitwise or (integer types only).
pub const MW_OP_BOR: mw_op = 6;
/// Bitwise xor (integer types only).
pub const MW_OP_BXOR: mw_op = 7;

fn dtype(value: mw_dtype) -> Result<DType, Failure> {
    Ok(match value {
        MW_DTYPE_I8 => DType::I8,
        MW_DTYPE_U8 => DType::U8,
        MW_DTYPE_I16 => DType::I16,
        MW_DTYPE_U16 => DType::U16,
        MW_DTYPE_I32 => DType::I32,
        MW_DTYPE_U32 => DType::U32,
        MW_DTYPE_I64 => DType::I64,
        MW_DTYPE_U64 => DType::U64,
        MW_DTYPE_F32 => DType::F32,
        MW_DTYPE_F64 => DType::F64,
        _ => return Err(Failure::invalid("unknown MW_DTYPE_* value")),
    })
}

fn reduce_op(value: mw_op) -> Result<ReduceOp, Failure> {
    Ok(match value {
        MW_OP_SUM => ReduceOp::Sum,
        MW_OP_PROD => ReduceOp::Prod,
        MW_OP_MIN => ReduceOp::Min,
        MW_OP_MAX => ReduceOp::Max,
        MW_OP_BAND => ReduceOp::BitAnd,
        MW_OP_BOR => ReduceOp::BitOr,
        MW_OP_BXOR => ReduceOp::BitXor,
        _ => return Err(Failure::invalid("unknown MW_OP_* value")),
    })
}

/// Bytes of `count` elements of `dtype`.
fn elements(dtype: DType, count: usize) -> Result<usize, Failure> {
    count.checked_mul(dtype.size()).ok_or(Failure::invalid("element count overflows"))
}

/// `n` blocks of `block` bytes.
fn blocks(n: u32, block: usize) -> Result<usize, Failure> {
    block.checked_mul(n as usize).ok_or(Failure::invalid("buffer size overflows"))
}

/// Runs `f` on `team`, or on the job's team when `team` is NULL (formed on
/// first use).
///
/// # Safety
/// `team` must be NULL or a live team of `owner`, used by no other thread.
pub(crate) unsafe fn with_team<R>(
    owner: &'static mw_endpoint,
    team: *mut mw_team,
    f: impl FnOnce(&mut Team<'static>) -> Result<R, Failure>,
) -> Result<R, Failure> {
    if team.is_null() {
        return team::with_world(owner, f);
    }
    // SAFETY: forwarded contract.
    f(unsafe { team::team_of(owner, team) }?)
}

/// Runs `f` on the `send_len` bytes at `send` and the `recv_len` bytes at
/// `recv`. When the two overlap (an in-place call, as with MPI's
/// `MPI_IN_PLACE`), `f` reads a copy of the send bytes taken first: Rust
/// may not borrow the same bytes for reading and writing at once.
///
/// # Safety
/// `send` must be NULL (only if `send_len` is 0) or readable for
/// `send_len` bytes, and `recv` NULL (only if `recv_len` is 0) or writable
/// for `recv_len` bytes, for the whole call.
unsafe fn with_buffers<R>(
    send: *const c_void,
    send_len: usize,
    recv: *mut c_void,
    recv_len: usize,
    f: impl FnOnce(&[u8], &mut [u8]) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let (s, r) = (send as usize, recv as usize);
    let overlap = !send.is_null()
        && send_len > 0
        && recv_len > 0
        && s < r.saturating_add(recv_len)
        && r < s.saturating_add(send_len);
    // SAFETY: forwarded contract; read before the receive buffer is borrowed.
    let copy = overlap.then(|| unsafe { std::slice::from_raw_parts(send.cast::<u8>(), send_len) }.to_vec());
    let send = match &copy {
        Some(copy) => &copy[..],
        // SAFETY: forwarded contract; it does not overlap `recv`.
        None => unsafe { ffi::bytes(send, send_len, "send") }?,
    };
    // SAFETY: forwarded contract; the only borrow of these bytes.
    let recv = unsafe { ffi::bytes_mut(recv, recv_len, "recv") }?;
    f(send, recv)
}

/// Collective over `team` (NULL: the whole job): returns once every member
/// has called it.
///
/// Every collective on a team (this one, `mw_bcast`, `mw_allreduce`, …)
/// waits for a member that is alive but does not come at most
/// the endpoint's wait timeout (`MW_WAIT_TIMEOUT_MS`, none by default), then fails with
/// `MW_ERR_TIMEOUT`; the team is then out of step with its other members
/// and every later collective on it fails with `MW_ERR_TEAM_BROKEN` (for
/// the job's team, NULL: for the rest of the job; free a broken team of
/// your own).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it.
#[no_mangle]
pub unsafe extern "C" fn mw_team_barrier(ep: *mut mw_endpoint, team: *mut mw_team) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract.
        unsafe { with_team(owner, team, |t| Ok(t.barrier()?)) }
    })
}

/// Collective over `team` (NULL: the whole job): `len` bytes of `buf` at
/// team rank `root` land in `buf` of every member.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `buf` NULL (only if `len` is 0) or valid for reads and writes of `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn mw_bcast(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    root: u32,
    buf: *mut c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (owner, buf) = unsafe { (endpoint(ep)?, ffi::bytes_mut(buf, len, "buf")?) };
        // SAFETY: forwarded contract.
        unsafe { with_team(owner, team, |t| Ok(t.broadcast(root, buf)?)) }
    })
}

/// Collective over `team` (NULL: the whole job): every member's `len` bytes
/// at `send` land, in team rank order, in `recv` (team size × `len` bytes)
/// of every member. `send` may point into `recv` (in place).
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `send` readable for `len` bytes and `recv` writable for size × `len`
/// bytes (NULL only for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_allgather(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    send: *const c_void,
    len: usize,
    recv: *mut c_void,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let recv_len = blocks(t.size(), len)?;
                with_buffers(send, len, recv, recv_len, |send, recv| Ok(t.allgather(send, recv)?))
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): block j (`block` bytes) of
/// every member's `send` (team size × `block` bytes) lands in block i of
/// team rank j's `recv`, where i is the sender's team rank. `send` and
/// `recv` may be the same buffer.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `send` readable and `recv` writable for size × `block` bytes (NULL only
/// for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_alltoall(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    send: *const c_void,
    recv: *mut c_void,
    block: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let len = blocks(t.size(), block)?;
                with_buffers(send, len, recv, len, |send, recv| Ok(t.alltoall(send, recv)?))
            })
        }
    })
}

/// The bytes a buffer described by `counts` and `displs` (one entry per
/// member) spans from its start.
fn extent(counts: &[usize], displs: &[usize]) -> Result<usize, Failure> {
    counts.iter().zip(displs).try_fold(0usize, |end, (&c, &d)| {
        d.checked_add(c).map(|e| end.max(e)).ok_or(Failure::invalid("displacement + count overflows"))
    })
}

/// Collective over `team` (NULL: the whole job): team rank j contributes
/// `counts[j]` bytes (`send`, `send_len` bytes, which must equal this
/// member's count) and every member receives them at `displs[j]` of
/// `recv`. `counts` and `displs` hold one entry per team member and must be
/// the same on every member; receive blocks must not overlap (MPI's
/// `MPI_Allgatherv`, in bytes). Counts that differ between members fail the
/// call on every member with `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `counts` and `displs` readable for team size entries; `send` readable for
/// `send_len` bytes; `recv` writable up to the end of its last block (NULL
/// only for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_allgatherv(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    send: *const c_void,
    send_len: usize,
    recv: *mut c_void,
    counts: *const usize,
    displs: *const usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team, the arrays and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let p = t.size() as usize;
                let counts = ffi::array(counts, p, "counts")?;
                let displs = ffi::array(displs, p, "displs")?;
                let recv_len = extent(counts, displs)?;
                with_buffers(send, send_len, recv, recv_len, |send, recv| Ok(t.allgatherv(send, recv, counts, displs)?))
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): `send_counts[j]` bytes at
/// `send_displs[j]` of `send` go to team rank j, which receives them at its
/// `recv_displs[i]` (i: the sender's team rank), so `recv_counts[i]` there
/// must equal `send_counts[j]` here (MPI's `MPI_Alltoallv`, in bytes). Each
/// array holds one entry per team member; receive blocks must not overlap.
/// A direction whose counts differ (i sends j another length than j
/// expects from i) moves nothing, and both i and j get
/// `MW_ERR_INVALID_ARGUMENT`; the other pairs complete.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// the four arrays readable for team size entries; `send` readable and
/// `recv` writable up to the end of their last block (NULL only for 0
/// bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_alltoallv(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    send: *const c_void,
    send_counts: *const usize,
    send_displs: *const usize,
    recv: *mut c_void,
    recv_counts: *const usize,
    recv_displs: *const usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team, the arrays and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let p = t.size() as usize;
                let send_counts = ffi::array(send_counts, p, "send_counts")?;
                let send_displs = ffi::array(send_displs, p, "send_displs")?;
                let recv_counts = ffi::array(recv_counts, p, "recv_counts")?;
                let recv_displs = ffi::array(recv_displs, p, "recv_displs")?;
                let send_len = extent(send_counts, send_displs)?;
                let recv_len = extent(recv_counts, recv_displs)?;
                with_buffers(send, send_len, recv, recv_len, |send, recv| {
                    Ok(t.alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs)?)
                })
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): `recv` of every member
/// (`count` elements of `dtype`) gets the element-wise `op` over every
/// member's `send`, bit-identical everywhere. `send` and `recv` may be the
/// same buffer.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `send` readable and `recv` writable for `count` elements (NULL only for 0).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: team, type, operation, buffers, count
pub unsafe extern "C" fn mw_allreduce(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    dtype: mw_dtype,
    op: mw_op,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        let (dtype, op) = (self::dtype(dtype)?, reduce_op(op)?);
        let len = elements(dtype, count)?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                with_buffers(send, len, recv, len, |send, recv| Ok(t.allreduce(dtype, op, send, recv)?))
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): `recv` at team rank
/// `root` (`count` elements of `dtype`) gets the element-wise `op` over
/// every member's `send`; `recv` is not used elsewhere (it may be NULL
/// there). `send` and `recv` may be the same buffer.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `send` readable for `count` elements; at `root`, `recv` writable for
/// `count` elements (NULL only for 0).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: team, root, type, operation, buffers, count
pub unsafe extern "C" fn mw_reduce(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    root: u32,
    dtype: mw_dtype,
    op: mw_op,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        let (dtype, op) = (self::dtype(dtype)?, reduce_op(op)?);
        let len = elements(dtype, count)?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let recv_len = if t.rank() == root { len } else { 0 };
                with_buffers(send, len, recv, recv_len, |send, recv| {
                    // Away from the root, a buffer of the right length that
                    // nothing reads (the reduction checks lengths everywhere).
                    let mut ignored = vec![0u8; if recv.is_empty() { len } else { 0 }];
                    let recv = if recv.is_empty() { &mut ignored[..] } else { recv };
                    Ok(t.reduce(root, dtype, op, send, recv)?)
                })
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): every member's `len`
/// bytes at `send` land, in team rank order, in `recv` at team rank `root`
/// (team size × `len` bytes); `recv` is not used elsewhere (it may be NULL
/// there). At `root`, `send` may point into `recv`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// `send` readable for `len` bytes; at `root`, `recv` writable for size ×
/// `len` bytes (NULL only for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_gather(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    root: u32,
    send: *const c_void,
    len: usize,
    recv: *mut c_void,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let recv_len = if t.rank() == root { blocks(t.size(), len)? } else { 0 };
                with_buffers(send, len, recv, recv_len, |send, recv| Ok(t.gather(root, send, recv)?))
            })
        }
    })
}

/// Collective over `team` (NULL: the whole job): block j (`len` bytes) of
/// `send` at team rank `root` (team size × `len` bytes; not used elsewhere,
/// it may be NULL there) lands in `recv` of team rank j. At `root`, `recv`
/// may point into `send`.
///
/// # Safety
/// `ep` must be NULL or a live endpoint; `team` NULL or a live team of it;
/// at `root`, `send` readable for size × `len` bytes; `recv` writable for
/// `len` bytes (NULL only for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn mw_scatter(
    ep: *mut mw_endpoint,
    team: *mut mw_team,
    root: u32,
    send: *const c_void,
    recv: *mut c_void,
    len: usize,
) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let owner = unsafe { endpoint(ep) }?;
        // SAFETY: forwarded contract (for the team and both buffers).
        unsafe {
            with_team(owner, team, |t| {
                let send_len = if t.rank() == root { blocks(t.size(), len)? } else { 0 };
                with_buffers(send, send_len, recv, len, |send, recv| Ok(t.scatter(root, send, recv)?))
            })
        }
    })
}
