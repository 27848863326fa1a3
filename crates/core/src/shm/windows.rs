//! The cache of a same-host peer's region windows, read on every direct
//! operation.
//!
//! Owns: turning a region key into a mapping of the peer's memory (found in
//! the peer's directory, mapped once per link and shared by every thread of
//! the endpoint), and a small per-thread front cache in which the hot path
//! finds the window without a lock or an atomic read-modify-write (a read
//! lock is two of those, which was about half of a direct put_signal).
//! Must not: decide whether an access is allowed: the caller checks the
//! live directory entry (key and rights) on every use, so a withdrawn
//! region is never accessed even if a thread still caches its window.
//!
//! A window dropped from the shared map (its region was withdrawn) may live
//! on in other threads' front caches until they next touch it (the
//! directory check fails and they drop it) or evict it: at most
//! [`FRONT_ENTRIES`] windows per thread.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use mw_transport::shm::Control;

use super::{CachedWindow, KeyHasher, WindowKind};
use crate::region::PeerWindow;

/// Windows a thread keeps at hand, over all links.
const FRONT_ENTRIES: usize = 8;

/// Distinguishes caches (links) in the per-thread front cache: a link's
/// address may be reused by a later endpoint, its number never is.
static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(1);

struct FrontEntry {
    cache: u64,
    key: u64,
    window: Arc<CachedWindow>,
}

thread_local! {
    static FRONT: RefCell<Vec<FrontEntry>> = const { RefCell::new(Vec::new()) };
}

/// One link's windows.
#[derive(Debug)]
pub(crate) struct WindowCache {
    id: u64,
    shared: RwLock<HashMap<u64, Arc<CachedWindow>, BuildHasherDefault<KeyHasher>>>,
}

impl WindowCache {
    pub fn new() -> WindowCache {
        WindowCache { id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed), shared: RwLock::default() }
    }

    /// The window of `key` from the shared map, or mapped now from the
    /// peer's directory (`None`: no such region there, or it cannot be mapped).
    #[cold]
    pub(super) fn resolve(&self, peer: &Control, pid: u32, key: u64) -> Option<Arc<CachedWindow>> {
        if let Some(window) = self.shared.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Some(Arc::clone(window));
        }
        let (slot, entry) = peer.dir_find(key)?;
        let kind = if entry.fd >= 0 {
            WindowKind::Mapped(PeerWindow::open(pid, entry.fd, entry.len as usize).ok()?)
        } else {
            WindowKind::Cma { base: entry.base }
        };
        let window = Arc::new(CachedWindow { slot, len: entry.len, kind });
        let mut shared = self.shared.write().unwrap_or_else(|p| p.into_inner());
        Some(Arc::clone(shared.entry(key).or_insert(window)))
    }

    /// Runs `f` on the windows of `keys` with their live directory flags.
    /// `None` when a key is unknown to the peer's directory, was withdrawn
    /// (its window is dropped from the caches), or `f` declines.
    #[inline]
    pub fn with_windows<const N: usize, R>(
        &self,
        peer: &Control,
        pid: u32,
        keys: [u64; N],
        f: impl FnOnce([&CachedWindow; N], [u32; N]) -> Option<R>,
    ) -> Option<R> {
        FRONT
            .try_with(|front| {
                let missing = {
                    let cached = front.borrow();
                    keys.iter().any(|&key| !cached.iter().any(|e| e.cache == self.id && e.key == key))
                };
                if missing {
                    self.fill_front(front, peer, pid, &keys)?;
                }
                let cached = front.borrow();
                let mut found: [Option<&CachedWindow>; N] = [None; N];
                let mut flags = [0u32; N];
                for (i, &key) in keys.iter().enumerate() {
                    let window = &cached.iter().find(|e| e.cache == self.id && e.key == key)?.window;
                    let (live, live_flags) = peer.dir_key_flags(window.slot);
                    if live != key {
                        drop(cached);
                        self.forget(front, key);
                        return None;
                    }
                    flags[i] = live_flags;
                    found[i] = Some(window);
                }
                f(found.map(|w| w.expect("every key found")), flags)
            })
            .ok()
            .flatten()
    }

    #[cold]
    fn fill_front(&self, front: &RefCell<Vec<FrontEntry>>, peer: &Control, pid: u32, keys: &[u64]) -> Option<()> {
        for &key in keys {
            if front.borrow().iter().any(|e| e.cache == self.id && e.key == key) {
                continue;
            }
            let window = self.resolve(peer, pid, key)?;
            let mut cached = front.borrow_mut();
            if cached.len() == FRONT_ENTRIES {
                cached.remove(0);
            }
            cached.push(FrontEntry { cache: self.id, key, window });
        }
        Some(())
    }

    #[cold]
    fn forget(&self, front: &RefCell<Vec<FrontEntry>>, key: u64) {
        front.borrow_mut().retain(|e| !(e.cache == self.id && e.key == key));
        self.shared.write().unwrap_or_else(|p| p.into_inner()).remove(&key);
    }
}

impl Drop for WindowCache {
    fn drop(&mut self) {
        // This thread's entries go now; other threads' when they evict them.
        let id = self.id;
        let _ = FRONT.try_with(|front| front.borrow_mut().retain(|e| e.cache != id));
    }
}
