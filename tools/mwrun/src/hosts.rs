//! Host lists (`--hosts`, `--hostfile`) and the placement of ranks on hosts.
//!
//! Owns: parsing `host[:slots]` lists and hostfiles into [`HostSpec`]s with
//! errors naming the entry or file line, and the block and round-robin
//! placement with its local rank and size. Must not: resolve or contact hosts
//! (whether a name is this host is a string comparison), or start anything.

use crate::cli::MapBy;

/// One host entry: a name and, if given, how many ranks it should take per
/// placement pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub name: String,
    pub slots: Option<u32>,
}

/// A malformed host list or hostfile.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// An entry of `--hosts`.
    #[error("--hosts entry {entry:?}: {reason}")]
    List { entry: String, reason: &'static str },
    /// A line of the hostfile.
    #[error("{path}:{line}: {reason}")]
    File { path: String, line: usize, reason: String },
    /// The hostfile names no host.
    #[error("{path}: no hosts listed")]
    EmptyFile { path: String },
    /// A Slurm allocation variable mwrun cannot read.
    #[error("{var}={value:?}: {reason}")]
    Slurm { var: &'static str, value: String, reason: String },
    /// The hostfile cannot be read.
    #[error("cannot read hostfile {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

/// Where one rank runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The host's name as listed.
    pub host: String,
    /// Rank among the ranks on that host.
    pub local_rank: u32,
    /// Ranks on that host.
    pub local_size: u32,
}

/// Parses `--hosts h1,h2:4,...`.
pub fn parse_host_list(list: &str) -> Result<Vec<HostSpec>, HostError> {
    list.split(',')
        .map(|entry| {
            let entry = entry.trim();
            parse_entry(entry, None).map_err(|reason| HostError::List { entry: entry.to_owned(), reason })
        })
        .collect()
}

/// Parses a hostfile's text: `host [slots=K]` or `host:K` per line, `#`
/// starts a comment.
pub fn parse_hostfile(path: &str, text: &str) -> Result<Vec<HostSpec>, HostError> {
    let mut hosts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        let Some(name) = words.next() else { continue };
        let bad = |reason: String| HostError::File { path: path.to_owned(), line: index + 1, reason };
        let mut slots = None;
        for word in words {
            let count = word.strip_prefix("slots=").ok_or_else(|| bad(format!("unknown attribute {word:?}")))?;
            slots = Some(parse_slots(count).map_err(|reason| bad(reason.to_owned()))?);
        }
        hosts.push(parse_entry(name, slots).map_err(|reason| bad(reason.to_owned()))?);
    }
    if hosts.is_empty() {
        return Err(HostError::EmptyFile { path: path.to_owned() });
    }
    Ok(hosts)
}

fn parse_entry(entry: &str, slots: Option<u32>) -> Result<HostSpec, &'static str> {
    // `host:K`, but an IPv6 literal has colons of its own.
    let (name, colon_slots) = match entry.rsplit_once(':') {
        Some((name, count)) if !name.contains(':') => (name, Some(parse_slots(count)?)),
        _ => (entry, None),
    };
    if name.is_empty() {
        return Err("empty host name");
    }
    if colon_slots.is_some() && slots.is_some() {
        return Err("slots given twice");
    }
    Ok(HostSpec { name: name.to_owned(), slots: colon_slots.or(slots) })
}

fn parse_slots(count: &str) -> Result<u32, &'static str> {
    match count.parse::<u32>() {
        Ok(0) | Err(_) => Err("slots must be a positive integer"),
        Ok(n) => Ok(n),
    }
}

/// Places `np` ranks on `hosts`. A host without a slot count has one slot.
/// When every slot is taken, placement starts another pass over the hosts.
pub fn place(hosts: &[HostSpec], np: u32, map_by: MapBy) -> Vec<Placement> {
    assert!(!hosts.is_empty(), "placement needs at least one host");
    let slots: Vec<u32> = hosts.iter().map(|h| h.slots.unwrap_or(1)).collect();
    let slots = &slots;
    // One pass over every slot, in the policy's order.
    let pass: Vec<usize> = match map_by {
        MapBy::Block => (0..hosts.len()).flat_map(|h| std::iter::repeat_n(h, slots[h] as usize)).collect(),
        MapBy::RoundRobin => {
            let deepest = slots.iter().copied().max().unwrap_or(1);
            (0..deepest).flat_map(|depth| (0..hosts.len()).filter(move |&h| slots[h] > depth)).collect()
        }
    };
    let order: Vec<usize> = pass.iter().copied().cycle().take(np as usize).collect();
    // Local numbering goes by host name: one host may be listed twice.
    let names: Vec<&str> = order.iter().map(|&h| hosts[h].name.as_str()).collect();
    names
        .iter()
        .enumerate()
        .map(|(rank, name)| Placement {
            host: (*name).to_owned(),
            local_rank: names[..rank].iter().filter(|n| *n == name).count() as u32,
            local_size: names.iter().filter(|n| *n == name).count() as u32,
        })
        .collect()
}

