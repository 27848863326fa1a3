//! The waiting policy: what a progress loop does when polling found nothing.
//!
//! Seed PM/UDP: poll first, then give the CPU away instead of burning it.
//! Three phases, in order, measured from the first idle call since the last
//! [`Waiter::reset`]:
//!
//! 1. **spin** — return at once so the caller re-polls (no syscall here;
//!    the caller's poll is one).
//! 2. **yield** — `sched_yield()` and return: still polling, but another
//!    runnable thread on this CPU (a co-located rank, the application on an
//!    oversubscribed node) gets to run first. If nobody else is runnable the
//!    call returns at once and this is polling at a slightly lower rate.
//! 3. **block** — `ppoll()` on the caller's fds until one is readable or the
//!    deadline (the protocol's next timer) passes. Costs no CPU, but a
//!    wake-up costs a scheduler round trip plus, on a virtual machine, an
//!    exit, and more under load.
//!
//! Why the default spins not at all: a datagram sent over loopback may not
//! be delivered until the *sending* thread enters the scheduler (yields or
//! blocks) or the next tick, so a sender that keeps its CPU busy after
//! `sendto` can delay its peer by milliseconds. Pure spinning is therefore
//! both the most fragile (that deferral, and starving the peer on an
//! oversubscribed node) and barely faster than polling with `sched_yield`,
//! while blocking at once pays a wake-up on every round trip; hence a spin
//! of zero and a yield phase by default. Set a spin for dedicated cores
//! with a real NIC. (measurements: docs/perf-notes.md, "wait policy")
//!
//! Owns: only the clock-based phase choice and the syscalls to yield/block.
//! Must not: read protocol state or sockets' contents. It is handed the fds
//! to watch and the deadline, and the caller does all receiving.
//!
//! Typical loop:
//! ```no_run
//! # use mw_transport::{Waiter, WaitPolicy, Idle};
//! # use std::os::fd::AsRawFd;
//! # fn work_found() -> bool { true }
//! # fn next_timer() -> Option<std::time::Instant> { None }
//! # let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
//! let mut waiter = Waiter::new(WaitPolicy::default());
//! loop {
//!     if work_found() {
//!         waiter.reset();
//!         continue;
//!     }
//!     match waiter.idle(&[socket.as_raw_fd()], next_timer()).unwrap() {
//!         Idle::TimedOut => { /* run the protocol's timers */ }
//!         Idle::Spun | Idle::Yielded | Idle::Woken => {}
//!     }
//! #   break;
//! }
//! ```

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::sys;

/// How long to stay in each non-blocking phase before blocking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Busy-poll this long after work was last found.
    pub spin: Duration,
    /// Then poll with `sched_yield` between attempts this much longer.
    pub yield_for: Duration,
}

impl WaitPolicy {
    /// Default spin: none. Polling with `sched_yield` (the yield phase) costs
    /// a little latency per round trip against pure spinning but never
    /// starves a co-located thread, including the kernel work that delivers
    /// our own loopback sends; see the module docs.
    pub const DEFAULT_SPIN: Duration = Duration::ZERO;

    /// Default yield phase: 100 µs. Long enough to cover a request/reply
    /// with some server work over loopback or a LAN, so a reply to what we
    /// just sent is caught without a wake-up; short enough that an idle
    /// rank is asleep after 0.1 ms. By the ski-rental rule, polling for as
    /// long as a few wake-ups cost before blocking keeps total cost within
    /// a small factor of the best choice in hindsight, and yield-polling
    /// only spends CPU no one else wanted.
    pub const DEFAULT_YIELD: Duration = Duration::from_micros(100);

    /// Never spin or yield: block as soon as polling finds nothing. Lowest
    /// CPU use, highest latency; for progress threads of mostly-idle ranks.
    pub const fn block_at_once() -> Self {
        Self { spin: Duration::ZERO, yield_for: Duration::ZERO }
    }
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self { spin: Self::DEFAULT_SPIN, yield_for: Self::DEFAULT_YIELD }
    }
}

/// What one [`Waiter::idle`] call did. In every case the caller polls again
/// (or runs its timers on `TimedOut`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Idle {
    /// Still in the spin phase; returned immediately.
    Spun,
    /// Gave the CPU to other runnable threads, then returned.
    Yielded,
    /// Blocked until an fd became readable (or a signal interrupted the wait).
    Woken,
    /// The deadline passed (now or while blocked).
    TimedOut,
}

