//! Which CPUs each rank on this host may run on (`--cpu-bind`).
//!
//! Binding is opt-in. On a machine with many cores or several memory nodes
//! it keeps a rank next to the memory it touched first and away from its
//! neighbours' caches, which is why Open MPI binds by default; on a 2-CPU
//! machine it changed nothing while the machine was quiet, hurt the tail
//! latency badly when another process wanted a CPU meanwhile (a bound rank
//! cannot move away; measurements: docs/perf-notes.md, "CPU binding"),
//! and a bound rank's child processes inherit its one CPU (a helper that
//! spins beside its parent then runs by the time slice). So mwrun leaves
//! placement to the scheduler unless asked.
//!
//! Owns: reading the CPUs mwrun itself may use (its affinity, which honours
//! `taskset`, cpusets and cgroups), putting them in topology order, dealing
//! them out as equal shares to the ranks started on this host, and the
//! `MW_BACKGROUND_CPUS` list that lets a bound rank's library threads use
//! all of them.
//! Must not: apply a binding (`sys::bind_before_exec` does, in the child) or
//! bind ranks started on other hosts, whose CPUs mwrun cannot see.

use std::path::Path;

use clap::ValueEnum;

/// How ranks started on this host are bound to CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CpuBind {
    /// `share` when each of this host's ranks can have at least one CPU of
    /// its own and there are at least two of them; otherwise `none` (an
    /// oversubscribed job is better spread by the scheduler, and a lone
    /// rank has nobody to be placed against).
    Auto,
    /// Each rank gets an equal share of the CPUs mwrun may use, whole cores
    /// together where the shares allow; with more ranks than CPUs they take
    /// the CPUs in turn.
    Share,
    /// Leave placement to the scheduler (default).
    None,
}

/// The CPUs mwrun may run on, in topology order: by package, then core,
/// then CPU number, so that a core's hardware threads are neighbours and a
/// contiguous share holds whole cores.
pub fn usable_in_topology_order() -> std::io::Result<Vec<usize>> {
    let allowed = rustix::thread::sched_getaffinity(None)?;
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU).filter(|&cpu| allowed.is_set(cpu)).collect();
    let sysfs = Path::new("/sys/devices/system/cpu");
    let read = |cpu: usize, what: &str| -> Option<u64> {
        std::fs::read_to_string(sysfs.join(format!("cpu{cpu}/topology/{what}"))).ok()?.trim().parse().ok()
    };
    Ok(topology_order(&cpus, |cpu| (read(cpu, "physical_package_id"), read(cpu, "core_id"))))
}

/// `cpus` sorted by `(package, core, cpu)` as `place` reports them; a CPU
/// whose topology is unknown sorts by its number alone (all of them, then,
/// keep their order).
fn topology_order(cpus: &[usize], place: impl Fn(usize) -> (Option<u64>, Option<u64>)) -> Vec<usize> {
    let mut keyed: Vec<_> = cpus.iter().map(|&cpu| (place(cpu), cpu)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, cpu)| cpu).collect()
}

/// The CPUs of each of `ranks` ranks on this host under `policy`, given the
/// usable CPUs in topology order; `None` when they are not bound.
pub fn plan(policy: CpuBind, usable: &[usize], ranks: usize) -> Option<Vec<Vec<usize>>> {
    let bind = match policy {
        CpuBind::None => false,
        CpuBind::Share => true,
        CpuBind::Auto => ranks >= 2 && ranks <= usable.len(),
    };
    (bind && !usable.is_empty() && ranks > 0).then(|| shares(usable, ranks))
}

/// Deals `cpus` out to `ranks` ranks: contiguous shares, the first
/// `len % ranks` of them one CPU larger; with fewer CPUs than ranks, one
/// CPU each, in turn.
fn shares(cpus: &[usize], ranks: usize) -> Vec<Vec<usize>> {
    if cpus.len() < ranks {
        return (0..ranks).map(|rank| vec![cpus[rank % cpus.len()]]).collect();
    }
    let (each, extra) = (cpus.len() / ranks, cpus.len() % ranks);
    let mut start = 0;
    (0..ranks)
        .map(|rank| {
            let len = each + usize::from(rank < extra);
            let share = cpus[start..start + len].to_vec();
            start += len;
            share
        })
        .collect()
}

pub use rustix::thread::CpuSet;

/// The variable that tells a rank's library where its own threads may run
/// (memwire's `Config::background_cpus`).
pub const BACKGROUND_CPUS: &str = "MW_BACKGROUND_CPUS";

/// How one rank is bound.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The rank's own share.
    pub share: CpuSet,
    /// Every CPU of the job on this host, as `MW_BACKGROUND_CPUS` (`None`
    /// when the caller set that variable).
    pub background: Option<String>,
}

/// `cpus` in the kernel's list syntax, ascending (`0,1,2,5`).
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// `cpus` as a kernel CPU set.
pub fn cpu_set(cpus: &[usize]) -> CpuSet {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_binds_only_a_job_that_fits_and_has_someone_to_talk_to() {
        let two = [0, 1];
        assert_eq!(plan(CpuBind::Auto, &two, 2), Some(vec![vec![0], vec![1]]));
        assert_eq!(plan(CpuBind::Auto, &two, 1), None, "a lone rank");
        assert_eq!(plan(CpuBind::Auto, &two, 4), None, "oversubscribed");
        assert_eq!(plan(CpuBind::None, &two, 2), None);
        assert_eq!(plan(CpuBind::Share, &two, 1), Some(vec![vec![0, 1]]));
        assert_eq!(plan(CpuBind::Share, &two, 4), Some(vec![vec![0], vec![1], vec![0], vec![1]]));
        assert_eq!(plan(CpuBind::Share, &[], 2), None, "no CPU known");
    }

    #[test]
    fn shares_are_contiguous_and_cover_every_cpu_once() {
        let cpus: Vec<usize> = (0..10).collect();
        let dealt = shares(&cpus, 3);
        assert_eq!(dealt, [vec![0, 1, 2, 3], vec![4, 5, 6], vec![7, 8, 9]]);
        assert_eq!(shares(&cpus, 10).concat(), cpus);
    }

    #[test]
    fn hardware_threads_of_a_core_stay_together() {
        // Two packages of two cores of two threads, numbered as Linux often
        // does: first every core's first thread, then the second threads.
        let place = |cpu: usize| (Some((cpu / 2 % 2) as u64), Some((cpu % 2) as u64));
        let ordered = topology_order(&(0..8).collect::<Vec<_>>(), place);
        assert_eq!(ordered, [0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(shares(&ordered, 2), [vec![0, 4, 1, 5], vec![2, 6, 3, 7]], "one package each");
        assert_eq!(shares(&ordered, 4), [vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]], "one core each");
        let unknown = topology_order(&[3, 1, 2], |_| (None, None));
        assert_eq!(unknown, [1, 2, 3]);
    }

    #[test]
    fn cpu_lists_are_ascending_and_comma_separated() {
        assert_eq!(cpu_list(&[4, 0, 1]), "0,1,4");
        assert_eq!(cpu_list(&[3]), "3");
    }

    #[test]
    fn this_process_has_at_least_one_usable_cpu() {
        let usable = usable_in_topology_order().unwrap();
        assert!(!usable.is_empty());
        let set = cpu_set(&usable);
        assert_eq!(set.count() as usize, usable.len());
    }
}
