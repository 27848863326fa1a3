//! The `MW_*` environment variables of the launch, and how
//! [`Bootstrap::from_env`](crate::Bootstrap::from_env) chooses a launch mode
//! from them. Parsing only: nothing here connects anywhere.
//!
//! Owns: [`VARS`] (every variable and its meaning), the launch-mode decision
//! and the parse of each value into a typed plan, with an error naming the
//! variable. Must not: open sockets or files, or guess: a half-set launch (e.g.
//! `MW_RANK` without `MW_SIZE`) is an error, not a default.

use std::time::Duration;

use crate::error::BootstrapError;
use crate::job::job_key_from_hex;
use crate::pmi::pmix::PmixPlan;
use crate::pmi::PmiPlan;

/// This process's rank, `0..MW_SIZE`.
pub const RANK: &str = "MW_RANK";
/// Number of ranks in the job.
pub const SIZE: &str = "MW_SIZE";
/// `host:port` of the rendezvous server (mwrun's, or rank 0's in env mode).
pub const BOOTSTRAP: &str = "MW_BOOTSTRAP";
/// The job key, 32 hex digits. Set by mwrun; absent in plain env mode, where
/// rank 0 makes one and hands it out.
pub const JOB_KEY: &str = "MW_JOB_KEY";
/// Rank among the ranks on this host (optional, with `MW_LOCAL_SIZE`).
pub const LOCAL_RANK: &str = "MW_LOCAL_RANK";
/// Number of ranks on this host (optional, with `MW_LOCAL_RANK`).
pub const LOCAL_SIZE: &str = "MW_LOCAL_SIZE";
/// The launcher's name for this rank's host (optional).
pub const HOST: &str = "MW_HOST";
/// Seconds any one bootstrap step may wait (decimal allowed).
pub const TIMEOUT: &str = "MW_BOOTSTRAP_TIMEOUT";
/// Which launcher interface to use: `pmix`, `2`, `1`, or `off` to ignore
/// the launcher (default: PMIx when `PMIX_RANK` and `PMIX_NAMESPACE` are
/// set, else PMI-2 when `PMI_JOBID` is, as Slurm's `--mpi=pmi2` sets it,
/// else PMI-1).
pub const PMI: &str = "MW_PMI";
/// The PMIx library to load under a PMIx launcher (default `libpmix.so.2`,
/// then `libpmix.so`, found as the dynamic loader finds libraries).
pub const PMIX_LIB: &str = "MW_PMIX_LIB";

/// Every variable this crate reads, with a one-line description, for help
/// texts and documentation.
pub const VARS: &[(&str, &str)] = &[
    (RANK, "this process's rank, 0..MW_SIZE"),
    (SIZE, "number of ranks in the job"),
    (BOOTSTRAP, "host:port of the rendezvous server (mwrun's, or rank 0's own in env mode)"),
    (JOB_KEY, "job key, 32 hex digits (set by mwrun; if absent, rank 0 serves the rendezvous and makes one)"),
    (LOCAL_RANK, "rank among the ranks on this host (default: computed from host names)"),
    (LOCAL_SIZE, "number of ranks on this host (set together with MW_LOCAL_RANK)"),
    (HOST, "name of this rank's host (default: the kernel's host name)"),
    (TIMEOUT, "seconds one bootstrap step may wait before failing (default 60)"),
    (PMI, "launcher interface: pmix, 2, 1 or off (default: pmix if PMIX_RANK is set, else 2 if PMI_JOBID is, else 1)"),
    (PMIX_LIB, "the PMIx library to load under a PMIx launcher (default: libpmix.so.2, then libpmix.so)"),
];

/// How long a bootstrap step waits when `MW_BOOTSTRAP_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The launch mode chosen from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Launch {
    /// Nothing says otherwise: a job of one.
    Single { job_key: Option<[u8; 16]>, host: Option<String> },
    /// Ranks meet at a TCP rendezvous server.
    Rendezvous(RendezvousPlan),
    /// Ranks meet through a PMI launcher's key-value space.
    Pmi(PmiPlan),
    /// Ranks meet through a PMIx launcher, by its library.
    Pmix(PmixPlan),
}

/// What a rank needs to join a TCP rendezvous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RendezvousPlan {
    /// `host:port` of the server.
    pub addr: String,
    pub rank: u32,
    pub size: u32,
    /// `None` in plain env mode: the server hands the key out.
    pub job_key: Option<[u8; 16]>,
    /// `(local_rank, local_size)` when the launcher said; else computed.
    pub local: Option<(u32, u32)>,
    pub host: Option<String>,
    pub timeout: Duration,
}

