//! Algorithm names, the automatic choice by size and team size, and the
//! `MW_COLL_*` overrides (parsed here, called from `config.rs`, which owns
//! the environment).
//!
//! The automatic choices were picked by measurement on loopback UDP (see
//! docs/collectives.md): per message the cost is dominated by
//! the system calls, so fewer, larger messages win until the data is large.
//!
//! Owns: the `*Algo` enums, [`CollTuning`] and the `pick_*` rules. Must not:
//! read the environment itself (it gets a lookup function) or run a collective.

use crate::{Error, Result};

macro_rules! algo_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $($text:literal)|+),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            /// Let the library choose by size and team size.
            #[default]
            Auto,
            $($(#[$vdoc])* $variant),*
        }

        impl $name {
            /// Every algorithm (without `Auto`).
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Parses a name as used by `MW_COLL_*` and `mwbench --method`.
            pub fn parse(text: &str) -> Option<$name> {
                match text.trim().to_ascii_lowercase().as_str() {
                    "" | "auto" => Some($name::Auto),
                    $($($text)|+ => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The short name (the first accepted by [`Self::parse`]).
            pub fn name(self) -> &'static str {
                match self {
                    $name::Auto => "auto",
                    $($name::$variant => [$($text),+][0],)*
                }
            }
        }
    };
}

algo_enum! {
    /// Barrier methods (Cenju-4 §6.3, seed 000; the letters are the paper's).
    BarrierAlgo {
        /// A: every rank signals every other rank.
        AllToAll = "a" | "all_to_all",
        /// B: binary tree, gather then release.
        Tree = "b" | "tree",
        /// C: every rank atomically adds 1 to a counter at every rank; done at N.
        Counters = "c" | "counters",
        /// D: every rank multicasts its arrival once (tree-forwarded by the
        /// library: memwire has no network multicast).
        Multicast = "d" | "multicast",
        /// E: dissemination (Cenju-4's E was a hardware sync packet; this is
        /// the log2(N)-round software equivalent).
        Dissemination = "e" | "dissemination",
        /// Binomial tree rooted at rank 0, gather then release (not one of
        /// Cenju-4's; the default on shared memory, where its subtrees are
        /// the blocks of ranks that share a CPU).
        Binomial = "binomial",
    }
}

algo_enum! {
    /// Broadcast algorithms.
    BcastAlgo {
        /// Binomial tree.
        Binomial = "binomial",
        /// Scatter, then ring allgather (large messages).
        ScatterAllgather = "scatter_allgather",
        /// Binomial tree, each member reading its parent's buffer in one
        /// copy (teams all in shared memory; elsewhere `binomial`).
        Direct = "direct",
    }
}

algo_enum! {
    /// Allgather algorithms.
    AllgatherAlgo {
        /// Ring: N-1 steps to the right neighbour.
        Ring = "ring",
        /// Recursive doubling (power-of-two teams; others run Bruck, its
        /// generalization).
        RecursiveDoubling = "recursive_doubling" | "rd",
        /// Bruck: ceil(log2 N) rounds, any team size.
        Bruck = "bruck",
        /// Every member reads every other member's block in one copy (teams
        /// all in shared memory; elsewhere `ring`).
        Direct = "direct",
    }
}

algo_enum! {
    /// Alltoall algorithms.
    AlltoallAlgo {
        /// Pairwise exchange: every block goes straight to its destination.
        Pairwise = "pairwise",
        /// Bruck: ceil(log2 N) rounds of packed blocks (small blocks).
        Bruck = "bruck",
        /// Every member reads its block of every other member's buffer in
        /// one copy (teams all in shared memory; elsewhere `pairwise`).
        Direct = "direct",
        /// Allgather of whole send buffers (recursive doubling or Bruck),
        /// each member keeping its blocks: log2 N messages per member
        /// instead of N - 1, for tiny blocks (moves N times the data).
        Allgather = "allgather",
    }
}

algo_enum! {
    /// Algorithms of the vector collectives, `allgatherv` and `alltoallv`
    /// (blocks of different lengths). `Auto` picks per block, by its sender.
    VectorAlgo {
        /// Every block straight from its owner into its destination's
        /// scratch area (with its header when it fits the slot, else in a
        /// second round), then copied out.
        Exchange = "exchange" | "pairwise",
        /// Every block lent: its receiver reads it out of the sender's
        /// buffer in one copy (teams all in shared memory; elsewhere
        /// `exchange`).
        Direct = "direct",
    }
}

algo_enum! {
    /// Allreduce algorithms.
    AllreduceAlgo {
        /// Recursive doubling (non-powers of two fold the extra ranks in first).
        RecursiveDoubling = "recursive_doubling" | "rd",
        /// Reduce-scatter by recursive halving, then allgather by recursive
        /// doubling (Rabenseifner).
        ReduceScatterAllgather = "reduce_scatter_allgather" | "rsag",
        /// Ring reduce-scatter, then ring allgather.
        Ring = "ring",
    }
}

algo_enum! {
    /// Reduce (to a root) algorithms.
    ReduceAlgo {
        /// Binomial tree toward the root.
        Binomial = "binomial",
        /// Ring reduce-scatter, then every block to the root (large data).
        ReduceScatterGather = "reduce_scatter_gather" | "rsg",
    }
}

algo_enum! {
    /// How [`Team::multicast`](crate::Team::multicast) moves the data
    /// (`MW_MCAST`). `Auto`: IP multicast where the team's network allows it
    /// (checked when the team's first multicast group is created), the tree
    /// otherwise.
    McastAlgo {
        /// The software tree (binomial, pipelined); never IP multicast.
        Tree = "tree" | "0" | "off",
        /// IP multicast with Nack repair; creating a group fails where the
        /// network does not allow it.
        Ip = "ip" | "1" | "on",
    }
}

/// The algorithm each collective uses when a call does not name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollTuning {
    /// `MW_COLL_BARRIER`
    pub barrier: BarrierAlgo,
    /// `MW_COLL_BCAST`
    pub bcast: BcastAlgo,
    /// `MW_COLL_ALLGATHER`
    pub allgather: AllgatherAlgo,
    /// `MW_COLL_ALLTOALL`
    pub alltoall: AlltoallAlgo,
    /// `MW_COLL_ALLREDUCE`
    pub allreduce: AllreduceAlgo,
    /// `MW_COLL_REDUCE`
    pub reduce: ReduceAlgo,
    /// `MW_COLL_VECTOR` (allgatherv and alltoallv)
    pub vector: VectorAlgo,
    /// `MW_MCAST`
    pub mcast: McastAlgo,
    /// `MW_COLL_SPREAD=0`: never move a waiting thread to another CPU (see
    /// docs/collectives.md); by default ranks of an
    /// all-shared-memory team crowded on one CPU are nudged apart once.
    pub no_spread: bool,
    /// `MW_COLL_TRIALS`: where allgather and alltoall try a single-copy
    /// and a slot algorithm on their first calls of a size before keeping
    /// the faster (see docs/collectives.md).
    pub trials: CollTrials,
}