/// Runs the spin → yield → block sequence for one progress loop.
#[derive(Debug)]
pub struct Waiter {
    policy: WaitPolicy,
    /// When the current idle stretch started; `None` right after `reset`.
    idle_since: Option<Instant>,
    /// What [`Waiter::blocks_next`] promised for the next `idle` call.
    promised: Option<bool>,
    poll_fds: sys::PollFds,
}

impl Waiter {
    /// A waiter that starts idle stretches by spinning.
    pub fn new(policy: WaitPolicy) -> Self {
        Self { policy, idle_since: None, promised: None, poll_fds: sys::PollFds::default() }
    }

    /// The policy in force.
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// Work was found: the next idle stretch starts with spinning again.
    pub fn reset(&mut self) {
        self.idle_since = None;
        self.promised = None;
    }

    /// Whether the next [`idle`](Waiter::idle) call will block in the
    /// kernel, so a caller whose peers wake it by a flag (shared memory) can
    /// raise the flag and poll once more before sleeping. The answer is a
    /// promise: that next call blocks if and only if this returned true,
    /// even if the phase boundary passes in between.
    pub fn blocks_next(&mut self) -> bool {
        let phases = self.policy.spin + self.policy.yield_for;
        let block = match self.idle_since {
            None => phases.is_zero(),
            Some(since) => since.elapsed() >= phases,
        };
        self.promised = Some(block);
        block
    }

    /// Called when a poll found nothing. Spins, yields or blocks on `fds`
    /// (readability) according to how long the loop has been idle, never
    /// past `deadline`. Blocking with no fds and no deadline would never
    /// return, so that is an `InvalidInput` error.
    pub fn idle(&mut self, fds: &[RawFd], deadline: Option<Instant>) -> io::Result<Idle> {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(Idle::TimedOut);
        }
        let idle_for = now - *self.idle_since.get_or_insert(now);
        let promised = self.promised.take();
        if promised == Some(true) {
            return self.block(fds, now, deadline);
        }
        if idle_for < self.policy.spin {
            std::hint::spin_loop();
            return Ok(Idle::Spun);
        }
        if idle_for < self.policy.spin + self.policy.yield_for || promised == Some(false) {
            sys::yield_cpu();
            return Ok(Idle::Yielded);
        }
        self.block(fds, now, deadline)
    }

    #[cold]
    fn block(&mut self, fds: &[RawFd], now: Instant, deadline: Option<Instant>) -> io::Result<Idle> {
        if fds.is_empty() && deadline.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Waiter::idle: no fds and no deadline would block forever",
            ));
        }
        // Timer slack (50 µs by default for normal threads) may delay the
        // timeout a little; that is the price of sleeping in the kernel.
        let timeout = deadline.map(|d| d - now);
        let ready = sys::ppoll_readable(&mut self.poll_fds, fds, timeout)?;
        if ready == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            Ok(Idle::TimedOut)
        } else {
            Ok(Idle::Woken)
        }
    }
}

/// Gives up the CPU to another runnable thread on it, if any
/// (`sched_yield`); for callers that run their own spin loop.
pub fn yield_cpu() {
    sys::yield_cpu();
}

/// The CPU the calling thread runs on right now (`sched_getcpu`, a load from
/// the thread's rseq area with current glibc), `None` if unknown. Waiters
/// compare it with the CPU a peer last ran on: if they match, the peer cannot
/// be running now, and spinning for it only delays it.
pub fn current_cpu() -> Option<u32> {
    sys::current_cpu()
}

/// Moves the calling thread onto `cpu` once (its affinity mask is set to
/// that CPU and at once restored, so nothing stays pinned). `Ok(false)` when
/// the thread's mask does not allow `cpu`. For waiters whose peer keeps
/// running on their own CPU while another is free for them.
pub fn nudge_to_cpu(cpu: u32) -> io::Result<bool> {
    sys::nudge_to_cpu(cpu)
}

/// Binds the calling thread to `cpus` (its affinity mask becomes them).
pub fn confine_to(cpus: &[u32]) -> io::Result<()> {
    sys::confine_to(cpus)
}

/// The CPUs the calling thread may run on (its affinity mask).
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    sys::allowed_cpus()
}

impl Default for Waiter {
    fn default() -> Self {
        Self::new(WaitPolicy::default())
    }
}
