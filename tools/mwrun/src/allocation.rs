//! Running inside a Slurm allocation (`salloc`, `sbatch`): the allocation's
//! nodes become mwrun's hosts and srun starts the ranks on them.
//!
//! Owns: reading the allocation from Slurm's variables (`SLURM_JOB_ID`,
//! `SLURM_JOB_NODELIST` and the slots per node), expanding Slurm's hostlist
//! syntax (`cn[01-04,7],gpu1`) and its repeat counts (`2(x3),1`), and the
//! srun command line that starts one rank on one node. Must not: read the
//! process environment itself (main passes a lookup) or start anything.

use crate::hosts::{HostError, HostSpec};

/// The words before the node name and the rank's `env ... PROG ARGS`: one
/// task on that one node, as a step of the surrounding job. `--overlap`
/// lets the ranks' steps share the allocation's CPUs (each rank is a step
/// of its own, and mwrun may place more ranks than tasks were allocated);
/// `--mpi=none` keeps the ranks on mwrun's rendezvous whatever the
/// cluster's MpiDefault; `--kill-on-bad-exit` ends a step whose task fails.
pub const SRUN_WORDS: [&str; 9] = [
    "srun",
    "--nodes=1",
    "--ntasks=1",
    "--overlap",
    "--mpi=none",
    "--kill-on-bad-exit=1",
    "--quiet",
    "--job-name=mwrun",
    "--nodelist",
];

/// The allocation's nodes with their task slots, when this process runs in
/// one (`SLURM_JOB_ID` and `SLURM_JOB_NODELIST` set). Slots come from
/// `SLURM_TASKS_PER_NODE`, else `SLURM_JOB_CPUS_PER_NODE`, else one a node.
pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Vec<HostSpec>>, HostError> {
    let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    let (Some(_job), Some(nodelist)) = (get("SLURM_JOB_ID"), get("SLURM_JOB_NODELIST")) else {
        return Ok(None);
    };
    let nodes = expand_hostlist(&nodelist).map_err(|reason| HostError::Slurm {
        var: "SLURM_JOB_NODELIST",
        value: nodelist.clone(),
        reason,
    })?;
    let slots = match ["SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"].into_iter().find_map(|v| Some((v, get(v)?))) {
        Some((var, value)) => {
            let counts =
                expand_counts(&value).map_err(|reason| HostError::Slurm { var, value: value.clone(), reason })?;
            if counts.len() != nodes.len() {
                let reason = format!("{} counts for the {} nodes of SLURM_JOB_NODELIST", counts.len(), nodes.len());
                return Err(HostError::Slurm { var, value, reason });
            }
            counts.into_iter().map(Some).collect()
        }
        None => vec![None; nodes.len()],
    };
    Ok(Some(nodes.into_iter().zip(slots).map(|(name, slots)| HostSpec { name, slots }).collect()))
}

/// Expands a Slurm hostlist: comma-separated entries, each a name with any
/// number of bracketed range lists (`n[1-3,7]`, `r[1-2]n[01-02]`); a range
/// keeps the width of its zero-padded start (`[08-10]` gives 08, 09, 10).
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for entry in split_top_level(list)? {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err("an empty entry".into());
        }
        hosts.extend(expand_entry(entry)?);
    }
    if hosts.is_empty() {
        return Err("no hosts".into());
    }
    Ok(hosts)
}

/// Splits at commas outside brackets.
fn split_top_level(list: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0u32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err("nested brackets".into()),
            ']' if depth == 1 => depth = 0,
            ']' => return Err("a ']' without '['".into()),
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("a '[' without ']'".into());
    }
    parts.push(&list[start..]);
    Ok(parts)
}

fn expand_entry(entry: &str) -> Result<Vec<String>, String> {
    let Some(open) = entry.find('[') else {
        return Ok(vec![entry.to_owned()]);
    };
    let close = open + entry[open..].find(']').ok_or("a '[' without ']'")?;
    let (prefix, ranges, rest) = (&entry[..open], &entry[open + 1..close], &entry[close + 1..]);
    let tails = expand_entry(rest)?;
    let mut names = Vec::new();
    for range in ranges.split(',') {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let bad = || format!("bad range {range:?} in {entry:?}");
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) || !last.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let (low, high): (u64, u64) = (first.parse().map_err(|_| bad())?, last.parse().map_err(|_| bad())?);
        if high < low || high - low >= 100_000 {
            return Err(bad());
        }
        let width = if first.starts_with('0') { first.len() } else { 0 };
        for n in low..=high {
            for tail in &tails {
                names.push(format!("{prefix}{n:0width$}{tail}"));
            }
        }
    }
    Ok(names)
}