/// Where automatic choices are made by trials (`MW_COLL_TRIALS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CollTrials {
    /// Default (`1`): on teams whose single-copy reads go through a costly
    /// kernel copy, from 16 KiB blocks.
    #[default]
    Costly,
    /// `0`: never; the fixed rules decide everything.
    Off,
    /// `always`: on every team that can read directly, from 16 KiB blocks
    /// (for tests and for comparing with the fixed rules).
    Always,
}

impl CollTrials {
    /// Parses a `MW_COLL_TRIALS` value.
    pub fn parse(name: &str) -> Option<CollTrials> {
        match name.trim() {
            "1" | "on" | "yes" | "costly" => Some(CollTrials::Costly),
            "0" | "off" | "no" => Some(CollTrials::Off),
            "always" => Some(CollTrials::Always),
            _ => None,
        }
    }
}

impl CollTuning {
    /// Defaults overridden through `lookup` (config.rs passes the environment).
    pub fn from_lookup(lookup: &impl Fn(&str) -> Option<String>) -> Result<CollTuning> {
        fn get<T>(
            lookup: &impl Fn(&str) -> Option<String>,
            name: &str,
            parse: fn(&str) -> Option<T>,
        ) -> Result<Option<T>> {
            match lookup(name) {
                None => Ok(None),
                Some(v) => {
                    parse(&v).map(Some).ok_or(Error::InvalidArgument("unknown MW_COLL_* or MW_MCAST algorithm name"))
                }
            }
        }
        let mut t = CollTuning::default();
        if let Some(a) = get(lookup, "MW_COLL_BARRIER", BarrierAlgo::parse)? {
            t.barrier = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_BCAST", BcastAlgo::parse)? {
            t.bcast = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_ALLGATHER", AllgatherAlgo::parse)? {
            t.allgather = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_ALLTOALL", AlltoallAlgo::parse)? {
            t.alltoall = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_ALLREDUCE", AllreduceAlgo::parse)? {
            t.allreduce = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_REDUCE", ReduceAlgo::parse)? {
            t.reduce = a;
        }
        if let Some(a) = get(lookup, "MW_COLL_VECTOR", VectorAlgo::parse)? {
            t.vector = a;
        }
        if let Some(a) = get(lookup, "MW_MCAST", McastAlgo::parse)? {
            t.mcast = a;
        }
        if let Some(v) = lookup("MW_COLL_TRIALS") {
            t.trials = CollTrials::parse(&v).ok_or(Error::InvalidArgument("MW_COLL_TRIALS must be 0, 1 or always"))?;
        }
        if let Some(v) = lookup("MW_COLL_SPREAD") {
            t.no_spread = match v.trim() {
                "0" | "off" | "no" => true,
                "1" | "on" | "yes" => false,
                _ => return Err(Error::InvalidArgument("MW_COLL_SPREAD must be 0 or 1")),
            };
        }
        Ok(t)
    }
}

