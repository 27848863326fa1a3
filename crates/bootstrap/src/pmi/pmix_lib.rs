//! The PMIx library, loaded at run time: the launcher's own client library
//! (`libpmix.so.2`, OpenPMIx, as Slurm's `mpi/pmix` plugin and Open MPI's
//! `mpirun` serve it) speaks the protocol, not us.
//!
//! Owns: finding and loading the library (`dlopen`, so memwire builds and
//! runs where no PMIx is installed), the handful of entry points a rank needs
//! (`PMIx_Init`, `PMIx_Put`, `PMIx_Commit`, `PMIx_Fence`, `PMIx_Get`,
//! `PMIx_Abort`, `PMIx_Finalize`, `PMIx_Error_string`), and the C structures
//! they take, laid out as `pmix_common.h` of PMIx 2.x to 5.x declares them
//! (checked against the installed header by a test). Must not: decide what
//! is put or fetched (the [`super::pmix`] session does), or hold a lock
//! while a call blocks: PMIx is thread-safe and its calls may be made from
//! any thread.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// `PMIX_SUCCESS`.
const SUCCESS: c_int = 0;
/// `PMIX_ERR_NOT_FOUND`.
pub(crate) const ERR_NOT_FOUND: c_int = -46;
/// `PMIX_RANK_WILDCARD`: the job as a whole, for job-level keys.
pub(crate) const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_GLOBAL`: a put every process of the job may get.
const SCOPE_GLOBAL: u8 = 3;
/// `PMIX_MAX_NSLEN`: a namespace's longest name.
const MAX_NSLEN: usize = 255;
/// `PMIX_MAX_KEYLEN`: a key's longest name.
const MAX_KEYLEN: usize = 511;

/// `pmix_data_type_t` values used here.
const TYPE_BOOL: u16 = 1;
const TYPE_STRING: u16 = 3;
const TYPE_UINT16: u16 = 13;
const TYPE_UINT32: u16 = 14;

/// Where the library is looked for, in order: Debian's and OpenPMIx's
/// versioned name (ABI 2 covers PMIx 2.x to 5.x), then the development link.
const LIBRARY_NAMES: [&str; 2] = ["libpmix.so.2", "libpmix.so"];

/// `pmix_proc_t`: a namespace and a rank in it.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Proc {
    nspace: [c_char; MAX_NSLEN + 1],
    rank: u32,
}

impl Proc {
    /// Process `rank` of `nspace` (names longer than PMIx allows are cut,
    /// which PMIx itself never hands out).
    pub(crate) fn new(nspace: &str, rank: u32) -> Proc {
        let mut proc = Proc { nspace: [0; MAX_NSLEN + 1], rank };
        for (slot, byte) in proc.nspace.iter_mut().zip(nspace.bytes().take(MAX_NSLEN)) {
            *slot = byte as c_char;
        }
        proc
    }

    pub(crate) fn nspace(&self) -> String {
        let bytes: Vec<u8> = self.nspace.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub(crate) fn rank(&self) -> u32 {
        self.rank
    }
}

/// `pmix_value_t`: a type tag, then a 24-byte union of every value kind
/// (8-byte aligned); only strings, booleans and small integers are used.
#[repr(C)]
struct Value {
    kind: u16,
    data: [u64; 3],
}

/// `pmix_info_t`: a key, directive flags, a value.
#[repr(C)]
struct Info {
    key: [c_char; MAX_KEYLEN + 1],
    flags: u32,
    value: Value,
}

impl Info {
    fn flag(key: &str, on: bool) -> Info {
        let mut info = Info { key: [0; MAX_KEYLEN + 1], flags: 0, value: Value { kind: TYPE_BOOL, data: [0; 3] } };
        for (slot, byte) in info.key.iter_mut().zip(key.bytes().take(MAX_KEYLEN)) {
            *slot = byte as c_char;
        }
        info.value.data[0] = u64::from(on);
        info
    }
}

/// A value fetched with [`Library::get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    Text(String),
    Number(u32),
    /// A kind this client has no use for, by its `pmix_data_type_t`.
    Other(u16),
}

