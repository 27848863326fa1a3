//! Gives the shared library a versioned SONAME, `libmemwire.so.<major>`:
//! programs linked against it record that name, so a future incompatible
//! major version (installed next to it) is never loaded in its place.
//! `make capi` and `make install` provide the `libmemwire.so.<major>` name
//! (a symlink) that the loader looks for.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmemwire.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