// ------------------------------------------------------- automatic choices

/// Bytes per block from which single-copy algorithms win on teams that can
/// run them: below, the system call costs more than the second copy.
const DIRECT_FROM: usize = 16 << 10;

/// Bytes per block from which a single-copy read through a costly kernel
/// copy beats the two `memcpy`s of the slot algorithms on a team with a
/// CPU per member. Measured with ranks as processes on the 2-vCPU VMs
/// (2026-11-25, `process_vm_readv` of 64 KiB ~4.5 µs against ~1.5 for a
/// `memcpy`): at 2 ranks, 16 KiB bcast 2.3-2.9 µs binomial vs 2.9-3.3
/// direct, allgather 2.8-3.5 RD vs 4.3-4.4, alltoall 2.8 pairwise vs 3.4;
/// at 64 KiB direct wins (6.3-6.9 vs 8.8-11, 8.9-9.3 vs 10-13, 7.5 vs 10.3).
/// For allgather and alltoall this rule only orders the two candidates of
/// their trials (`trial_pays`): on another host it picked the slower one.
const COSTLY_DIRECT_FROM: usize = 64 << 10;

/// Whether an automatic choice may take a single-copy algorithm for
/// `bytes` per block, on a team whose single-copy reads are `single_copy`
/// (`None`: impossible, `Some(costly)`: possible, through a costly kernel
/// copy for some member) with `cpu_block` members per CPU (see
/// `Team::direct_pays`).
pub(crate) fn single_copy_pays(
    single_copy: Option<bool>,
    cpu_block: usize,
    bytes: usize,
    oversubscribed_too: bool,
) -> bool {
    match single_copy {
        None => false,
        Some(false) => true,
        Some(true) => (oversubscribed_too || cpu_block == 1) && bytes >= COSTLY_DIRECT_FROM,
    }
}

/// Whether trials, not a fixed rule, choose between a single-copy and a
/// slot algorithm for `block`-byte blocks on a team whose single-copy reads
/// are `single_copy` (as for [`single_copy_pays`]): by default where they go
/// through a costly kernel copy, from `DIRECT_FROM`. There the faster kind
/// changes from host to host (`trial.rs`).
pub(crate) fn trial_pays(mode: CollTrials, single_copy: Option<bool>, block: usize) -> bool {
    let team = match mode {
        CollTrials::Off => false,
        CollTrials::Costly => single_copy == Some(true),
        CollTrials::Always => single_copy.is_some(),
    };
    team && block >= DIRECT_FROM
}

