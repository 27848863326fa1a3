//! Algorithm names, the automatic choice by size and team size, and the
//! `MW_COLL_*` overrides (parsed here, called from `config.rs`, which owns
//! the environment).
//!
//! The automatic choices were picked by measurement on loopback UDP (see
//! the README's Collectives section): per message the cost is dominated by
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
    }
}

algo_enum! {
    /// Broadcast algorithms.
    BcastAlgo {
        /// Binomial tree.
        Binomial = "binomial",
        /// Scatter, then ring allgather (large messages).
        ScatterAllgather = "scatter_allgather",
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
    }
}

algo_enum! {
    /// Alltoall algorithms.
    AlltoallAlgo {
        /// Pairwise exchange: every block goes straight to its destination.
        Pairwise = "pairwise",
        /// Bruck: ceil(log2 N) rounds of packed blocks (small blocks).
        Bruck = "bruck",
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
    /// `MW_MCAST`
    pub mcast: McastAlgo,
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
        if let Some(a) = get(lookup, "MW_MCAST", McastAlgo::parse)? {
            t.mcast = a;
        }
        Ok(t)
    }
}

// ------------------------------------------------------- automatic choices

pub(crate) fn pick_barrier(p: usize) -> BarrierAlgo {
    // Measured (README): the binary tree's 2(N-1) messages beat
    // dissemination's N·log2 N at 3-4 ranks on 2 cores; at 2 ranks one
    // concurrent exchange wins, at 8 the log2 N rounds do.
    if (3..=4).contains(&p) {
        BarrierAlgo::Tree
    } else {
        BarrierAlgo::Dissemination
    }
}

pub(crate) fn pick_bcast(bytes: usize, p: usize, slot: usize) -> BcastAlgo {
    if p <= 2 || bytes <= slot {
        BcastAlgo::Binomial
    } else {
        BcastAlgo::ScatterAllgather
    }
}

pub(crate) fn pick_allgather(block: usize, p: usize) -> AllgatherAlgo {
    if block * p <= 64 << 10 {
        if p.is_power_of_two() {
            AllgatherAlgo::RecursiveDoubling
        } else {
            AllgatherAlgo::Bruck
        }
    } else {
        AllgatherAlgo::Ring
    }
}

pub(crate) fn pick_alltoall(block: usize, p: usize) -> AlltoallAlgo {
    if p >= 8 && block <= 256 {
        AlltoallAlgo::Bruck
    } else {
        AlltoallAlgo::Pairwise
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
/// loopback (README): the IP path's ready/done exchange with the root costs
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
    }
}
