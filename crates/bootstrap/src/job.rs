//! What a rank knows about its job: [`JobInfo`] and the job key helpers.
//!
//! Owns: drawing the key from the OS random source, its hex form, and the local
//! rank and size derived from the ranks' host names. Must not: print or
//! `Debug`-format the key (it is redacted), or decide how ranks meet (the
//! launch modes do).

use std::fmt;

use crate::error::BootstrapError;

/// Who this process is within its job. Filled once by
/// [`Bootstrap`](crate::Bootstrap) and never changed afterwards.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobInfo {
    /// This process's rank, `0..size`.
    pub rank: u32,
    /// Number of ranks in the job.
    pub size: u32,
    /// 128-bit secret shared by every rank of the job and no one else; the
    /// data path derives its job id and MAC keys from it.
    pub job_key: [u8; 16],
    /// Rank among the ranks placed on the same host, `0..local_size`.
    pub local_rank: u32,
    /// Number of ranks on this host.
    pub local_size: u32,
    /// Name of the host this rank runs on, as the launcher knows it (`MW_HOST`)
    /// or else the kernel's host name. Ranks with equal `host` share a machine.
    pub host: String,
}

impl JobInfo {
    /// The job of one: rank 0 of 1, alone on its host.
    pub fn single(job_key: [u8; 16], host: String) -> JobInfo {
        JobInfo { rank: 0, size: 1, job_key, local_rank: 0, local_size: 1, host }
    }
}

// Written by hand so that logging a `JobInfo` never leaks the key.
impl fmt::Debug for JobInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobInfo")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("job_key", &"<redacted>")
            .field("local_rank", &self.local_rank)
            .field("local_size", &self.local_size)
            .field("host", &self.host)
            .finish()
    }
}

/// Draws a fresh job key from the operating system's random source.
pub fn random_job_key() -> Result<[u8; 16], BootstrapError> {
    let mut key = [0u8; 16];
    getrandom::getrandom(&mut key).map_err(|e| BootstrapError::Random(e.to_string()))?;
    Ok(key)
}

/// Formats a job key as the 32 lower-case hex digits `MW_JOB_KEY` carries.
pub fn job_key_to_hex(key: &[u8; 16]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses the 32 hex digits of `MW_JOB_KEY` (either case).
pub fn job_key_from_hex(text: &str) -> Result<[u8; 16], BootstrapError> {
    let invalid = |reason: &str| BootstrapError::InvalidEnv {
        var: crate::env::JOB_KEY,
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let digits = text.trim().as_bytes();
    if digits.len() != 32 {
        return Err(invalid("must be exactly 32 hex digits (128 bits)"));
    }
    let mut key = [0u8; 16];
    for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| invalid("must be hex digits"))?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| invalid("must be hex digits"))?;
    }
    Ok(key)
}

/// The kernel's name for this machine, for [`JobInfo::host`] when the launcher
/// did not name the host. Read from procfs to stay free of `unsafe`.
pub(crate) fn kernel_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Computes `(local_rank, local_size)` of `rank` from every rank's host name,
/// in rank order: ranks sharing a host are numbered by global rank.
pub(crate) fn local_placement(hosts: &[&[u8]], rank: u32) -> (u32, u32) {
    let mine = hosts[rank as usize];
    let local_rank = hosts[..rank as usize].iter().filter(|h| **h == mine).count() as u32;
    let local_size = hosts.iter().filter(|h| **h == mine).count() as u32;
    (local_rank, local_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let key: [u8; 16] = core::array::from_fn(|i| (i as u8).wrapping_mul(37));
        let hex = job_key_to_hex(&key);
        assert_eq!(hex.len(), 32);
        assert_eq!(job_key_from_hex(&hex).unwrap(), key);
        assert_eq!(job_key_from_hex(&hex.to_uppercase()).unwrap(), key);
    }

    #[test]
    fn bad_hex_is_rejected_with_the_variable_name() {
        for bad in [
            "",
            "abc",
            "zz000000000000000000000000000000",
            "0123456789abcdef0123456789abcdef00",
            "é0000000000000000000000000000000",
        ] {
            let err = job_key_from_hex(bad).unwrap_err().to_string();
            assert!(err.starts_with("MW_JOB_KEY="), "{err}");
        }
    }

    #[test]
    fn debug_redacts_the_key() {
        let info = JobInfo::single([0xab; 16], "h".into());
        assert!(!format!("{info:?}").contains("ab, ab") && !format!("{info:?}").contains("171"));
    }

    #[test]
    fn local_placement_counts_ranks_on_the_same_host() {
        let hosts: Vec<&[u8]> = vec![b"a", b"b", b"a", b"a", b"b"];
        assert_eq!(local_placement(&hosts, 0), (0, 3));
        assert_eq!(local_placement(&hosts, 2), (1, 3));
        assert_eq!(local_placement(&hosts, 3), (2, 3));
        assert_eq!(local_placement(&hosts, 4), (1, 2));
    }
}
