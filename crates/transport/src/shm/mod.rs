//! Shared memory between the ranks of one host: mapped segments, rings,
//! the control block, and cross-memory copies (DESIGN §3, shm transport).
//!
//! Owns: the OS side of sharing memory (memory files, mappings, opening a
//! peer's segment, `process_vm_*`), the ring and control-block layouts and
//! their memory-ordering protocol, and the host identity used to decide
//! which peers share a machine. Must not: know what a message means or
//! decide routing; the endpoint (crate mw-core) does.
//!
//! `unsafe` is confined to `segment`, `ring`, `control`, `copy`, `fence` and `stage`, each
//! block with its `// SAFETY:` reasoning.

mod assist;
#[allow(unsafe_code)]
mod control;
#[allow(unsafe_code)]
mod copy;
#[allow(unsafe_code)]
mod fence;
#[allow(unsafe_code)]
pub mod ring;
#[allow(unsafe_code)]
mod segment;
#[allow(unsafe_code)]
mod stage;

pub use assist::{AssistSlot, Chunk, Offer, MAX_ASSISTED};
pub use control::{Control, DirEntry, ASSIST_SLOTS, DIR_SLOTS};
pub use copy::{kernel_copy_is_costly, read_lent, vm_read, vm_read_part, vm_write, write_lent, CopyDest, Far};
pub use fence::full_fence;
pub use ring::{copy_short, parts_len, Consumer, Corrupt, Producer, PushError, RingPeek, RingView};
pub use segment::Segment;
pub use stage::{copy_lines, stream_lines, Stage, StageCopy, STAGE_BUFFERS, STAGE_CHUNK, STAGE_LEN};

/// This boot of the kernel (`/proc/sys/kernel/random/boot_id`): two
/// processes with equal boot ids and host names run on the same machine
/// (a host name alone can repeat across machines; a boot id cannot).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|s| s.trim().to_owned())
}
