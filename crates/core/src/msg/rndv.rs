//! The receiver-driven rendezvous (seed 002, SR8000: "the message layer uses
//! GET for large messages, so no large receive buffers are needed").
//!
//! Owns: *exposures* at the sending side (a payload registered read-only
//! under a fresh random key until the receiver says [`RndvDone`]) and
//! *pulls* at the receiving side (GETs issued chunk by chunk, at most a
//! window of bytes in flight, straight into the receive's sink; when the last
//! chunk landed, `RndvDone` goes back and, for an active message, the handler
//! runs). Both tagged messages and active-message payloads use it.
//!
//! Between ranks of one host an exposure is also published in the shared-
//! memory directory, and the receiver copies the whole payload straight
//! into its sink (one `process_vm_readv`, or a `memcpy` from a mapping)
//! instead of pulling it chunk by chunk through the rings; if that fails
//! (the kernel refuses cross-memory access, the directory is full), the
//! chunked GETs run as between hosts.
//!
//! Must not: decide matching (tagged.rs does) or run handlers itself (am.rs).

use std::collections::HashMap;

use mw_wire::op::{self, OpRepr, RndvDone, Status};

use super::{am, MsgOutput, Outgoing};
use crate::endpoint::State;
use crate::get_window::GetChunk;
use crate::region::{Access, RawMem, RegionKey};
use crate::request::{RequestId, Requests};
use crate::target::Target;
use crate::Error;

/// What keeps an exposed payload's memory alive until the receiver is done.
pub(crate) enum Keep {
    /// The caller's buffer, exposed in place for the length of a blocking send.
    Borrowed,
    /// A library-owned copy (nonblocking sends, AM payloads).
    Copy(Vec<u8>),
    /// A buffer handed over by `isend_owned`, given back on completion.
    Owned(Vec<u8>),
}

/// A payload this rank exposed for `peer` to pull.
struct Exposure {
    peer: u32,
    key: RegionKey,
    keep: Keep,
    /// The request completed by `RndvDone` (its id is the token).
    req: RequestId,
}

/// What happens when a pull is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// The request's owner collects it (a receive, an AM reply).
    Collect,
    /// Run the active-message handler with the pulled payload.
    RunHandler,
}

/// A payload this rank is pulling from `peer`.
struct Pull {
    req: RequestId,
    peer: u32,
    key: u64,
    offset: u64,
    total: u64,
    chunks: u32,
    issued: u32,
    token: u32,
    then: Then,
}

/// Exposures and pulls of one endpoint.
pub(crate) struct Rndv {
    exposed: HashMap<u32, Exposure>,
    pulls: Vec<Pull>,
    /// Exposures released by `RndvDone` whose shared-memory directory entry
    /// still has to go (the delivery callback cannot reach the directory).
    retired: Vec<(RegionKey, Keep)>,
    chunk: u64,
    /// Chunks in flight per pull: bounds what the sender queues for us.
    window: u32,
    /// Bytes per GET of a pull from a peer over UDP: one datagram's worth
    /// (0 until the endpoint sets it; then such pulls are paced by the
    /// endpoint's get window like any large get, see `pump_pulls`).
    udp_chunk: u64,
    /// How this sender writes its chunks for same-host receivers in other
    /// processes, after what the last slow ones taught it.
    staging: StagingPolicy,
}

/// Which copy a sender uses for a receiver's staging area. With
/// [`StageStores::Auto`]: plain stores, non-temporal stores for
/// [`STAGING_PAUSE`] after plain ones ran slow, and (`None`) the kernel's
/// copy for as long after streamed ones ran slow too. Each pause ends in
/// plain stores again: the host moves its vCPUs together and apart within
/// a second or so. The other settings keep to one form of store, and turn
/// to the kernel's copy for a pause after it ran slow.
#[derive(Debug, Clone, Copy)]
struct StagingPolicy {
    stores: crate::config::StageStores,
    streaming_until: Option<std::time::Instant>,
    /// The length of the last streaming spell: the next one, if plain
    /// stores run slow again within it of its end, lasts twice as long (up
    /// to [`STAGING_PAUSE`]); one that comes later starts short again.
    streaming_for: std::time::Duration,
    kernel_until: Option<std::time::Instant>,
}

