//! Communication schedules as pure functions of (rank, team size): binomial
//! trees, binary trees, block partitions. No I/O, unit-tested below.
//!
//! Owns: who talks to whom. Must not: do I/O, allocate beyond the returned
//! child lists, or depend on anything but its arguments.

/// Binomial tree rooted at team rank `root`: the parent of `rank`, or `None`
/// for the root. Relative rank `v` receives from `v` minus its lowest set bit.
pub(crate) fn binomial_parent(rank: usize, root: usize, p: usize) -> Option<usize> {
    let v = (rank + p - root) % p;
    if v == 0 {
        return None;
    }
    let parent = v & (v - 1);
    Some((parent + root) % p)
}

/// Children of `rank` in the binomial tree rooted at `root`, largest subtree
/// first (the order a sender should serve them in).
pub(crate) fn binomial_children(rank: usize, root: usize, p: usize) -> Children {
    let v = (rank + p - root) % p;
    let limit = if v == 0 { p.next_power_of_two() } else { v & v.wrapping_neg() };
    let mut out = Children { ranks: [0; usize::BITS as usize], len: 0 };
    let mut mask = limit >> 1;
    while mask > 0 {
        if v + mask < p {
            out.ranks[out.len] = (v + mask + root) % p;
            out.len += 1;
        }
        mask >>= 1;
    }
    out
}

/// The flat tree rooted at `root` (every other member hangs off the root,
/// one round): `(parent, children)` of `rank`. For teams of at most 65.
pub(crate) fn flat(rank: usize, root: usize, p: usize) -> (Option<usize>, Children) {
    let mut children = Children { ranks: [0; usize::BITS as usize], len: 0 };
    if rank != root {
        return (Some(root), children);
    }
    assert!(p <= children.ranks.len() + 1, "a flat tree of {p} members");
    for k in 1..p {
        children.ranks[children.len] = (root + k) % p;
        children.len += 1;
    }
    (None, children)
}

/// A node's children in a tree (at most one per bit of a rank), without
/// allocating: collectives compute them on every call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Children {
    ranks: [usize; usize::BITS as usize],
    len: usize,
}

impl std::ops::Deref for Children {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.ranks[..self.len]
    }
}

impl<'a> IntoIterator for &'a Children {
    type Item = &'a usize;
    type IntoIter = std::slice::Iter<'a, usize>;
    fn into_iter(self) -> Self::IntoIter {
        self.ranks[..self.len].iter()
    }
}

/// Binary tree (rank 0 at the top): parent of `rank`.
pub(crate) fn binary_parent(rank: usize) -> Option<usize> {
    (rank > 0).then(|| (rank - 1) / 2)
}

/// Binary tree: children of `rank`.
pub(crate) fn binary_children(rank: usize, p: usize) -> impl Iterator<Item = usize> + Clone {
    [2 * rank + 1, 2 * rank + 2].into_iter().filter(move |&c| c < p)
}

/// Element range of block `i` when `count` elements are cut into `parts`
/// nearly equal blocks.
pub(crate) fn block(count: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    (i * count / parts)..((i + 1) * count / parts)
}

/// Largest power of two not above `p` (p >= 1).
pub(crate) fn pow2_floor(p: usize) -> usize {
    1 << (usize::BITS - 1 - p.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_tree_is_the_root_and_everyone_else() {
        for p in 1..=9 {
            for root in 0..p {
                let (parent, children) = flat(root, root, p);
                assert_eq!(parent, None);
                let mut got: Vec<usize> = children.to_vec();
                got.sort_unstable();
                assert_eq!(got, (0..p).filter(|&r| r != root).collect::<Vec<_>>());
                for r in (0..p).filter(|&r| r != root) {
                    let (parent, children) = flat(r, root, p);
                    assert_eq!((parent, children.len()), (Some(root), 0));
                }
            }
        }
    }

    /// Every non-root has exactly one parent, and parent/children agree.
    #[test]
    fn binomial_tree_is_a_spanning_tree() {
        for p in 1..=33 {
            for root in 0..p {
                let mut reached = vec![0usize; p];
                for r in 0..p {
                    for &c in &binomial_children(r, root, p) {
                        assert_eq!(binomial_parent(c, root, p), Some(r), "p {p} root {root} child {c}");
                        reached[c] += 1;
                    }
                }
                assert_eq!(binomial_parent(root, root, p), None);
                for (r, &n) in reached.iter().enumerate() {
                    assert_eq!(n, usize::from(r != root), "p {p} root {root} rank {r}");
                }
            }
        }
    }

    #[test]
    fn binary_tree_and_blocks() {
        for p in 1..20 {
            for r in 1..p {
                let parent = binary_parent(r).unwrap();
                assert!(binary_children(parent, p).any(|c| c == r));
            }
        }
        for count in [0, 1, 7, 100] {
            for parts in 1..10 {
                let total: usize = (0..parts).map(|i| block(count, parts, i).len()).sum();
                assert_eq!(total, count);
                assert_eq!(block(count, parts, parts - 1).end, count);
            }
        }
        assert_eq!(pow2_floor(1), 1);
        assert_eq!(pow2_floor(7), 4);
        assert_eq!(pow2_floor(8), 8);
    }
}