impl RendezvousPlan {
    /// In plain env mode (no launcher, hence no key) rank 0 runs the server.
    pub(crate) fn serves(&self) -> bool {
        self.rank == 0 && self.job_key.is_none()
    }
}

/// Chooses the launch mode. Empty variables count as unset.
///
/// Order: any of `MW_RANK`/`MW_SIZE`/`MW_BOOTSTRAP` set → the MW rendezvous
/// (they must then be complete and consistent); otherwise a PMIx launcher's
/// variables → PMIx ([`detect_pmix`]); otherwise a PMI launcher's → PMI-2
/// or PMI-1 ([`detect_pmi`]); otherwise a job of one.
pub(crate) fn detect(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Launch, BootstrapError> {
    let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    let rank = get(RANK);
    let size = get(SIZE);
    let addr = get(BOOTSTRAP);
    let job_key = get(JOB_KEY).map(|v| job_key_from_hex(&v)).transpose()?;
    let host = get(HOST).map(|h| h.trim().to_owned());

    if rank.is_none() && size.is_none() && addr.is_none() {
        if let Some(plan) = detect_pmix(&get, job_key)? {
            return Ok(Launch::Pmix(plan));
        }
        return match detect_pmi(&get, job_key)? {
            Some(plan) => Ok(Launch::Pmi(plan)),
            None => Ok(Launch::Single { job_key, host }),
        };
    }

    let missing = |var, because: &str| BootstrapError::MissingEnv { var, because: because.to_owned() };
    let rank = rank.ok_or_else(|| missing(RANK, "MW_SIZE or MW_BOOTSTRAP is, so this looks like a launched job"))?;
    let size = size.ok_or_else(|| missing(SIZE, "MW_RANK or MW_BOOTSTRAP is, so this looks like a launched job"))?;
    let rank = parse_u32(RANK, &rank)?;
    let size = parse_u32(SIZE, &size)?;
    if size == 0 {
        return Err(invalid(SIZE, size.to_string(), "a job has at least one rank"));
    }
    if rank >= size {
        return Err(invalid(RANK, rank.to_string(), &format!("must be less than MW_SIZE={size}")));
    }
    let local = parse_local(&get, size)?;
    let timeout = get(TIMEOUT).map(|v| parse_timeout(&v)).transpose()?.unwrap_or(DEFAULT_TIMEOUT);

    let Some(addr) = addr else {
        if size == 1 {
            return Ok(Launch::Single { job_key, host });
        }
        return Err(missing(BOOTSTRAP, &format!("MW_SIZE={size}: ranks need a rendezvous address to find each other")));
    };
    let addr = addr.trim().to_owned();
    if !addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
        return Err(invalid(BOOTSTRAP, addr, "must be host:port"));
    }
    Ok(Launch::Rendezvous(RendezvousPlan { addr, rank, size, job_key, local, host, timeout }))
}

/// The PMIx launch, if a PMIx launcher started this process: it sets
/// `PMIX_RANK` and `PMIX_NAMESPACE` (Slurm's `mpi/pmix`, Open MPI's
/// `mpirun`, PRRTE), and the library finds its server from the other
/// `PMIX_*` variables. `MW_PMI=1|2|off` skips it.
fn detect_pmix(
    get: &dyn Fn(&str) -> Option<String>,
    job_key: Option<[u8; 16]>,
) -> Result<Option<PmixPlan>, BootstrapError> {
    let choice = get(PMI).map(|v| v.trim().to_ascii_lowercase());
    let forced = match choice.as_deref() {
        None => false,
        Some("pmix" | "x") => true,
        Some("1" | "2" | "off" | "0" | "none") => return Ok(None),
        Some(other) => return Err(invalid(PMI, other.to_owned(), "must be pmix, 2, 1 or off")),
    };
    let (Some(rank), Some(namespace)) = (get("PMIX_RANK"), get("PMIX_NAMESPACE")) else {
        if forced {
            return Err(BootstrapError::MissingEnv {
                var: "PMIX_RANK",
                because: "MW_PMI=pmix asks for a PMIx launcher, which sets it and PMIX_NAMESPACE".into(),
            });
        }
        return Ok(None);
    };
    let rank = parse_u32("PMIX_RANK", &rank)?;
    let host = get(HOST).map(|h| h.trim().to_owned());
    let library = get(PMIX_LIB).map(|l| l.trim().to_owned());
    let timeout = get(TIMEOUT).map(|v| parse_timeout(&v)).transpose()?.unwrap_or(DEFAULT_TIMEOUT);
    Ok(Some(PmixPlan { rank, namespace: namespace.trim().to_owned(), library, host, job_key, timeout }))
}