impl StagingPolicy {
    fn new(stores: crate::config::StageStores) -> StagingPolicy {
        StagingPolicy { stores, streaming_until: None, streaming_for: STREAMING_FIRST, kernel_until: None }
    }

    /// The form of store to stage with at `now`; `None`: the kernel's copy.
    fn form(&self, now: std::time::Instant) -> Option<mw_transport::shm::StageCopy> {
        use crate::config::StageStores;
        use mw_transport::shm::StageCopy;
        let active = |until: Option<std::time::Instant>| until.is_some_and(|until| now < until);
        if active(self.kernel_until) {
            return None;
        }
        Some(match self.stores {
            StageStores::Plain => StageCopy::Cached,
            StageStores::Streaming => StageCopy::Streaming,
            StageStores::Auto if active(self.streaming_until) => StageCopy::Streaming,
            StageStores::Auto => StageCopy::Cached,
        })
    }

    /// Chunks staged with `form` ran slow at `now`.
    ///
    /// Plain stores that run slow start a spell of streaming, short at
    /// first ([`STREAMING_FIRST`]): two slow chunks are also what a
    /// preemption or a busy moment of the host's memory looks like while
    /// the vCPUs are near, where streaming is the slower form (12.5 against
    /// 18 GB/s in `stage_probe`), and a 100 ms spell there took a third off
    /// 16 MiB send_recv between processes for a whole `mwbench` point. Only
    /// when plain stores run slow again right after a spell ends (a far
    /// placement lasts seconds) does the next spell last twice as long, up
    /// to [`STAGING_PAUSE`]: there each look at plain stores costs two
    /// slow chunks (~0.5 ms) per spell.
    fn slowed(&mut self, form: mw_transport::shm::StageCopy, now: std::time::Instant) {
        if form == mw_transport::shm::StageCopy::Cached && self.stores == crate::config::StageStores::Auto {
            let again_soon = self.streaming_until.is_some_and(|end| now < end + self.streaming_for);
            self.streaming_for = if again_soon { (self.streaming_for * 2).min(STAGING_PAUSE) } else { STREAMING_FIRST };
            self.streaming_until = Some(now + self.streaming_for);
        } else {
            self.kernel_until = Some(now + STAGING_PAUSE);
        }
    }
}

impl Rndv {
    pub(crate) fn new(chunk_bytes: usize, max_queued_bytes: usize, stage_stores: crate::config::StageStores) -> Rndv {
        let chunk = chunk_bytes.max(1) as u64;
        let window = (max_queued_bytes as u64 / chunk).clamp(2, 1024) as u32;
        Rndv {
            exposed: HashMap::new(),
            pulls: Vec::new(),
            retired: Vec::new(),
            chunk,
            window,
            udp_chunk: 0,
            staging: StagingPolicy::new(stage_stores),
        }
    }

    /// Sets the data bytes one GET answer carries in one UDP datagram.
    pub(crate) fn set_udp_chunk(&mut self, bytes: usize) {
        self.udp_chunk = bytes as u64;
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.exposed.is_empty() && self.pulls.is_empty() && self.retired.is_empty()
    }

    /// Starts pulling `total` bytes at `key+offset` of `peer` into request
    /// `req` (whose output's sink was prepared for `total` bytes).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_pull(
        &mut self,
        requests: &mut Requests,
        req: RequestId,
        peer: u32,
        key: u64,
        offset: u64,
        total: u64,
        token: u32,
        then: Then,
    ) {
        let chunks = total.div_ceil(self.chunk).max(1);
        let chunks = u32::try_from(chunks).unwrap_or(u32::MAX);
        requests.set_pending(req, chunks);
        requests.set_target(req, peer);
        self.pulls.push(Pull { req, peer, key, offset, total, chunks, issued: 0, token, then });
    }
}

