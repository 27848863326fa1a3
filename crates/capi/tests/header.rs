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

/// Names of the functions the crate exports (`pub ... extern "C" fn NAME(`).
fn exported_functions() -> Vec<String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines().filter(|l| l.starts_with("pub ")) {
            if let Some(rest) = line.split("extern \"C\" fn ").nth(1) {
                names.push(rest.split('(').next().unwrap().to_string());
            }
        }
    }
    names.sort();
    names
}

#[test]
fn the_c_tests_call_every_function() {
    // The C tests in tests/c (run by `make ctest`) are meant to exercise the
    // whole API; a new function without a C test fails here.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/c");
    let mut tests = String::new();
    for entry in std::fs::read_dir(&dir).expect("tests/c exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "c") {
            tests += &std::fs::read_to_string(path).unwrap();
        }
    }
    assert!(tests.contains("int main"), "no C test found in {}", dir.display());
    let missing: Vec<_> =
        exported_functions().into_iter().filter(|name| !tests.contains(&format!("{name}("))).collect();
    assert!(missing.is_empty(), "no C test in tests/c calls: {missing:?}");
}

#[test]
fn header_declares_every_exported_function() {
    // A function cbindgen could not see would be silently missing.
    let header = generate();
    let names = exported_functions();
    let count = names.len();
    for name in names {
        assert!(header.contains(&format!(" {name}(")), "{name} is missing from the generated header");
    }
    assert!(count > 60, "found only {count} exported functions");
}

#[test]
fn the_readme_example_is_the_tested_example() {
    // The C program in the README's "C API" section is examples/c/hello_rma.c,
    // which `make ctest` compiles and runs on 4 ranks.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/c/hello_rma.c")).unwrap();
    let section = readme.split("## C API").nth(1).expect("README has a C API section");
    let block = section.split("```c\n").nth(1).and_then(|b| b.split("```").next()).expect("a ```c block");
    assert!(example.ends_with(block), "the README's C example and examples/c/hello_rma.c differ; keep them identical");
}