/// The PMI launch, if the launcher left its socket (`PMI_FD`).
///
/// Hydra and Slurm both set `PMI_FD`, `PMI_RANK` and `PMI_SIZE`, and both
/// accept either protocol on that socket; Slurm's `mpi/pmi2` plugin also
/// sets `PMI_JOBID`, so that picks PMI-2, the protocol Slurm is built
/// around, and anything else gets PMI-1, which every PMI server speaks.
/// `MW_PMI` overrides the choice.
fn detect_pmi(
    get: &dyn Fn(&str) -> Option<String>,
    job_key: Option<[u8; 16]>,
) -> Result<Option<PmiPlan>, BootstrapError> {
    const LAUNCHER: &str = "a PMI launcher (MPICH mpiexec/Hydra or Slurm srun --mpi=pmi2)";
    let choice = get(PMI).map(|v| v.trim().to_ascii_lowercase());
    if matches!(choice.as_deref(), Some("off" | "0" | "none")) {
        return Ok(None);
    }
    let jobid = get("PMI_JOBID").map(|v| v.trim().to_owned());
    let version = match choice.as_deref() {
        None => {
            if jobid.is_some() {
                2
            } else {
                1
            }
        }
        Some("1") => 1,
        Some("2") => 2,
        Some(other) => return Err(invalid(PMI, other.to_owned(), "must be pmix, 2, 1 or off")),
    };
    let Some(fd) = get("PMI_FD") else {
        // PMI_PORT (a TCP address instead of an inherited socket) is how
        // old MPICH process managers and singleton init talk PMI.
        for evidence in ["PMI_PORT", "PMI_RANK"] {
            if get(evidence).is_some() {
                return Err(BootstrapError::UnsupportedLauncher { launcher: LAUNCHER, evidence });
            }
        }
        return Ok(None);
    };
    let fd = fd.trim().parse().map_err(|_| invalid("PMI_FD", fd.clone(), "must be a descriptor number"))?;
    let need = |var: &'static str| {
        get(var).ok_or_else(|| BootstrapError::MissingEnv {
            var,
            because: "PMI_FD is, so this looks like a PMI launch".into(),
        })
    };
    let rank = parse_u32("PMI_RANK", &need("PMI_RANK")?)?;
    let size = parse_u32("PMI_SIZE", &need("PMI_SIZE")?)?;
    if size == 0 || rank >= size {
        return Err(invalid("PMI_RANK", rank.to_string(), &format!("must be less than PMI_SIZE={size}")));
    }
    // The launcher's name for this host: Hydra exports the -hosts entry,
    // Slurm the node name; both beat the kernel's name, which network
    // namespaces and containers share.
    let host = [HOST, "MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "SLURMD_NODENAME"]
        .into_iter()
        .find_map(get)
        .map(|h| h.trim().to_owned());
    let timeout = get(TIMEOUT).map(|v| parse_timeout(&v)).transpose()?.unwrap_or(DEFAULT_TIMEOUT);
    Ok(Some(PmiPlan { version, fd, rank, size, jobid, host, job_key, timeout }))
}

fn invalid(var: &'static str, value: String, reason: &str) -> BootstrapError {
    BootstrapError::InvalidEnv { var, value, reason: reason.to_owned() }
}

fn parse_u32(var: &'static str, value: &str) -> Result<u32, BootstrapError> {
    value.trim().parse().map_err(|_| invalid(var, value.to_owned(), "must be a non-negative integer"))
}

fn parse_local(get: &dyn Fn(&str) -> Option<String>, size: u32) -> Result<Option<(u32, u32)>, BootstrapError> {
    let (rank, local_size) = match (get(LOCAL_RANK), get(LOCAL_SIZE)) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(BootstrapError::MissingEnv { var: LOCAL_SIZE, because: "MW_LOCAL_RANK is".into() })
        }
        (None, Some(_)) => {
            return Err(BootstrapError::MissingEnv { var: LOCAL_RANK, because: "MW_LOCAL_SIZE is".into() })
        }
        (Some(r), Some(s)) => (parse_u32(LOCAL_RANK, &r)?, parse_u32(LOCAL_SIZE, &s)?),
    };
    if local_size == 0 || local_size > size {
        return Err(invalid(LOCAL_SIZE, local_size.to_string(), &format!("must be in 1..=MW_SIZE={size}")));
    }
    if rank >= local_size {
        return Err(invalid(LOCAL_RANK, rank.to_string(), &format!("must be less than MW_LOCAL_SIZE={local_size}")));
    }
    Ok(Some((rank, local_size)))
}