/// A PMIx status code, with the library's text for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) code: c_int,
    pub(crate) text: String,
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn = unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type ValueDestructFn = unsafe extern "C" fn(*mut Value);
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The loaded library's entry points. The library is never unloaded, so
/// these stay valid for the life of the process.
pub(crate) struct Library {
    /// Which file was loaded, for messages.
    pub(crate) name: String,
    init: InitFn,
    finalize: FinalizeFn,
    abort: AbortFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    value_destruct: ValueDestructFn,
    error_string: ErrorStringFn,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library").field("name", &self.name).finish_non_exhaustive()
    }
}

static LOADED: OnceLock<Result<Library, String>> = OnceLock::new();

/// The PMIx library, loaded on first use from `path` (`MW_PMIX_LIB`) or
/// else by [`LIBRARY_NAMES`]; the error says what was tried and why it failed.
pub(crate) fn load(path: Option<&str>) -> Result<&'static Library, String> {
    LOADED.get_or_init(|| open(path)).as_ref().map_err(Clone::clone)
}

fn open(path: Option<&str>) -> Result<Library, String> {
    let names: Vec<&str> = match path {
        Some(path) => vec![path],
        None => LIBRARY_NAMES.to_vec(),
    };
    let mut failures = Vec::new();
    for name in names {
        let Ok(c_name) = CString::new(name) else {
            failures.push(format!("{name}: contains a NUL byte"));
            continue;
        };
        // SAFETY: `c_name` is a NUL-terminated path; dlopen runs the
        // library's initialisers, which for libpmix only set up its own
        // state. RTLD_GLOBAL lets the components libpmix loads itself find
        // its symbols, as they expect.
        let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if handle.is_null() {
            failures.push(dl_error());
            continue;
        }
        return resolve(handle, name).map_err(|e| format!("{name}: {e}"));
    }
    Err(failures.join("; "))
}

/// The text of the last `dlopen`/`dlsym` failure on this thread.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the
    // next dl* call on this thread; it is copied before any other call.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return "unknown dlopen failure".to_owned();
    }
    // SAFETY: non-NULL, NUL-terminated, and not freed before the copy (above).
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

fn symbol(handle: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: `handle` came from a successful dlopen and is never closed;
    // `name` is NUL-terminated.
    let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if address.is_null() {
        return Err(format!("no symbol {}: {}", name.to_string_lossy(), dl_error()));
    }
    Ok(address)
}

fn resolve(handle: *mut c_void, name: &str) -> Result<Library, String> {
    macro_rules! entry {
        ($symbol:literal, $ty:ty) => {{
            let address = symbol(handle, $symbol)?;
            // SAFETY: the symbol is the PMIx function of that name, whose C
            // prototype in pmix.h (PMIx 2.x-5.x) is the one `$ty` spells
            // out, with the structures above laid out as pmix_common.h lays
            // them out (pmix_lib_layout_matches_the_header checks it).
            unsafe { std::mem::transmute::<*mut c_void, $ty>(address) }
        }};
    }
    Ok(Library {
        name: name.to_owned(),
        init: entry!(c"PMIx_Init", InitFn),
        finalize: entry!(c"PMIx_Finalize", FinalizeFn),
        abort: entry!(c"PMIx_Abort", AbortFn),
        put: entry!(c"PMIx_Put", PutFn),
        commit: entry!(c"PMIx_Commit", CommitFn),
        fence: entry!(c"PMIx_Fence", FenceFn),
        get: entry!(c"PMIx_Get", GetFn),
        value_destruct: entry!(c"PMIx_Value_destruct", ValueDestructFn),
        error_string: entry!(c"PMIx_Error_string", ErrorStringFn),
    })
}

impl Library {
    fn status(&self, code: c_int) -> Result<(), Status> {
        if code == SUCCESS {
            return Ok(());
        }
        // SAFETY: PMIx_Error_string takes any status and returns a pointer to
        // a static NUL-terminated string (or NULL for none).
        let text = unsafe { (self.error_string)(code) };
        let text = if text.is_null() {
            format!("status {code}")
        } else {
            // SAFETY: non-NULL, NUL-terminated and static (above).
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        };
        Err(Status { code, text })
    }