/// Expands Slurm's per-node counts: `4`, `2(x3),1` (three nodes of 2, one of 1).
pub fn expand_counts(text: &str) -> Result<Vec<u32>, String> {
    let mut counts = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let (count, repeat) = match item.split_once("(x") {
            Some((count, repeat)) => {
                let repeat = repeat.strip_suffix(')').ok_or_else(|| format!("bad repeat in {item:?}"))?;
                (count, repeat.parse::<u32>().map_err(|_| format!("bad repeat in {item:?}"))?)
            }
            None => (item, 1),
        };
        let count: u32 = count.parse().map_err(|_| format!("bad count {item:?}"))?;
        if count == 0 || repeat == 0 || repeat > 100_000 {
            return Err(format!("bad count {item:?}"));
        }
        counts.extend(std::iter::repeat_n(count, repeat as usize));
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn hostlists_expand_as_slurm_writes_them() {
        assert_eq!(expand_hostlist("vm").unwrap(), ["vm"]);
        assert_eq!(expand_hostlist("h[1-4,7]").unwrap(), ["h1", "h2", "h3", "h4", "h7"]);
        assert_eq!(expand_hostlist("cn[08-10],gpu1").unwrap(), ["cn08", "cn09", "cn10", "gpu1"]);
        assert_eq!(expand_hostlist("r[1-2]n[01-02]").unwrap(), ["r1n01", "r1n02", "r2n01", "r2n02"]);
        assert_eq!(expand_hostlist("a,b[3],c-d").unwrap(), ["a", "b3", "c-d"]);
        assert_eq!(expand_hostlist("mw[1-4]").unwrap(), ["mw1", "mw2", "mw3", "mw4"]);
        for bad in ["", "h[1-", "h1-2]", "h[2-1]", "h[a-b]", "h[1,,2]", "a,,b", "h[[1]]", "h[-3]"] {
            assert!(expand_hostlist(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn counts_expand_with_repeats() {
        assert_eq!(expand_counts("4").unwrap(), [4]);
        assert_eq!(expand_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        for bad in ["", "0", "2(x0)", "2(x3", "x", "2(xy)"] {
            assert!(expand_counts(bad).is_err(), "{bad:?}");
        }
    }

    fn allocation(vars: &[(&str, &str)]) -> Result<Option<Vec<HostSpec>>, HostError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        from_env(|name| map.get(name).cloned())
    }

    #[test]
    fn an_allocation_gives_its_nodes_and_slots() {
        assert!(allocation(&[("SLURM_JOB_NODELIST", "a")]).unwrap().is_none());
        let hosts = allocation(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n[1-3]"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_JOB_CPUS_PER_NODE", "8(x3)"),
        ])
        .unwrap()
        .unwrap();
        let slots: Vec<_> = hosts.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(slots, [("n1", Some(2)), ("n2", Some(2)), ("n3", Some(1))]);
        let cpus = allocation(&[("SLURM_JOB_ID", "7"), ("SLURM_JOB_NODELIST", "n1"), ("SLURM_JOB_CPUS_PER_NODE", "4")]);
        assert_eq!(cpus.unwrap().unwrap()[0].slots, Some(4));
        let err = allocation(&[("SLURM_JOB_ID", "7"), ("SLURM_JOB_NODELIST", "n[1-2]"), ("SLURM_TASKS_PER_NODE", "1")])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("SLURM_TASKS_PER_NODE=\"1\": 1 counts for the 2 nodes"), "{err}");
        let err = allocation(&[("SLURM_JOB_ID", "7"), ("SLURM_JOB_NODELIST", "n[1-")]).unwrap_err().to_string();
        assert!(err.starts_with("SLURM_JOB_NODELIST=\"n[1-\""), "{err}");
    }
}