impl Rndv {
    /// Stops pull `req` of a receive that gave up before all of it landed;
    /// returns the sender and its token, to answer with `Cancelled`.
    /// Chunks still on their way find no request and land nowhere.
    pub(crate) fn cancel_pull(&mut self, req: RequestId) -> Option<(u32, u32)> {
        let at = self.pulls.iter().position(|pull| pull.req == req && pull.then == Then::Collect)?;
        let pull = self.pulls.swap_remove(at);
        Some((pull.peer, pull.token))
    }
}

/// The receiver pulled (or refused) an exposed payload: release it.
pub(crate) fn on_done(t: &mut Target<'_>, peer: u32, done: &RndvDone) {
    let Some(exposure) = t.msg.rndv.exposed.remove(&done.sender_req) else {
        return; // already reaped (the request failed), or a duplicate
    };
    if exposure.peer != peer {
        // Not the rank it was exposed to: keep it for the right one.
        t.msg.rndv.exposed.insert(done.sender_req, exposure);
        return;
    }
    t.regions.remove(exposure.key);
    let keep = match exposure.keep {
        // Back to the caller with the completion.
        Keep::Owned(buf) => {
            t.requests.set_output(exposure.req, crate::request::Output::Msg(MsgOutput::Sent { buf }));
            Keep::Borrowed
        }
        keep => keep,
    };
    // Its directory entry goes in the next progress round; the memory stays
    // alive until then (a blocking send's buffer outlives the round: the
    // send returns only after `unexpose`).
    t.msg.rndv.retired.push((exposure.key, keep));
    // A truncated receive still consumed the message: the send succeeded.
    let completion = match done.status {
        Status::Ok | Status::Truncated => t.requests.part_done(exposure.req),
        status => t.requests.fail(exposure.req, Error::from_status(status).unwrap_or(Error::Remote(status as u8))),
    };
    if let Some(c) = completion {
        t.completions.push(c);
    }
}

fn random_key() -> RegionKey {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).expect("the OS random source failed");
    RegionKey(u64::from_le_bytes(bytes).max(1))
}

impl State {
    /// Registers `mem` read-only under a fresh random key for `peer` to pull,
    /// until `RndvDone` for `token` (or `token`'s request fails).
    pub(crate) fn expose(&mut self, peer: u32, mem: RawMem, keep: Keep, token: RequestId) -> RegionKey {
        let key = loop {
            let key = random_key();
            if self.regions.insert(key, mem, Access::READ) {
                break key;
            }
        };
        if self.is_shm_peer(peer) {
            if let Some(shm) = self.shm.as_mut() {
                shm.publish(key, &mem, None, Access::READ);
            }
        }
        self.msg.rndv.exposed.insert(token.0, Exposure { peer, key, keep, req: token });
        key
    }

    /// Copies `payload` into a library-owned buffer and exposes it.
    pub(crate) fn expose_copy(&mut self, peer: u32, payload: &[u8], token: RequestId) -> RegionKey {
        // Copied in one pass, not zeroed first: a megabyte payload paid as
        // much again for zeroing its fresh pages as for the copy.
        self.expose_vec(peer, payload.to_vec(), token)
    }

    /// Exposes a library-owned buffer, which the exposure keeps until the
    /// pull is done.
    pub(crate) fn expose_vec(&mut self, peer: u32, payload: Vec<u8>, token: RequestId) -> RegionKey {
        let mem = crate::memory::owned_mem(&payload);
        self.expose(peer, mem, Keep::Copy(payload), token)
    }

    /// Withdraws a released exposure from the local table and the
    /// shared-memory directory.
    fn withdraw(&mut self, key: RegionKey) {
        self.regions.remove(key);
        if let Some(shm) = self.shm.as_mut() {
            shm.unpublish(key);
        }
    }

