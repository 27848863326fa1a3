//! Joins the job, allgathers every rank's number and host, checks the result,
//! and meets the others at a barrier. Exits non-zero if anything is off.
//!
//! ```text
//! cargo build --example allgather_ranks -p mw-bootstrap
//! mwrun -n 4 target/debug/examples/allgather_ranks
//! # or by hand, without mwrun (rank 0 serves the rendezvous):
//! MW_RANK=0 MW_SIZE=2 MW_BOOTSTRAP=127.0.0.1:7000 target/debug/examples/allgather_ranks &
//! MW_RANK=1 MW_SIZE=2 MW_BOOTSTRAP=127.0.0.1:7000 target/debug/examples/allgather_ranks
//! ```

use std::process::ExitCode;

use mw_bootstrap::{Bootstrap, BootstrapError};

fn main() -> ExitCode {
    match run() {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("allgather_ranks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let mut boot = Bootstrap::from_env()?;
    let info = boot.info().clone();
    let blobs = boot.allgather(&info.rank.to_le_bytes())?;
    let ranks: Vec<u32> = blobs
        .iter()
        .map(|b| b.as_slice().try_into().map(u32::from_le_bytes))
        .collect::<Result<_, _>>()
        .map_err(|_| BootstrapError::Protocol("a rank sent a blob that is not 4 bytes".into()))?;
    if ranks != (0..info.size).collect::<Vec<_>>() {
        boot.abort("allgather returned the ranks out of order");
        return Err(format!("allgather returned {ranks:?}").into());
    }
    boot.barrier()?;
    Ok(format!(
        "rank {} of {}: allgather ok (local {} of {} on {})",
        info.rank, info.size, info.local_rank, info.local_size, info.host
    ))
}