    /// Connects to the launcher's PMIx server (named by the `PMIX_*`
    /// variables it set); returns who this process is.
    pub(crate) fn init(&self) -> Result<Proc, Status> {
        let mut me = Proc::new("", 0);
        // SAFETY: `me` is a writable pmix_proc_t; no info array is passed.
        self.status(unsafe { (self.init)(&mut me, std::ptr::null_mut(), 0) })?;
        Ok(me)
    }

    /// Stages `key=value` for every process of the job (`PMIX_GLOBAL`).
    pub(crate) fn put_text(&self, key: &str, value: &str) -> Result<(), Status> {
        let key = c_text(key)?;
        let value = c_text(value)?;
        let mut staged = Value { kind: TYPE_STRING, data: [value.as_ptr() as usize as u64, 0, 0] };
        // SAFETY: `key` is NUL-terminated and within PMIX_MAX_KEYLEN (c_text);
        // `staged` is a pmix_value_t holding a string that outlives the
        // call; PMIx_Put copies the value before returning.
        self.status(unsafe { (self.put)(SCOPE_GLOBAL, key.as_ptr(), &mut staged) })
    }

    /// Pushes the staged puts to the local server.
    pub(crate) fn commit(&self) -> Result<(), Status> {
        // SAFETY: no arguments; only valid after init, which the session ensures.
        self.status(unsafe { (self.commit)() })
    }

    /// Waits for every process of this process's namespace, exchanging
    /// the committed values on the way (`PMIX_COLLECT_DATA`).
    pub(crate) fn fence_all(&self) -> Result<(), Status> {
        let collect = Info::flag("pmix.collect", true);
        // SAFETY: NULL procs with 0 count means "all of my namespace"; one
        // valid pmix_info_t, read during the call only.
        self.status(unsafe { (self.fence)(std::ptr::null(), 0, &collect, 1) })
    }

    /// The value of `key` published by `rank` of `nspace` (or a job-level
    /// key with [`RANK_WILDCARD`]).
    pub(crate) fn get(&self, nspace: &str, rank: u32, key: &str) -> Result<Fetched, Status> {
        let proc = Proc::new(nspace, rank);
        let key = c_text(key)?;
        let mut value: *mut Value = std::ptr::null_mut();
        // SAFETY: `proc` and `key` are valid for the call; on success PMIx
        // stores a malloc'ed pmix_value_t in `value`, released below.
        self.status(unsafe { (self.get)(&proc, key.as_ptr(), std::ptr::null(), 0, &mut value) })?;
        if value.is_null() {
            return Err(Status { code: ERR_NOT_FOUND, text: "PMIx_Get returned no value".into() });
        }
        // SAFETY: `value` is the pmix_value_t PMIx_Get handed over; its
        // union holds what `kind` says: a NUL-terminated string pointer,
        // a u32 or a u16 at the union's start.
        let fetched = unsafe {
            let v = &*value;
            match v.kind {
                TYPE_STRING => {
                    let text = v.data[0] as usize as *const c_char;
                    if text.is_null() {
                        Fetched::Text(String::new())
                    } else {
                        Fetched::Text(CStr::from_ptr(text).to_string_lossy().into_owned())
                    }
                }
                TYPE_UINT32 => Fetched::Number(v.data[0] as u32),
                TYPE_UINT16 => Fetched::Number(u32::from(v.data[0] as u16)),
                other => Fetched::Other(other),
            }
        };
        // SAFETY: PMIX_VALUE_RELEASE: destruct what the value owns, then
        // free the value itself, which PMIx allocated with malloc.
        unsafe {
            (self.value_destruct)(value);
            libc::free(value.cast());
        }
        Ok(fetched)
    }

    /// Asks the launcher to end the job with `status`, saying `message`.
    pub(crate) fn abort(&self, status: i32, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a NUL-terminated message; NULL procs means the whole job.
        let _ = unsafe { (self.abort)(status, message.as_ptr(), std::ptr::null_mut(), 0) };
    }

    /// Leaves the job's PMIx session.
    pub(crate) fn finalize(&self) {
        // SAFETY: no info array; PMIx tolerates finalize after a failure.
        let _ = unsafe { (self.finalize)(std::ptr::null(), 0) };
    }
}