    /// Withdraws exposure `token` (a blocking send leaving, for any reason).
    pub(crate) fn unexpose(&mut self, token: RequestId) {
        self.retire_exposures();
        if let Some(exposure) = self.msg.rndv.exposed.remove(&token.0) {
            self.withdraw(exposure.key);
        }
    }

    /// Takes exposures released by `RndvDone` out of the directory, then
    /// lets their memory go.
    pub(crate) fn retire_exposures(&mut self) -> bool {
        if self.msg.rndv.retired.is_empty() {
            return false;
        }
        for (key, keep) in std::mem::take(&mut self.msg.rndv.retired) {
            self.withdraw(key);
            if let Keep::Copy(buf) = keep {
                // A large active-message reply's buffer, most often: the
                // next handler's reply is copied into it without fresh
                // pages to fault in.
                self.msg.am.keep_spare(buf);
            }
        }
        true
    }

    /// Withdraws exposures whose request is over without `RndvDone` (the
    /// peer died, the send failed).
    pub(crate) fn reap_exposures(&mut self) -> bool {
        let requests = &self.requests;
        let mut gone = Vec::new();
        for (token, exposure) in &self.msg.rndv.exposed {
            if requests.is_done(exposure.req) != Some(false) {
                gone.push(*token);
            }
        }
        for token in &gone {
            if let Some(exposure) = self.msg.rndv.exposed.remove(token) {
                self.withdraw(exposure.key);
            }
        }
        self.retire_exposures() | !gone.is_empty()
    }

    /// Issues GETs for active pulls (within the window) and finishes those
    /// whose last chunk has landed.
    pub(crate) fn pump_pulls(&mut self, now: mw_proto::time::Instant) -> bool {
        let mut worked = false;
        let mut paced = false;
        let mut index = 0;
        while index < self.msg.rndv.pulls.len() {
            let pull = &self.msg.rndv.pulls[index];
            let pending = self.requests.pending(pull.req).unwrap_or(0);
            if pending == 0 {
                let pull = self.msg.rndv.pulls.swap_remove(index);
                self.finish_pull(pull);
                worked = true;
                continue;
            }
            if self.msg.rndv.pulls[index].issued == 0 && self.pull_directly(index) {
                worked = true;
                continue; // finished at the top of the next turn
            }
            if self.msg.rndv.pulls[index].issued == 0 && self.pull_paced(index) {
                worked = true;
                paced = true;
                index += 1;
                continue;
            }
            let window = self.msg.rndv.window;
            let chunk = self.msg.rndv.chunk;
            let pull = &mut self.msg.rndv.pulls[index];
            let arrived = pull.chunks - pending;
            let mut issue = Vec::new();
            while pull.issued < pull.chunks && pull.issued - arrived < window {
                let start = u64::from(pull.issued) * chunk;
                let len = pull.total.saturating_sub(start).min(chunk);
                issue.push((
                    pull.peer,
                    op::GetRequest { req: pull.req.0, key: pull.key, offset: pull.offset + start, len },
                ));
                pull.issued += 1;
            }
            for (peer, get) in issue {
                worked = true;
                if let Err(error) = self.send_op(now, peer, &OpRepr::GetRequest(get), &[], None) {
                    if let Some(c) = self.requests.fail(RequestId(get.req), error) {
                        self.completions.push(c);
                    }
                    break;
                }
            }
            index += 1;
        }
        if paced {
            self.pump_gets(now);
        }
        worked
    }

