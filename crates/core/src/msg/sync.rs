//! Synchronous sends (MPI's `MPI_Ssend` / `MPI_Issend`): a send that
//! completes only once a matching receive has taken the message.
//!
//! Owns nothing of its own: a synchronous send is a tagged message sent by
//! rendezvous whatever its size. The receiver pulls a rendezvous message
//! only after a receive matched its announcement and answers `RndvDone`
//! when the pull is over, so the sender's completion (`RndvDone`) proves
//! the match, which an eager message, complete once on its way, cannot.
//!
//! Must not: decide matching (tagged.rs does) or move data (rndv.rs does).

use super::tagged::Unexpose;
use crate::deadline::Bound;
use crate::endpoint::Endpoint;
use crate::handle::{Handle, Landing};
use crate::Result;

impl Endpoint {
    /// [`send_in`](Self::send_in), but synchronous: returns only after a
    /// receive on `dest` matched the message and took it (a receive whose
    /// buffer is too small also counts; it fails there with
    /// [`Error::Truncated`](crate::Error::Truncated)). The data is never
    /// copied on the way: the receiver reads it from `data`. So a
    /// synchronous send to oneself needs its receive posted first.
    pub fn ssend_in(&self, context: u32, dest: u32, tag: u64, data: &[u8]) -> Result<()> {
        self.check_send(dest, tag)?;
        let mem = crate::memory::readonly_mem(data);
        let token = self.lock().requests.alloc(dest, 1)?;
        let _unexpose = Unexpose { ep: self, token };
        {
            let mut state = self.lock();
            let key = state.expose(dest, mem, super::rndv::Keep::Borrowed, token);
            self.announce(&mut state, context, dest, tag, data.len() as u64, key.0, token);
            state.transmit(self.shared.now());
        }
        let result = self.wait_and_take(token, Bound::Unbounded).map(|(result, _)| result);
        result.unwrap_or(Ok(()))
    }

    /// Nonblocking [`ssend_in`](Self::ssend_in): `data` is copied once into
    /// library memory and announced; the handle completes when a receive on
    /// `dest` has matched the message and taken it.
    pub fn issend_in<'a>(&'a self, context: u32, dest: u32, tag: u64, data: &'a [u8]) -> Result<Handle<'a>> {
        self.check_send(dest, tag)?;
        let mut state = self.lock_with_room(dest)?;
        let id = state.requests.alloc(dest, 1)?;
        let key = state.expose_copy(dest, data, id);
        self.announce(&mut state, context, dest, tag, data.len() as u64, key.0, id);
        state.transmit(self.shared.now());
        drop(state);
        Ok(Handle::new(self, id, Landing::Nothing).unbounded())
    }
}
