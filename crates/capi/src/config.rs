//! The endpoint configuration as C sees it: an `mw_config` object holding
//! settings named like the `MW_*` environment variables (the one table of
//! settings, `mw_core::ENV_VARS`), each validated when it is set,
//! and `mw_init_with` (in `endpoint`) turning it into core's `Config`.
//!
//! Owns: the settings a C caller chose and the environment snapshot they
//! override. Must not: parse or check values itself: every value goes
//! through `Config::from_lookup`, so C and the environment accept and refuse
//! exactly the same things, with the same messages.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ffi::c_char;

use mw_core::Config;
use mw_core::ENV_VARS;

use crate::ffi;
use crate::status::{guard, mw_status, Failure};

/// Endpoint settings for `mw_init_with`. Opaque; created by
/// `mw_config_new` or `mw_config_from_env`, changed by `mw_config_set*`,
/// freed by `mw_config_free`.
#[derive(Debug, Clone, Default)]
pub struct mw_config {
    /// The environment's `MW_*` variables when made by `mw_config_from_env`.
    base: BTreeMap<String, String>,
    /// What the caller set, by variable name; overrides `base`.
    settings: BTreeMap<String, String>,
}

impl mw_config {
    /// Core's configuration for these settings (defaults for the rest).
    pub(crate) fn build(&self) -> Result<Config, Failure> {
        Ok(Config::from_lookup(|name| self.settings.get(name).or_else(|| self.base.get(name)).cloned())?)
    }
}

/// How incoming operations make progress (`mw_config_set_progress`,
/// `MW_PROGRESS`): one of `MW_PROGRESS_*`.
pub type mw_progress_mode = u32;
/// The application drives progress whenever it calls memwire; a light
/// background thread steps in when it has not for a few milliseconds (default).
pub const MW_PROGRESS_AUTO: mw_progress_mode = 0;
/// Only when the application calls memwire.
pub const MW_PROGRESS_INLINE: mw_progress_mode = 1;
/// A background thread serves every arrival at once.
pub const MW_PROGRESS_THREAD: mw_progress_mode = 2;

/// Transports toward same-host peers (`mw_config_set_transport`,
/// `MW_TRANSPORT`): one of `MW_TRANSPORT_*`.
pub type mw_transport_choice = u32;
/// Shared memory with same-host peers, UDP with the others (default).
pub const MW_TRANSPORT_AUTO: mw_transport_choice = 0;
/// UDP with every peer.
pub const MW_TRANSPORT_UDP: mw_transport_choice = 1;

/// Whether `name` is a setting of the table (entries like
/// `"MW_FAULT_DROP / MW_FAULT_DUP"` name several).
fn is_setting(name: &str) -> bool {
    ENV_VARS.iter().any(|(names, _)| names.split('/').any(|n| n.trim() == name))
}

/// Sets `name` to `value` in `config` if the result is a valid configuration.
fn set(config: &mut mw_config, name: &str, value: String) -> Result<(), Failure> {
    if !is_setting(name) {
        return Err(Failure {
            status: mw_status::MW_ERR_INVALID_ARGUMENT,
            message: Cow::Owned(format!("{name} is not a memwire setting (the README's MW_* table lists them)")),
        });
    }
    let mut next = config.clone();
    next.settings.insert(name.to_owned(), value);
    next.build()?;
    *config = next;
    Ok(())
}

/// Creates a configuration with every setting at its default (the
/// environment is not read) and stores it in `*config`.
///
/// # Safety
/// `config` must be NULL or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn mw_config_new(config: *mut *mut mw_config) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let out = unsafe { ffi::out(config, "config") }?;
        out.set(ffi::give(mw_config::default()));
        Ok(())
    })
}

/// Creates a configuration from the process's `MW_*` environment variables
/// as they are now (what `mw_init` would use), for the caller to adjust;
/// stores it in `*config`. A bad variable is `MW_ERR_INVALID_ARGUMENT`,
/// naming it in `mw_last_error`.
///
/// # Safety
/// `config` must be NULL or valid for writing one pointer.
#[no_mangle]
pub unsafe extern "C" fn mw_config_from_env(config: *mut *mut mw_config) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let out = unsafe { ffi::out(config, "config") }?;
        // Not `env::vars`, which panics on a variable that is not UTF-8;
        // such a setting is ignored, as `mw_init` ignores it.
        let base = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, _)| is_setting(name))
            .collect();
        let made = mw_config { base, settings: BTreeMap::new() };
        made.build()?;
        out.set(ffi::give(made));
        Ok(())
    })
}

