//! The library's version as C sees it: the `MW_VERSION_*` macros of the
//! header a program was compiled against, and `mw_version()` of the library
//! it runs with, both from the workspace's Cargo version (checked at
//! compile time). The shared library's SONAME, `libmemwire.so.<major>`,
//! carries the major version too (`build.rs`).
//!
//! Owns: those numbers. Must not: be written by hand anywhere else.

/// Major version of the header (the SONAME's number: `libmemwire.so.0`).
/// Literals for cbindgen; checked against Cargo's version below.
pub const MW_VERSION_MAJOR: u32 = 0;
/// Minor version of the header.
pub const MW_VERSION_MINOR: u32 = 1;
/// Patch version of the header.
pub const MW_VERSION_PATCH: u32 = 0;
/// The header's version as one number, `(major << 16) | (minor << 8) |
/// patch`, comparable with `mw_version()`.
pub const MW_VERSION: u32 = (MW_VERSION_MAJOR << 16) | (MW_VERSION_MINOR << 8) | MW_VERSION_PATCH;

/// A decimal number from Cargo's version parts, at compile time.
const fn parse(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut value = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "a version part is a number");
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

const _: () = assert!(
    MW_VERSION_MAJOR == parse(env!("CARGO_PKG_VERSION_MAJOR"))
        && MW_VERSION_MINOR == parse(env!("CARGO_PKG_VERSION_MINOR"))
        && MW_VERSION_PATCH == parse(env!("CARGO_PKG_VERSION_PATCH")),
    "MW_VERSION_* must match the workspace version in Cargo.toml"
);
// Each part fits its byte of MW_VERSION (a minor or patch above 255 needs
// another encoding).
const _: () = assert!(MW_VERSION_MINOR < 256 && MW_VERSION_PATCH < 256 && MW_VERSION_MAJOR < 65_536);

/// The version of the library the program runs with, encoded like
/// `MW_VERSION`. A program can check at run time that the library is at
/// least what it was compiled against:
/// `mw_version() >> 16 == MW_VERSION_MAJOR && mw_version() >= MW_VERSION`.
#[no_mangle]
pub extern "C" fn mw_version() -> u32 {
    MW_VERSION
}