    /// Hands pull `index` from a peer over UDP to the endpoint's get window
    /// (crate::get_window), cut into one-datagram GETs, exactly as a large
    /// `get` is: the window keeps only a few hundred KiB on their way, so
    /// the sender copies each answer into its send queue just before the
    /// kernel sends it, while it is still in the cache. (Issuing the pull's
    /// own `chunk_bytes` GETs, a window of megabytes at once, made a 16 MiB
    /// message arrive at about half a plain get's rate.) False for peers
    /// reached another way (this rank, shared memory).
    fn pull_paced(&mut self, index: usize) -> bool {
        let chunk = self.msg.rndv.udp_chunk;
        let pull = &self.msg.rndv.pulls[index];
        if chunk == 0 || pull.peer == self.rank || self.is_shm_peer(pull.peer) {
            return false;
        }
        let chunks = pull.total.div_ceil(chunk).max(1);
        let Ok(count) = u32::try_from(chunks) else { return false };
        let (req, peer, key, offset, total) = (pull.req, pull.peer, pull.key, pull.offset, pull.total);
        self.requests.set_pending(req, count);
        for i in 0..chunks {
            let start = i * chunk;
            let len = total.saturating_sub(start).min(chunk);
            self.gets.push(peer, GetChunk { req, key, offset: offset + start, len });
        }
        let pull = &mut self.msg.rndv.pulls[index];
        pull.chunks = count;
        pull.issued = count;
        true
    }

    /// Sender side of `mw_transport::shm::assist`: for each payload a
    /// same-host receiver is pulling right now, takes chunks of it and
    /// writes them into the receiver's buffer. Called from waits only (a
    /// rank that is waiting has a CPU to spare; a `test` call must stay
    /// short). Returns whether it copied anything.
    pub(crate) fn assist_pulls(&mut self) -> bool {
        if self.msg.rndv.exposed.is_empty() {
            return false;
        }
        let State { shm, msg, regions, stats, .. } = self;
        let Some(shared) = shm.as_ref().map(|s| &s.shared) else { return false };
        let mut worked = false;
        // The form of store that staged slowly, if one did.
        let mut staging_slow = None;
        for (&token, exposure) in &msg.rndv.exposed {
            let Some(link) = shared.link(exposure.peer) else { continue };
            let Some(slot) = link.peer.assist_slot(shared.my_index) else { continue };
            let Some(offer) = slot.offer() else { continue };
            if offer.token != token || link.dead.load(std::sync::atomic::Ordering::Relaxed) {
                continue;
            }
            let Ok(entry) = regions.get(exposure.key) else { continue };
            let mem = entry.mem;
            // Another process that offers a staging area gets our chunks
            // through it (`mw_transport::shm::stage`): two user-space copies
            // at once instead of two kernel copies.
            // Not while staging was found slower than the kernel's copy.
            let form = msg.rndv.staging.form(std::time::Instant::now());
            let stage_window = form
                .filter(|_| offer.stage_key != 0 && link.far != mw_transport::shm::Far::Local)
                .and_then(|form| Some((form, link.window(offer.stage_key)?)));
            if let Some((form, window)) = stage_window {
                if let Some(staged) = stage_chunks(link, &slot, &offer, mem, &window, form, &mut staging_slow) {
                    worked |= staged > 0;
                    stats.shm_assist_bytes += staged;
                    stats.shm_staged_bytes += staged;
                    if form == mw_transport::shm::StageCopy::Streaming {
                        stats.shm_streamed_bytes += staged;
                    }
                }
                // What is left (after a slow chunk) goes the kernel's way below.
            }
            while let Some(chunk) = slot.take_offered(&offer, crate::shm::direct::ASSIST_CHUNK) {
                worked = true;
                let copied = with_chunk_source(mem, &offer, chunk, |src| {
                    // SAFETY: the chunk lies inside the receiver's
                    // buffer (`take_offered` hands out only chunks
                    // below the offer's total, its length), which
                    // the receiver keeps allocated and leaves alone
                    // until every chunk it handed out is reported
                    // finished or failed (`copy_assisted`); for a
                    // receiver that is a thread of this process it
                    // never stops waiting for those reports.
                    #[allow(unsafe_code)]
                    let copied = unsafe { mw_transport::shm::write_lent(link.far, offer.dest + chunk.start, src) };
                    copied.is_ok()
                });
                if copied {
                    slot.finished(chunk);
                    stats.shm_assist_bytes += chunk.len;
                } else {
                    slot.failed(&offer, chunk);
                    break;
                }
            }
        }
        if let Some(form) = staging_slow {
            msg.rndv.staging.slowed(form, std::time::Instant::now());
        }
        worked
    }