/// Parses decimal seconds (`60`, `0.5`) into a positive duration.
pub(crate) fn parse_timeout(value: &str) -> Result<Duration, BootstrapError> {
    let bad = || invalid(TIMEOUT, value.to_owned(), "must be a positive number of seconds, e.g. 60 or 0.5");
    let secs: f64 = value.trim().parse().map_err(|_| bad())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn detect_with(vars: &[(&str, &str)]) -> Result<Launch, BootstrapError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        detect(&|name| map.get(name).cloned())
    }

    fn err(vars: &[(&str, &str)]) -> String {
        detect_with(vars).unwrap_err().to_string()
    }

    const KEY: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn nothing_set_is_a_job_of_one() {
        assert_eq!(detect_with(&[]).unwrap(), Launch::Single { job_key: None, host: None });
        assert_eq!(detect_with(&[(RANK, "")]).unwrap(), Launch::Single { job_key: None, host: None });
    }

    #[test]
    fn mwrun_variables_make_a_rendezvous_client() {
        let launch = detect_with(&[
            (RANK, "2"),
            (SIZE, "4"),
            (BOOTSTRAP, "127.0.0.1:4000"),
            (JOB_KEY, KEY),
            (LOCAL_RANK, "0"),
            (LOCAL_SIZE, "2"),
            (HOST, "a"),
            (TIMEOUT, "2.5"),
        ])
        .unwrap();
        let Launch::Rendezvous(plan) = launch else { panic!("{launch:?}") };
        assert_eq!((plan.rank, plan.size, plan.addr.as_str()), (2, 4, "127.0.0.1:4000"));
        assert_eq!(plan.job_key, Some(core::array::from_fn(|i| i as u8)));
        assert_eq!((plan.local, plan.host.as_deref()), (Some((0, 2)), Some("a")));
        assert_eq!(plan.timeout, Duration::from_millis(2500));
        assert!(!plan.serves());
    }

    #[test]
    fn plain_env_mode_rank_zero_serves() {
        let Launch::Rendezvous(plan) = detect_with(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "node1:5000")]).unwrap()
        else {
            panic!()
        };
        assert!(plan.serves());
        assert_eq!(plan.timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn size_one_without_address_is_a_job_of_one() {
        assert!(matches!(detect_with(&[(RANK, "0"), (SIZE, "1")]).unwrap(), Launch::Single { .. }));
    }

    #[test]
    fn errors_name_the_variable_and_the_problem() {
        assert_eq!(
            err(&[(RANK, "1")]),
            "MW_SIZE is not set, but MW_RANK or MW_BOOTSTRAP is, so this looks like a launched job"
        );
        assert!(err(&[(SIZE, "2"), (BOOTSTRAP, "h:1")]).starts_with("MW_RANK is not set"));
        assert_eq!(err(&[(RANK, "x"), (SIZE, "2")]), "MW_RANK=\"x\": must be a non-negative integer");
        assert_eq!(err(&[(RANK, "2"), (SIZE, "2")]), "MW_RANK=\"2\": must be less than MW_SIZE=2");
        assert_eq!(err(&[(RANK, "0"), (SIZE, "0")]), "MW_SIZE=\"0\": a job has at least one rank");
        assert!(err(&[(RANK, "0"), (SIZE, "2")]).starts_with("MW_BOOTSTRAP is not set, but MW_SIZE=2"));
        assert_eq!(
            err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "nohost")]),
            "MW_BOOTSTRAP=\"nohost\": must be host:port"
        );
        assert!(err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:99999")]).contains("host:port"));
        assert!(err(&[(JOB_KEY, "beef")]).starts_with("MW_JOB_KEY=\"beef\": must be exactly 32 hex digits"));
        assert!(
            err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:1"), (TIMEOUT, "-1")]).starts_with("MW_BOOTSTRAP_TIMEOUT")
        );
        assert!(err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:1"), (TIMEOUT, "soon")]).contains("seconds"));
        assert!(err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:1"), (LOCAL_RANK, "0")])
            .starts_with("MW_LOCAL_SIZE is not set"));
        assert!(err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:1"), (LOCAL_RANK, "2"), (LOCAL_SIZE, "2")])
            .starts_with("MW_LOCAL_RANK=\"2\""));
        assert!(err(&[(RANK, "0"), (SIZE, "2"), (BOOTSTRAP, "h:1"), (LOCAL_RANK, "0"), (LOCAL_SIZE, "3")])
            .starts_with("MW_LOCAL_SIZE=\"3\""));
    }

    fn pmi_plan(vars: &[(&str, &str)]) -> PmiPlan {
        match detect_with(vars).unwrap() {
            Launch::Pmi(plan) => plan,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hydra_gets_pmi1_and_slurm_gets_pmi2() {
        let hydra = pmi_plan(&[
            ("PMI_FD", "6"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "4"),
            ("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", "node7"),
        ]);
        assert_eq!((hydra.version, hydra.fd, hydra.rank, hydra.size), (1, 6, 1, 4));
        assert_eq!(hydra.host.as_deref(), Some("node7"));
        let slurm = pmi_plan(&[
            ("PMI_FD", "5"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "2"),
            ("PMI_JOBID", "1234.0"),
            ("SLURMD_NODENAME", "cn01"),
            (JOB_KEY, KEY),
        ]);
        assert_eq!((slurm.version, slurm.jobid.as_deref(), slurm.host.as_deref()), (2, Some("1234.0"), Some("cn01")));
        assert_eq!(slurm.job_key, Some(core::array::from_fn(|i| i as u8)));
        let forced = pmi_plan(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2"), (PMI, "2")]);
        assert_eq!(forced.version, 2);
        let forced = pmi_plan(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("PMI_JOBID", "7"), (PMI, "1")]);
        assert_eq!(forced.version, 1);
    }

    #[test]
    fn a_pmix_launch_is_chosen_before_pmi() {
        let vars = [
            ("PMIX_RANK", "3"),
            ("PMIX_NAMESPACE", "slurm.pmix.3.0"),
            ("PMI_FD", "5"),
            ("PMI_RANK", "3"),
            ("PMI_SIZE", "4"),
            (PMIX_LIB, "/opt/pmix/lib/libpmix.so"),
        ];
        let Launch::Pmix(plan) = detect_with(&vars).unwrap() else { panic!() };
        assert_eq!((plan.rank, plan.namespace.as_str()), (3, "slurm.pmix.3.0"));
        assert_eq!(plan.library.as_deref(), Some("/opt/pmix/lib/libpmix.so"));
        let mut pmi2 = vars.to_vec();
        pmi2.push((PMI, "2"));
        assert!(matches!(detect_with(&pmi2).unwrap(), Launch::Pmi(PmiPlan { version: 2, .. })));
        let mut mw = vars.to_vec();
        mw.extend([(RANK, "0"), (SIZE, "1")]);
        assert!(matches!(detect_with(&mw).unwrap(), Launch::Single { .. }));
        assert!(err(&[(PMI, "pmix")]).starts_with("PMIX_RANK is not set, but MW_PMI=pmix"));
        assert!(err(&[("PMIX_RANK", "x"), ("PMIX_NAMESPACE", "n")]).starts_with("PMIX_RANK=\"x\""));
        assert!(err(&[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "n"), (PMI, "3")]).contains("pmix, 2, 1 or off"));
    }

    #[test]
    fn selection_order_is_mw_then_pmi_then_single() {
        // The MW variables win when both are present.
        let both = detect_with(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "1"), (RANK, "0"), (SIZE, "1")]);
        assert!(matches!(both.unwrap(), Launch::Single { .. }));
        let off = detect_with(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2"), (PMI, "off")]);
        assert!(matches!(off.unwrap(), Launch::Single { .. }));
    }

    #[test]
    fn pmi_without_a_socket_is_refused_not_ignored() {
        let e = err(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]);
        assert!(e.contains("PMI_RANK") && e.contains("mwrun"), "{e}");
        assert!(err(&[("PMI_PORT", "host:1234")]).contains("PMI_PORT"));
        assert!(err(&[("PMI_FD", "x"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]).starts_with("PMI_FD=\"x\""));
        assert!(err(&[("PMI_FD", "5"), ("PMI_SIZE", "2")]).starts_with("PMI_RANK is not set"));
        assert!(err(&[("PMI_FD", "5"), ("PMI_RANK", "2"), ("PMI_SIZE", "2")]).contains("less than PMI_SIZE=2"));
        assert!(err(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2"), (PMI, "3")]).starts_with("MW_PMI"));
    }

    #[test]
    fn timeouts_parse_as_decimal_seconds() {
        assert_eq!(parse_timeout("60").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_timeout(" 0.25 ").unwrap(), Duration::from_millis(250));
        for bad in ["0", "-3", "NaN", "inf", "1e30", ""] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }
}
