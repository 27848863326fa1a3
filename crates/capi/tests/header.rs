//! Keeps `include/memwire.h` in sync with the crate: regenerates it with
//! cbindgen and compares. `MW_UPDATE_HEADER=1` (what `make header` sets)
//! rewrites the file instead.

use std::path::PathBuf;

const REGENERATE: &str = "make header   (or: MW_UPDATE_HEADER=1 cargo test -p mw-capi --test header)";

fn generate() -> String {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("crates/capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn header_matches_the_crate() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/memwire.h");
    let fresh = generate();
    if std::env::var_os("MW_UPDATE_HEADER").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != fresh {
        let line = current
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| current.lines().count().min(fresh.lines().count()) + 1, |i| i + 1);
        panic!(
            "include/memwire.h is out of date with crates/capi (first difference at line {line}).\n\
             Regenerate it with:\n    {REGENERATE}\nand commit the result."
        );
    }
}

#[test]
fn header_declares_every_exported_function() {
    // Every `pub unsafe extern "C" fn` / `pub extern "C" fn` in the crate has
    // a prototype: a function cbindgen cannot see would be silently missing.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let header = generate();
    let mut count = 0;
    for entry in std::fs::read_dir(src).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let Some(rest) = line.split("extern \"C\" fn ").nth(1).filter(|_| line.starts_with("pub ")) else {
                continue;
            };
            let name = rest.split('(').next().unwrap();
            count += 1;
            assert!(header.contains(&format!(" {name}(")), "{name} is missing from the generated header");
        }
    }
    assert!(count > 60, "found only {count} exported functions");
}