    /// Copies pull `index`'s whole payload from a same-host sender's memory
    /// into its sink at once. False (nothing landed, nothing issued) when
    /// the sender is not on this host or direct access is not possible;
    /// the chunked GETs then go through the rings.
    fn pull_directly(&mut self, index: usize) -> bool {
        let pull = &self.msg.rndv.pulls[index];
        let (peer, key, offset, req, token) = (pull.peer, pull.key, pull.offset, pull.req, pull.token);
        let Ok(total) = usize::try_from(pull.total) else { return false };
        let State { shm, requests, .. } = self;
        let Some(shm) = shm.as_mut() else { return false };
        // A sender in another process stages its share of a large message
        // for us instead of using the kernel's copy (see `read_for_pull`).
        let far = shm.shared.link(peer).map(|link| link.far);
        let staging = (total >= crate::shm::direct::STAGE_MIN && far != Some(mw_transport::shm::Far::Local))
            .then(|| shm.staging())
            .flatten();
        let shared = &shm.shared;
        let Some(link) = shared.link(peer) else { return false };
        let Some(output) = requests.msg_mut(req) else { return false };
        let pull_all = |dest: &mut [std::mem::MaybeUninit<u8>]| {
            crate::shm::direct::read_for_pull(shared, link, crate::region::RegionKey(key), offset, dest, token, staging)
                .is_some()
        };
        // SAFETY: `read_for_pull` only copies bytes into `dest`, and is
        // `Some` only when every byte of it has landed (its contract); only
        // then does `pull_all` say so.
        #[allow(unsafe_code)]
        let landed = unsafe { output.land_with(total, pull_all) };
        if landed.is_err() {
            return false;
        }
        shared.count_direct();
        let pull = &mut self.msg.rndv.pulls[index];
        pull.issued = pull.chunks;
        // All of it at once: one part, now done.
        self.requests.set_pending(req, 1);
        if let Some(c) = self.requests.part_done(req) {
            self.completions.push(c);
        }
        true
    }

    fn finish_pull(&mut self, pull: Pull) {
        self.msg.stats.rndv_pulled += 1;
        self.msg.outbox.push_back(Outgoing::RndvDone { peer: pull.peer, token: pull.token, status: Status::Ok });
        if pull.then == Then::RunHandler {
            // The slot was ours alone: take it whether it succeeded or not.
            let Some((result, output)) = self.requests.take(pull.req) else {
                return;
            };
            if let crate::request::Output::Msg(MsgOutput::AmIncoming {
                source,
                handler,
                req,
                want_reply,
                args,
                sink: super::Sink::Owned { data: payload, filled },
            }) = output
            {
                // (`am::on_request` lands every pulled payload in an owned buffer.)
                match result {
                    Ok(()) => {
                        let request = am::Request {
                            source,
                            handler,
                            req,
                            want_reply,
                            args: args.as_slice(),
                            payload: &payload[..filled],
                        };
                        am::run_handler(&mut self.msg, &request);
                    }
                    // The payload could not be pulled (the initiator vanished or
                    // the bytes did not fit): the handler does not run.
                    Err(_) => am::answer_error(&mut self.msg, source, req, want_reply, Status::Unsupported),
                }
                self.msg.am.keep_staging(payload);
            }
        }
    }
}

/// Runs `copy` on the bytes of `chunk` of `offer`'s message in the exposed
/// payload `mem`; `false` (without running it) when the chunk is not
/// inside `mem`.
fn with_chunk_source(
    mem: crate::region::RawMem,
    offer: &mw_transport::shm::Offer,
    chunk: mw_transport::shm::Chunk,
    copy: impl FnOnce(&[u8]) -> bool,
) -> bool {
    offer
        .offset
        .checked_add(chunk.start)
        .and_then(|from| crate::region::checked_range(from, chunk.len, mem.len()).ok())
        .is_some_and(|(from, len)| mem.with_slice(from, len, copy))
}