/// Whether `name` is this machine, so its ranks start without a launcher.
pub fn is_local_host(name: &str, my_hostname: &str) -> bool {
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_owned();
    matches!(name, "localhost" | "127.0.0.1" | "::1") || name == my_hostname || short(name) == short(my_hostname)
}

/// The kernel's name for this machine (procfs keeps this free of `unsafe`).
pub fn my_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &str) -> Vec<HostSpec> {
        parse_host_list(list).unwrap()
    }

    fn names(placements: &[Placement]) -> Vec<&str> {
        placements.iter().map(|p| p.host.as_str()).collect()
    }

    #[test]
    fn host_lists_parse() {
        assert_eq!(
            hosts("a, b:3,10.0.0.1:2"),
            [
                HostSpec { name: "a".into(), slots: None },
                HostSpec { name: "b".into(), slots: Some(3) },
                HostSpec { name: "10.0.0.1".into(), slots: Some(2) },
            ]
        );
        assert_eq!(hosts("fe80::1")[0].name, "fe80::1");
        for bad in ["a,,b", "a:0", "a:x", ":2"] {
            assert!(parse_host_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostfiles_parse_with_comments_and_slots() {
        let text = "# cluster\nnode1 slots=4\n\n  node2   # spare\nnode3:2\n";
        let parsed = parse_hostfile("hf", text).unwrap();
        let slots: Vec<_> = parsed.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(slots, [("node1", Some(4)), ("node2", None), ("node3", Some(2))]);
        let err = parse_hostfile("hf", "a\nb cores=2\n").unwrap_err().to_string();
        assert_eq!(err, "hf:2: unknown attribute \"cores=2\"");
        assert_eq!(
            parse_hostfile("hf", "a slots=0").unwrap_err().to_string(),
            "hf:1: slots must be a positive integer"
        );
        assert_eq!(parse_hostfile("hf", "# nothing\n").unwrap_err().to_string(), "hf: no hosts listed");
    }

    #[test]
    fn block_fills_slots_then_wraps() {
        assert_eq!(names(&place(&hosts("a:2,b:2"), 4, MapBy::Block)), ["a", "a", "b", "b"]);
        assert_eq!(names(&place(&hosts("a:2,b:1"), 5, MapBy::Block)), ["a", "a", "b", "a", "a"]);
        // Without slot counts every host has one slot: like Hydra's -hosts.
        assert_eq!(names(&place(&hosts("a,b"), 4, MapBy::Block)), ["a", "b", "a", "b"]);
    }

    #[test]
    fn round_robin_deals_one_per_host() {
        assert_eq!(names(&place(&hosts("a:2,b:2"), 4, MapBy::RoundRobin)), ["a", "b", "a", "b"]);
        assert_eq!(names(&place(&hosts("a:3,b:1"), 6, MapBy::RoundRobin)), ["a", "b", "a", "a", "a", "b"]);
    }

    #[test]
    fn local_ranks_count_per_host_name() {
        let placed = place(&hosts("a,b,a"), 5, MapBy::Block);
        let local: Vec<_> = placed.iter().map(|p| (p.host.as_str(), p.local_rank, p.local_size)).collect();
        assert_eq!(local, [("a", 0, 3), ("b", 0, 2), ("a", 1, 3), ("a", 2, 3), ("b", 1, 2)]);
    }

    #[test]
    fn local_host_names() {
        assert!(is_local_host("localhost", "n1.example"));
        assert!(is_local_host("n1", "n1.example"));
        assert!(is_local_host("n1.example", "n1"));
        assert!(!is_local_host("n2", "n1.example"));
    }
}