fn c_text(text: &str) -> Result<CString, Status> {
    CString::new(text).map_err(|_| Status { code: -1, text: format!("{text:?} contains a NUL byte") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_have_the_sizes_of_pmix_common_h() {
        // The sizes a C compiler gives them on x86_64 and aarch64 Linux;
        // layout_and_constants_match_the_installed_header asks the header.
        assert_eq!(std::mem::size_of::<Proc>(), 260);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::offset_of!(Value, data), 8);
        assert_eq!(std::mem::size_of::<Info>(), 552);
        assert_eq!(std::mem::offset_of!(Info, flags), 512);
        assert_eq!(std::mem::offset_of!(Info, value), 520);
    }

    /// Compiles a probe against the installed `pmix.h` (libpmix-dev) and
    /// compares its sizes, offsets and constants with ours.
    #[test]
    fn layout_and_constants_match_the_installed_header() {
        let cflags = std::process::Command::new("pkg-config").args(["--cflags", "pmix"]).output();
        let Some(cflags) = cflags.ok().filter(|o| o.status.success()) else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "pkg-config finds no pmix.h under CI=true (make deps installs libpmix-dev)"
            );
            eprintln!("SKIPPED: no pmix.h (pkg-config pmix); make deps installs libpmix-dev");
            return;
        };
        let dir = std::env::temp_dir().join(format!("mw-pmix-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let source = dir.join("probe.c");
        std::fs::write(
            &source,
            r#"#include <pmix.h>
#include <stdio.h>
#include <stddef.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %d %d %d %d %d %d %u %d %d %d\n",
        sizeof(pmix_proc_t), sizeof(pmix_value_t), offsetof(pmix_value_t, data),
        sizeof(pmix_info_t), offsetof(pmix_info_t, flags), offsetof(pmix_info_t, value),
        PMIX_BOOL, PMIX_STRING, PMIX_UINT16, PMIX_UINT32, PMIX_GLOBAL, PMIX_ERR_NOT_FOUND,
        PMIX_RANK_WILDCARD, PMIX_MAX_NSLEN, PMIX_MAX_KEYLEN, PMIX_SUCCESS);
    return 0;
}
"#,
        )
        .unwrap();
        let flags = String::from_utf8(cflags.stdout).unwrap();
        let binary = dir.join("probe");
        let built = std::process::Command::new("cc")
            .args(flags.split_whitespace())
            .arg(&source)
            .arg("-o")
            .arg(&binary)
            .status()
            .expect("run cc");
        assert!(built.success(), "the probe does not compile against pmix.h");
        let out = std::process::Command::new(&binary).output().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let ours = [
            std::mem::size_of::<Proc>().to_string(),
            std::mem::size_of::<Value>().to_string(),
            std::mem::offset_of!(Value, data).to_string(),
            std::mem::size_of::<Info>().to_string(),
            std::mem::offset_of!(Info, flags).to_string(),
            std::mem::offset_of!(Info, value).to_string(),
            TYPE_BOOL.to_string(),
            TYPE_STRING.to_string(),
            TYPE_UINT16.to_string(),
            TYPE_UINT32.to_string(),
            SCOPE_GLOBAL.to_string(),
            ERR_NOT_FOUND.to_string(),
            RANK_WILDCARD.to_string(),
            MAX_NSLEN.to_string(),
            MAX_KEYLEN.to_string(),
            SUCCESS.to_string(),
        ]
        .join(" ");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ours);
    }

    #[test]
    fn proc_names_round_trip_and_are_cut_at_the_pmix_limit() {
        let proc = Proc::new("slurm.pmix.3.0", 7);
        assert_eq!((proc.nspace().as_str(), proc.rank()), ("slurm.pmix.3.0", 7));
        assert_eq!(Proc::new(&"n".repeat(400), 0).nspace().len(), MAX_NSLEN);
    }

    #[test]
    fn a_missing_library_is_reported_with_what_was_tried() {
        let err = open(Some("/nonexistent/libpmix.so.2")).unwrap_err();
        assert!(err.contains("/nonexistent/libpmix.so.2"), "{err}");
    }
}