pub(crate) fn pick_barrier(p: usize, local: bool) -> BarrierAlgo {
    // Measured (docs/collectives.md): over UDP the binary tree's 2(N-1) messages beat
    // dissemination's N·log2 N at 3-4 ranks on 2 cores; at 2 ranks one
    // concurrent exchange wins, at 8 the log2 N rounds do. Over shared
    // memory a message is a store, and what costs is handing a CPU to
    // another rank: the binomial tree, whose subtrees share a CPU
    // (`wait.rs`), hands over least.
    if local && p >= 3 {
        BarrierAlgo::Binomial
    } else if (3..=4).contains(&p) {
        BarrierAlgo::Tree
    } else {
        BarrierAlgo::Dissemination
    }
}

pub(crate) fn pick_bcast(bytes: usize, p: usize, slot: usize, direct: bool) -> BcastAlgo {
    if direct && bytes >= DIRECT_FROM {
        BcastAlgo::Direct
    } else if p <= 2 || bytes <= slot {
        BcastAlgo::Binomial
    } else {
        BcastAlgo::ScatterAllgather
    }
}

pub(crate) fn pick_allgather(block: usize, p: usize, direct: bool) -> AllgatherAlgo {
    if direct && block >= DIRECT_FROM {
        AllgatherAlgo::Direct
    } else if block * p <= 64 << 10 {
        if p.is_power_of_two() {
            AllgatherAlgo::RecursiveDoubling
        } else {
            AllgatherAlgo::Bruck
        }
    } else {
        AllgatherAlgo::Ring
    }
}

pub(crate) fn pick_alltoall(block: usize, p: usize, direct: bool) -> AlltoallAlgo {
    // Measured (docs/collectives.md): at 4 ranks, 8-64 B blocks, the allgather's two
    // rounds take about half the time of pairwise's three waits (shared
    // memory, oversubscribed) and no longer over UDP; at 2 ranks both are
    // one exchange and pairwise moves less.
    if direct && block >= DIRECT_FROM {
        AlltoallAlgo::Direct
    } else if (3..8).contains(&p) && block * p <= 512 {
        AlltoallAlgo::Allgather
    } else if p >= 8 && block <= 256 {
        AlltoallAlgo::Bruck
    } else {
        AlltoallAlgo::Pairwise
    }
}

/// The vector collectives' choice for one block (made by its sender):
/// lent for a single-copy read when the team can run them and the block is
/// as large as the equal-block collectives need to take them.
pub(crate) fn pick_vector(block: usize, direct: bool) -> VectorAlgo {
    if direct && block >= DIRECT_FROM {
        VectorAlgo::Direct
    } else {
        VectorAlgo::Exchange
    }
}

pub(crate) fn pick_allreduce(bytes: usize, p: usize) -> AllreduceAlgo {
    if bytes <= 16 << 10 || p <= 2 {
        AllreduceAlgo::RecursiveDoubling
    } else if p.is_power_of_two() {
        AllreduceAlgo::ReduceScatterAllgather
    } else {
        AllreduceAlgo::Ring
    }
}

/// Whether a multicast on a team with IP multicast goes by IP. Measured on
/// loopback (docs/collectives.md): the IP path's ready/done exchange with the root costs
/// more than the tree's few hops for small data on small teams; from 64 KiB,
/// or from 8 ranks, sending once beats forwarding.
pub(crate) fn pick_mcast_ip(bytes: usize, p: usize) -> bool {
    bytes >= 64 << 10 || p >= 8
}