/// Sets one setting by its environment variable's name and value syntax
/// (the README's `MW_*` table, e.g. `"MW_PEER_DEAD_MS"`, `"500"`), checked
/// now: an unknown name or a bad value is `MW_ERR_INVALID_ARGUMENT` (the
/// reason in `mw_last_error`) and leaves `config` unchanged. It overrides
/// the environment's value in a configuration from `mw_config_from_env`.
///
/// # Safety
/// `config` must be NULL or a live configuration used by no other thread;
/// `name` and `value` NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn mw_config_set(config: *mut mw_config, name: *const c_char, value: *const c_char) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (config, name, value) =
            unsafe { (ffi::obj_mut(config, "config")?, ffi::str(name, "name")?, ffi::str(value, "value")?) };
        set(config, name, value.to_owned())
    })
}

/// Sets the progress mode (`MW_PROGRESS`): one of `MW_PROGRESS_*`; another
/// value is `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` must be NULL or a live configuration used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_config_set_progress(config: *mut mw_config, mode: mw_progress_mode) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let config = unsafe { ffi::obj_mut(config, "config") }?;
        let value = match mode {
            MW_PROGRESS_AUTO => "auto",
            MW_PROGRESS_INLINE => "inline",
            MW_PROGRESS_THREAD => "thread",
            _ => return Err(Failure::invalid("mode must be one of MW_PROGRESS_*")),
        };
        set(config, "MW_PROGRESS", value.to_owned())
    })
}

/// Sets the transport toward same-host peers (`MW_TRANSPORT`): one of
/// `MW_TRANSPORT_*`; another value is `MW_ERR_INVALID_ARGUMENT`. Every rank
/// of one host must choose alike.
///
/// # Safety
/// `config` must be NULL or a live configuration used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_config_set_transport(config: *mut mw_config, transport: mw_transport_choice) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let config = unsafe { ffi::obj_mut(config, "config") }?;
        let value = match transport {
            MW_TRANSPORT_AUTO => "auto",
            MW_TRANSPORT_UDP => "udp",
            _ => return Err(Failure::invalid("transport must be one of MW_TRANSPORT_*")),
        };
        set(config, "MW_TRANSPORT", value.to_owned())
    })
}

/// Sets the silence after which a peer this rank waits on is declared
/// down (`MW_PEER_DEAD_MS`), in milliseconds; 0 is `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` must be NULL or a live configuration used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_config_set_peer_dead_ms(config: *mut mw_config, ms: u64) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let config = unsafe { ffi::obj_mut(config, "config") }?;
        set(config, "MW_PEER_DEAD_MS", ms.to_string())
    })
}

/// Sets the largest datagram sent, header included (`MW_MTU`), in bytes:
/// 256 to 65507, otherwise `MW_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` must be NULL or a live configuration used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_config_set_mtu(config: *mut mw_config, bytes: u32) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let config = unsafe { ffi::obj_mut(config, "config") }?;
        set(config, "MW_MTU", bytes.to_string())
    })
}

/// Frees a configuration and sets `*config` to NULL (a NULL `*config` is a
/// no-op). An endpoint made from it is not affected.
///
/// # Safety
/// `config` must be NULL or point to the caller's variable holding NULL or
/// a configuration from this library, used by no other thread.
#[no_mangle]
pub unsafe extern "C" fn mw_config_free(config: *mut *mut mw_config) -> mw_status {
    guard(|| {
        // SAFETY: forwarded contract.
        drop(unsafe { ffi::take(config, "config") }?);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_by_core_and_refusals_change_nothing() {
        let mut config = mw_config::default();
        set(&mut config, "MW_PEER_DEAD_MS", "500".into()).unwrap();
        set(&mut config, "MW_FAULT_DUP", "0.01".into()).unwrap();
        let err = set(&mut config, "MW_PEER_DEAD_MS", "0".into()).unwrap_err();
        assert_eq!(err.status, mw_status::MW_ERR_INVALID_ARGUMENT);
        assert!(err.message.contains("MW_PEER_DEAD_MS"), "{}", err.message);
        let err = set(&mut config, "MW_NO_SUCH", "1".into()).unwrap_err();
        assert!(err.message.contains("MW_NO_SUCH"), "{}", err.message);
        assert!(set(&mut config, "MW_RANK", "0".into()).is_err(), "bootstrap variables are not settings");
        let built = config.build().unwrap();
        assert_eq!(built.peer_dead_after, std::time::Duration::from_millis(500));
        // Asking for faults makes UDP the transport, as in the environment.
        assert_eq!(built.transport, mw_core::TransportChoice::Udp);
    }

    #[test]
    fn settings_override_the_environment_snapshot() {
        let config = mw_config {
            base: [("MW_MTU".to_owned(), "9000".to_owned()), ("MW_STATS".to_owned(), "1".to_owned())].into(),
            settings: [("MW_MTU".to_owned(), "1200".to_owned())].into(),
        };
        let built = config.build().unwrap();
        assert_eq!((built.max_datagram, built.print_stats), (Some(1200), true));
    }
}