/// Bytes per second below which staging a chunk with plain stores counts
/// as slow: about a kernel copy's speed. Staging so runs at ~20-25 GB/s
/// while the host keeps the two vCPUs close, and at 2.4-3 GB/s in its
/// stretches of putting them far apart (every line crosses between the
/// caches twice: a staged 512 KiB chunk took 220 us instead of 24), below
/// the kernel's copy; non-temporal stores then run at 9-17 GB/s (see
/// `mw_transport::shm::StageCopy`).
const CACHED_STAGING_MIN_RATE: f64 = 8e9;
/// The same for non-temporal stores: below one CPU's kernel copy (4-8
/// GB/s on the test host), where the kernel's copy on both CPUs is the
/// better way. Not the plain stores' bar: streamed chunks dip to 5-7 GB/s
/// when the host's memory is busy, and the kernel's copy then is no faster
/// (16 MiB as processes in a far placement, 24-message runs with the form
/// forced: streaming 14.8-15.3 GB/s, kernel 5.9-6.9, plain stores 5.3).
const STREAMED_STAGING_MIN_RATE: f64 = 4e9;
/// How long a sender copies with the kernel after slow streamed chunks,
/// and the longest it stages with non-temporal stores after slow chunks
/// staged with plain ones, before it tries plain stores once more
/// ([`StagingPolicy`]).
const STAGING_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
/// The first spell of non-temporal stores after plain ones ran slow
/// ([`StagingPolicy::slowed`]).
const STREAMING_FIRST: std::time::Duration = std::time::Duration::from_millis(5);