pub(crate) fn pick_reduce(bytes: usize, slot: usize) -> ReduceAlgo {
    if bytes <= slot {
        ReduceAlgo::Binomial
    } else {
        ReduceAlgo::ReduceScatterGather
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_both_ways() {
        for &a in BarrierAlgo::ALL {
            assert_eq!(BarrierAlgo::parse(a.name()), Some(a));
        }
        assert_eq!(BarrierAlgo::parse("E"), Some(BarrierAlgo::Dissemination));
        assert_eq!(AllreduceAlgo::parse("rsag"), Some(AllreduceAlgo::ReduceScatterAllgather));
        assert_eq!(AlltoallAlgo::parse("nope"), None);
        let map = |k: &str| match k {
            "MW_COLL_BARRIER" => Some("c".to_string()),
            "MW_COLL_ALLGATHER" => Some("ring".to_string()),
            _ => None,
        };
        let t = CollTuning::from_lookup(&map).unwrap();
        assert_eq!(t.barrier, BarrierAlgo::Counters);
        assert_eq!(t.allgather, AllgatherAlgo::Ring);
        assert_eq!(t.bcast, BcastAlgo::Auto);
        assert!(CollTuning::from_lookup(&|_: &str| Some("bogus".to_string())).is_err());
        for name in ["direct", "allgather"] {
            assert!(AlltoallAlgo::parse(name).is_some(), "{name}");
        }
        assert_eq!(BcastAlgo::parse("direct"), Some(BcastAlgo::Direct));
        assert_eq!(AllgatherAlgo::parse("direct"), Some(AllgatherAlgo::Direct));
        assert!(!t.no_spread, "spreading is on by default");
        let spread = |v: &'static str| move |k: &str| (k == "MW_COLL_SPREAD").then(|| v.to_string());
        assert!(CollTuning::from_lookup(&spread("0")).unwrap().no_spread);
        assert!(!CollTuning::from_lookup(&spread("1")).unwrap().no_spread);
        assert!(CollTuning::from_lookup(&spread("sometimes")).is_err());
    }

    /// The automatic choices: single copy only on teams that can run it and
    /// from `DIRECT_FROM`; tiny alltoalls at 3-7 ranks by allgather.
    #[test]
    fn automatic_choices() {
        let slot = 64 << 10;
        assert_eq!(pick_bcast(8, 4, slot, true), BcastAlgo::Binomial);
        assert_eq!(pick_bcast(DIRECT_FROM, 4, slot, true), BcastAlgo::Direct);
        assert_eq!(pick_bcast(DIRECT_FROM, 4, slot, false), BcastAlgo::Binomial);
        assert_eq!(pick_bcast(1 << 20, 4, slot, false), BcastAlgo::ScatterAllgather);
        assert_eq!(pick_allgather(64 << 10, 2, true), AllgatherAlgo::Direct);
        assert_eq!(pick_allgather(64 << 10, 2, false), AllgatherAlgo::Ring);
        assert_eq!(pick_allgather(8, 4, true), AllgatherAlgo::RecursiveDoubling);
        assert_eq!(pick_allgather(8, 3, false), AllgatherAlgo::Bruck);
        assert_eq!(pick_alltoall(64 << 10, 4, true), AlltoallAlgo::Direct);
        // Single copy through a cheap copy, or none at all.
        assert!(single_copy_pays(Some(false), 2, 16 << 10, false));
        assert!(!single_copy_pays(None, 1, 1 << 20, true));
        // Through a costly kernel copy: from 64 KiB with a CPU per member,
        // never for allgather/alltoall on an oversubscribed team, and for
        // the broadcast's CPU blocks there too.
        assert!(!single_copy_pays(Some(true), 1, 16 << 10, false));
        assert!(single_copy_pays(Some(true), 1, 64 << 10, false));
        assert!(!single_copy_pays(Some(true), 2, 1 << 20, false));
        assert!(single_copy_pays(Some(true), 2, 64 << 10, true));
        assert_eq!(pick_alltoall(64 << 10, 4, false), AlltoallAlgo::Pairwise);
        assert_eq!(pick_alltoall(8, 2, false), AlltoallAlgo::Pairwise);
        for p in 3..8 {
            assert_eq!(pick_alltoall(8, p, true), AlltoallAlgo::Allgather, "p {p}");
            assert_eq!(pick_alltoall(8, p, false), AlltoallAlgo::Allgather, "p {p}");
        }
        assert_eq!(pick_alltoall(256, 4, false), AlltoallAlgo::Pairwise);
        assert_eq!(pick_alltoall(8, 8, false), AlltoallAlgo::Bruck);
        assert_eq!(pick_barrier(4, true), BarrierAlgo::Binomial);
        assert_eq!(pick_barrier(4, false), BarrierAlgo::Tree);
        assert_eq!(pick_barrier(2, true), BarrierAlgo::Dissemination);
    }
}
