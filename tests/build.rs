//! Builds the guest components for wasm32-wasip2 (the wasmtime `test-programs` pattern), so that
//! `cargo test` works from a clean checkout with no committed `.wasm`.
//!
//! The guests go to `target/guests`, a target dir of their own: a nested cargo must not contend
//! for the outer build's lock, and `make guests` builds into the same place.

use std::path::PathBuf;
use std::process::Command;

/// The workspace members that are not guests; every other member is built for wasm.
const HOST_CRATES: &[&str] = &["seam-host", "seam-tests", "seam-bench"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf();
    let target_dir = root.join("target").join("guests");
    for watched in ["guests", "wit", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
        .arg(&target_dir);
    cmd.arg("--workspace");
    for krate in HOST_CRATES {
        cmd.args(["--exclude", krate]);
    }
    // Flags meant for the host build must not leak into the guest build.
    for var in ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_TARGET"] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("cannot run cargo to build the guests");
    if !status.success() {
        panic!(
            "building the guest components failed; is the wasm32-wasip2 target installed? \
             (`make setup` runs `rustup target add wasm32-wasip2`)"
        );
    }
    println!(
        "cargo:rustc-env=SEAM_GUEST_DIR={}",
        target_dir.join("wasm32-wasip2").join("release").display()
    );
}
