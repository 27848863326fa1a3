//! `MW_FAULT_*` read from the real process environment. Kept alone in its
//! own test binary: it mutates the environment, which no other test in the
//! same process may read concurrently.

use mw_transport::fault::{ENV_DROP, ENV_DUP, ENV_REORDER, ENV_SEED};
use mw_transport::{FaultConfigError, FaultInjector};

#[test]
fn fault_injection_is_configured_from_the_environment() {
    for var in [ENV_DROP, ENV_DUP, ENV_REORDER, ENV_SEED] {
        std::env::remove_var(var);
    }
    assert!(FaultInjector::from_env().unwrap().is_none(), "off by default");

    std::env::set_var(ENV_DROP, "5%");
    std::env::set_var(ENV_SEED, "7");
    let inj = FaultInjector::from_env().unwrap().expect("drop configured");
    assert_eq!(inj.config().drop, 0.05);
    assert_eq!(inj.config().seed, 7);

    std::env::set_var(ENV_REORDER, "lots");
    let err = FaultInjector::from_env().unwrap_err();
    assert!(matches!(err, FaultConfigError::NotAProbability { var, .. } if var == ENV_REORDER));
    assert_eq!(
        err.to_string(),
        "MW_FAULT_REORDER=\"lots\": expected a probability such as 0.05 or a percentage such as 5%"
    );
}