/// Copies the chunks of `offer` this side can claim into the receiver's
/// staging area `window` (see `mw_transport::shm::stage`); returns the
/// bytes staged, or `None` (nothing claimed) when the window is not one
/// (not a shared mapping of a staging area's size): the caller then
/// writes with the kernel's copy. Writes with the stores `form` says.
/// Stops early, setting `slow` to `form`, after two chunks in a row
/// copied slower than the form's floor ([`CACHED_STAGING_MIN_RATE`],
/// [`STREAMED_STAGING_MIN_RATE`]; the caller copies the rest
/// with the kernel). Gives up on a receiver that died.
fn stage_chunks(
    link: &crate::shm::Link,
    slot: &mw_transport::shm::AssistSlot<'_>,
    offer: &mw_transport::shm::Offer,
    mem: crate::region::RawMem,
    window: &crate::shm::CachedWindow,
    form: mw_transport::shm::StageCopy,
    slow: &mut Option<mw_transport::shm::StageCopy>,
) -> Option<u64> {
    let crate::shm::WindowKind::Mapped(peer) = &window.kind else { return None };
    peer.prefault_once();
    let area = peer.mem();
    if area.len() < mw_transport::shm::STAGE_LEN {
        return None;
    }
    // SAFETY: the window maps the receiver's staging area (its key came
    // from the receiver's assist slot, its length checked just above),
    // page aligned, and stays mapped while we hold `window`; the receiver
    // and we touch it only through `Stage`s, and we stage only chunks we
    // claimed in the slot's open generation (module docs of `stage`).
    #[allow(unsafe_code)]
    let stage = unsafe { mw_transport::shm::Stage::new(area.base()) };
    let mut staged = 0;
    let mut slow_chunks = 0;
    let mut last_check = std::time::Instant::now();
    let mut receiver_gone = || link.gone_since(&mut last_check);
    while let Some(chunk) = slot.take_offered(offer, mw_transport::shm::STAGE_CHUNK) {
        let mut copy_time = std::time::Duration::ZERO;
        let published = with_chunk_source(mem, offer, chunk, |src| {
            if !stage.wait_for_buffer(&mut receiver_gone) {
                return false;
            }
            let started = std::time::Instant::now();
            stage.publish(chunk.start, src, form);
            copy_time = started.elapsed();
            true
        });
        if !published {
            slot.failed(offer, chunk);
            break;
        }
        slot.finished(chunk);
        staged += chunk.len;
        // Two in a row: one can be a preemption or a first touch.
        let floor = match form {
            mw_transport::shm::StageCopy::Cached => CACHED_STAGING_MIN_RATE,
            mw_transport::shm::StageCopy::Streaming => STREAMED_STAGING_MIN_RATE,
        };
        slow_chunks = if copy_time.as_secs_f64() * floor > chunk.len as f64 { slow_chunks + 1 } else { 0 };
        if slow_chunks == 2 {
            *slow = Some(form);
            break;
        }
    }
    Some(staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StageStores;
    use mw_transport::shm::StageCopy;
    use std::time::{Duration, Instant};

    #[test]
    fn slow_plain_stores_switch_to_streaming_then_the_kernel_and_each_pause_ends_in_plain_stores() {
        let start = Instant::now();
        let mut policy = StagingPolicy::new(StageStores::Auto);
        assert_eq!(policy.form(start), Some(StageCopy::Cached));

        policy.slowed(StageCopy::Cached, start);
        assert_eq!(policy.form(start), Some(StageCopy::Streaming));
        let first_end = start + STREAMING_FIRST;
        assert_eq!(policy.form(first_end - Duration::from_micros(1)), Some(StageCopy::Streaming));
        assert_eq!(policy.form(first_end), Some(StageCopy::Cached), "a first spell is short");

        // Streamed chunks slow as well, halfway through the spell.
        let later = start + STREAMING_FIRST / 2;
        policy.slowed(StageCopy::Streaming, later);
        assert_eq!(policy.form(later), None, "the kernel's copy");
        assert_eq!(policy.form(first_end), None, "still the kernel's, past the streaming spell");
        assert_eq!(policy.form(later + STAGING_PAUSE), Some(StageCopy::Cached));

        // Plain stores slow again long afterwards: a short spell of
        // streaming again, not the kernel.
        let again = later + 2 * STAGING_PAUSE;
        policy.slowed(StageCopy::Cached, again);
        assert_eq!(policy.form(again), Some(StageCopy::Streaming));
        assert_eq!(policy.form(again + STREAMING_FIRST), Some(StageCopy::Cached));
    }

    #[test]
    fn plain_stores_slow_again_right_after_a_spell_double_the_next_up_to_the_pause() {
        let mut now = Instant::now();
        let mut policy = StagingPolicy::new(StageStores::Auto);
        let mut expected = STREAMING_FIRST;
        // The host keeps its vCPUs far apart: every look at plain stores,
        // just after a spell ends, finds them slow again.
        for _ in 0..10 {
            policy.slowed(StageCopy::Cached, now);
            assert_eq!(policy.form(now + expected - Duration::from_micros(1)), Some(StageCopy::Streaming));
            assert_eq!(policy.form(now + expected), Some(StageCopy::Cached), "a spell of {expected:?}");
            now += expected + Duration::from_micros(500);
            expected = (expected * 2).min(STAGING_PAUSE);
        }
        assert_eq!(expected, STAGING_PAUSE, "capped");
        // Fast plain stores for a while: the next spell is short again.
        now += 3 * STAGING_PAUSE;
        policy.slowed(StageCopy::Cached, now);
        assert_eq!(policy.form(now + STREAMING_FIRST), Some(StageCopy::Cached));
    }

    #[test]
    fn a_fixed_form_of_store_turns_to_the_kernel_when_slow_and_comes_back_to_itself() {
        let start = Instant::now();
        for (stores, form) in [(StageStores::Plain, StageCopy::Cached), (StageStores::Streaming, StageCopy::Streaming)]
        {
            let mut policy = StagingPolicy::new(stores);
            assert_eq!(policy.form(start), Some(form), "{stores:?}");
            policy.slowed(form, start);
            assert_eq!(policy.form(start), None, "{stores:?}: the kernel's copy");
            assert_eq!(policy.form(start + STAGING_PAUSE), Some(form), "{stores:?}");
        }
    }
}
