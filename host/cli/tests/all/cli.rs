//! The `seam` binary, end to end on the example configs and the built guest components.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn seam(args: &[&str]) -> Output {
    seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"))
        .args(args)
        .output()
        .expect("the seam binary runs")
}

#[test]
fn check_reports_every_plugin_of_the_examples() {
    for config in [
        "examples/seam.toml",
        "examples/demo.toml",
        "examples/remote.toml",
        "examples/mcp.toml",
    ] {
        // The entries the file lists, read from the file itself, so that one the report
        // leaves out or one in another state is caught, whatever the others do.
        let listed: toml::Value =
            toml::from_str(&std::fs::read_to_string(root().join(config)).unwrap()).unwrap();
        let ids: Vec<&str> = listed["plugin"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        assert!(!ids.is_empty(), "{config} lists plugins");
        let out = seam(&["check", config, "--json"]);
        assert!(
            out.status.success(),
            "{config}: {}",
            seam_tests::text(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{config}: {e}: {}", seam_tests::text(&out.stdout)));
        let states: Vec<(&str, &str)> = report["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["state"].as_str().unwrap()))
            .collect();
        let expected: Vec<(&str, &str)> = ids.iter().map(|id| (*id, "active")).collect();
        assert_eq!(
            states,
            expected,
            "{config}: {}",
            seam_tests::text(&out.stdout)
        );
        assert_eq!(report["errors"], serde_json::json!([]), "{config}");
        // The examples' components are small: a tiered host compiles them with Cranelift.
        let compilers: Vec<&serde_json::Value> = report["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["compiler"])
            .collect();
        assert!(
            compilers.iter().any(|c| *c == "cranelift")
                && compilers.iter().all(|c| *c == "cranelift" || c.is_null()),
            "{config}: {compilers:?}"
        );
    }
}

#[test]
fn check_fails_naming_the_entry_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[plugin]]\nid = \"x\"\ncomponnt = \"a.wasm\"\n").unwrap();
    let out = seam(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = seam_tests::text(&out.stderr);
    assert!(err.contains("id `x`") && err.contains("componnt"), "{err}");

    // A tool whose provider never appears.
    let lonely = dir.path().join("lonely.toml");
    let tool = seam_tests::guest("subagent_tool");
    std::fs::write(
        &lonely,
        format!(
            "[[plugin]]\nid = \"t\"\ncomponent = \"{}\"\nconfig = {{ provider = \"ghost\" }}\n",
            tool.display()
        ),
    )
    .unwrap();
    let out = seam(&["check", lonely.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        seam_tests::text(&out.stderr).contains("ghost"),
        "{}",
        seam_tests::text(&out.stderr)
    );
}

#[test]
fn run_shows_the_delegation_demo() {
    let out = seam(&["run", "examples/demo.toml", "--events", "--json"]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["stop-reason"], "completed");
    let output = answer["output"].as_str().unwrap();
    assert!(
        output.contains("research:") && output.contains("second opinion:"),
        "{output}"
    );
    let events = seam_tests::text(&out.stderr);
    for provider in ["spawn", "fork"] {
        assert!(
            events.contains(&format!(
                "\"event\":\"subagent/start\",\"provider\":\"{provider}\""
            )),
            "{events}"
        );
        assert!(
            events.contains(&format!(
                "\"event\":\"subagent/progress\",\"provider\":\"{provider}\""
            )),
            "each child reports progress: {events}"
        );
    }
    // The research ran in the background and was read with `subagent_output`.
    assert!(
        events.contains("\"tool\":\"subagent_output\"")
            && output.contains("run `spawn-1` finished: completed"),
        "{output}\n{events}"
    );
}

#[test]
fn check_and_inspect_show_the_version_each_component_was_built_against() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("versions.toml");
    let entry = |id: &str, guest: &str, config: &str| {
        format!(
            "[[plugin]]\nid = \"{id}\"\ncomponent = \"{}\"\nconfig = {{ {config} }}\n\n",
            seam_tests::guest(guest).display()
        )
    };
    std::fs::write(
        &config,
        entry("v1", "legacy_provider", r#"name = "v1""#)
            + &entry(
                "v2",
                "legacy_background_tool",
                r#"toolName = "bg", provider = "v3""#,
            )
            + &entry("v3", "mock_provider", r#"name = "v3""#)
            + &entry("v3old", "legacy_v3_provider", r#"name = "v3old""#)
            + &entry("v5", "async_provider", r#"name = "v5", share_instance = 4"#),
    )
    .unwrap();
    let expected = [
        ("v1", "0.1.0"),
        ("v2", "0.2.0"),
        ("v3", "0.4.0"),
        ("v3old", "0.3.0"),
        ("v5", "0.5.0"),
    ];

    let out = seam(&["check", config.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let versions: Vec<(&str, &str)> = report["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["version"].as_str().unwrap()))
        .collect();
    assert_eq!(versions, expected);

    let out = seam(&["check", config.to_str().unwrap()]);
    let human = seam_tests::text(&out.stdout);
    for (id, version) in expected {
        let line = human
            .lines()
            .find(|l| l.trim_start().starts_with(id))
            .unwrap_or_else(|| panic!("{id} is listed: {human}"));
        assert!(line.contains(version), "{line}");
    }
    // A provider sharing its instances says so, and only it.
    let shared: Vec<&str> = human.lines().filter(|l| l.contains("shared:")).collect();
    assert_eq!(
        shared,
        ["      shared: one instance serves up to 4 runs at once (share_instance)"],
        "{human}"
    );

    for (guest, version) in [
        ("legacy_provider", "0.1.0"),
        ("legacy_background_tool", "0.2.0"),
        ("legacy_v3_provider", "0.3.0"),
        ("mock_provider", "0.4.0"),
        ("async_provider", "0.5.0"),
    ] {
        let path = seam_tests::guest(guest);
        let out = seam(&["inspect", path.to_str().unwrap()]);
        let stdout = seam_tests::text(&out.stdout);
        assert!(
            stdout.contains(&format!("seam:plugin@{version})")),
            "{guest}: {stdout}"
        );
        let out = seam(&["inspect", path.to_str().unwrap(), "--json"]);
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(info["version"], version, "{guest}");
    }
}

#[test]
fn inspect_says_first_when_this_host_cannot_run_a_component() {
    let dir = tempfile::tempdir().unwrap();
    // A provider whose `run-context` import is renamed: nothing on this host provides it.
    let bytes = std::fs::read(seam_tests::guest("legacy_provider")).unwrap();
    let from: &[u8] = b"seam:plugin/run-context@0.1.0";
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the import is named in the binary");
    let mut renamed = bytes.clone();
    renamed[at..at + from.len()].copy_from_slice(b"seam:plugin/run-cantext@0.1.0");
    let path = dir.path().join("renamed.wasm");
    std::fs::write(&path, renamed).unwrap();
    let out = seam(&["inspect", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = seam_tests::text(&out.stdout);
    assert!(
        stdout.starts_with("this host cannot run it: ")
            && stdout
                .lines()
                .next()
                .unwrap()
                .contains("needs `seam:plugin/run-cantext@0.1.0`"),
        "{stdout}"
    );

    // Random bytes: one error line, no byte dump.
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, [0x8eu8, 0xf6, 0x97, 0xd3, 1, 2, 3, 4, 5, 6]).unwrap();
    let out = seam(&["inspect", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = seam_tests::text(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("not a valid WebAssembly component"),
        "{stderr}"
    );
}

#[test]
fn delegate_and_call_print_the_child_answer() {
    let out = seam(&[
        "delegate",
        "examples/seam.toml",
        "--provider",
        "researcher",
        "--prompt",
        "sources",
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    assert!(seam_tests::text(&out.stdout).contains("Research notes on \"sources\""));
    let out = seam(&[
        "call",
        "examples/seam.toml",
        "--tool",
        "review",
        "--args",
        r#"{"description":"d","prompt":"the plan"}"#,
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    assert!(seam_tests::text(&out.stdout).contains("the plan"));
    let out = seam(&[
        "delegate",
        "examples/seam.toml",
        "--provider",
        "nobody",
        "--prompt",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(seam_tests::text(&out.stderr).contains("NO_PROVIDER"));
}

#[test]
fn inspect_tells_provider_from_tool() {
    let out = seam(&[
        "inspect",
        seam_tests::guest("fork_provider").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["kind"], "provider");
    assert_eq!(info["provider"]["inherits-parent-context"], true);
}

#[test]
fn compile_warms_the_cache_and_cache_lists_prunes_and_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let with_cache = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_seam"))
            .args(args)
            .current_dir(root())
            .env("SEAM_CACHE_DIR", dir.path())
            .output()
            .expect("the seam binary runs")
    };
    let first = with_cache(&["compile", "examples/demo.toml"]);
    assert!(
        first.status.success(),
        "{}",
        seam_tests::text(&first.stderr)
    );
    let out = seam_tests::text(&first.stdout);
    assert!(
        out.contains("spawn: compiled") && out.contains("research: compiled"),
        "{out}"
    );
    let again = seam_tests::text(&with_cache(&["compile", "examples/demo.toml"]).stdout);
    assert!(again.contains("spawn: cached"), "{again}");

    let ls = seam_tests::text(&with_cache(&["cache", "ls"]).stdout);
    assert!(ls.contains("4 artifacts"), "{ls}");
    let pruned = seam_tests::text(&with_cache(&["cache", "prune", "--max-mb", "0"]).stdout);
    assert!(pruned.contains("removed 4 artifacts"), "{pruned}");
    let ls = seam_tests::text(&with_cache(&["cache", "ls"]).stdout);
    assert!(ls.contains("0 artifacts"), "{ls}");
    with_cache(&["compile", "examples/demo.toml"]);
    let cleared = seam_tests::text(&with_cache(&["cache", "clear"]).stdout);
    assert!(cleared.contains("removed 4 artifacts"), "{cleared}");
}

#[test]
fn test_checks_a_provider_and_a_tool_and_fails_a_broken_one() {
    let guest = |name: &str| seam_tests::guest(name).to_string_lossy().into_owned();
    // A short delay keeps the run going when the cancel lands (an instant answer would make
    // the cancel check a legitimate `skip`).
    let out = seam(&[
        "test",
        &guest("mock_provider"),
        "--config",
        r#"{"delayMs": 300}"#,
    ]);
    let stdout = seam_tests::text(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        seam_tests::text(&out.stderr)
    );
    for check in [
        "load",
        "describe",
        "run",
        "dispose",
        "cancel",
        "second run",
        "quiescence",
    ] {
        assert!(
            stdout.contains(&format!("[  ok] {check}:")),
            "{check}: {stdout}"
        );
    }
    let out = seam(&[
        "test",
        &guest("subagent_tool"),
        "--config",
        r#"{"provider": "helper"}"#,
        "--json",
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], true);
    let call = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "call")
        .unwrap();
    assert!(
        call["detail"].as_str().unwrap().contains("echo: hello"),
        "{call}"
    );

    let out = seam(&[
        "test",
        &guest("faulty_provider"),
        "--config",
        r#"{"mode": "trap-after-ready"}"#,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = seam_tests::text(&out.stdout);
    assert!(
        stdout.contains("[FAIL] run: ended `error`") && stdout.contains("guest fault"),
        "{stdout}"
    );
}

#[test]
fn test_says_when_the_host_had_to_enforce_a_cancel() {
    // A provider that never looks at cancellation: its runs end only at its CPU limit (the run
    // checks fail), and its cancel only when the host drops it after the grace.
    let out = seam(&[
        "test",
        &seam_tests::guest("faulty_provider").to_string_lossy(),
        "--config",
        r#"{"name": "deaf", "mode": "ignore-cancel"}"#,
    ]);
    let stdout = seam_tests::text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let cancel = stdout
        .lines()
        .find(|l| l.contains("] cancel:"))
        .unwrap_or_else(|| panic!("no cancel check: {stdout}"));
    assert!(
        cancel.starts_with("[  ok] cancel:")
            && cancel.contains("the host enforced it after the grace"),
        "{stdout}"
    );
}

/// The line `seam new` prints above its steps.
const STEPS_HEADER: &str = "Next steps, from this folder (paste them as they are):";

/// Runs `seam new KIND NAME --lang LANG` (and `extra`) in `folder` as a user would (`seam`
/// found on PATH), then pastes the steps it printed, as printed, into one `sh` in that same
/// folder. `prepare` runs on the new project before the steps do. Returns what the steps
/// printed.
fn follow_the_printed_steps(
    folder: &Path,
    (lang, extra): (&str, &[&str]),
    kind: &str,
    name: &str,
    prepare: impl FnOnce(&Path),
) -> String {
    assert!(seam_tests::guest("spawn_provider").is_file());
    let bin = Path::new(env!("CARGO_BIN_EXE_seam")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let toolchains = root().join("target").join("toolchains");
    let shell = |program: &str| {
        let mut command = Command::new(program);
        command
            .current_dir(folder)
            .env("PATH", &path)
            .env(
                "SEAM_CACHE_DIR",
                root().join("target").join("seam-test-cache"),
            )
            // The venv the Python steps make installs the pinned componentize-py from the wheel
            // `make setup-kit` downloaded, not from the network.
            .env("PIP_NO_INDEX", "1")
            .env("PIP_FIND_LINKS", toolchains.join("wheels"))
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        if lang != "rust" {
            // Winch compiles these large guests several times faster (Cranelift is what the
            // Rust projects and the rest of the suite load with).
            command.env("SEAM_COMPILER", "winch");
        }
        command
    };
    let out = shell("seam")
        .args(["new", kind, name, "--lang", lang])
        .args(extra)
        .output()
        .expect("seam runs from PATH");
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let printed = seam_tests::text(&out.stdout);
    let steps: Vec<&str> = printed
        .lines()
        .skip_while(|line| *line != STEPS_HEADER)
        .skip(1)
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect();
    assert!(
        steps.len() >= 3,
        "{name}: no steps printed after `{STEPS_HEADER}`:\n{printed}"
    );
    let project = folder.join(name);
    assert!(project.join("wit/seam.wit").is_file() && project.join("seam.toml").is_file());
    prepare(&project);
    let script = steps.join("\n");
    let ran = shell("sh")
        .args(["-e", "-x", "-c", &script])
        .output()
        .expect("sh runs");
    let output = format!(
        "{}{}",
        seam_tests::text(&ran.stdout),
        seam_tests::text(&ran.stderr)
    );
    assert!(
        ran.status.success(),
        "{name}: the printed steps failed ({}):\n{script}\n---\n{output}",
        ran.status
    );
    assert!(output.contains("all checks passed"), "{name}: {output}");
    output
}

#[test]
fn new_rust_projects_build_outside_the_repository_and_pass_seam_test() {
    let dir = tempfile::tempdir().unwrap();
    // One target dir for the three, under this repository's target/, so reruns build little;
    // the printed build writes into it through the project's `target` link.
    let target = root().join("target").join("new-projects");
    std::fs::create_dir_all(&target).unwrap();
    for kind in ["provider", "tool", "observer"] {
        let name = format!("hello-{kind}");
        follow_the_printed_steps(dir.path(), ("rust", &[]), kind, &name, |project| {
            std::os::unix::fs::symlink(&target, project.join("target")).unwrap();
        });
    }
}

#[test]
fn new_async_rust_provider_builds_for_wasi_0_3_and_shares_its_instance() {
    let dir = tempfile::tempdir().unwrap();
    let target = root().join("target").join("new-projects");
    std::fs::create_dir_all(&target).unwrap();
    let name = "async-helper";
    let output = follow_the_printed_steps(
        dir.path(),
        ("rust", &["--async"]),
        "provider",
        name,
        |project| std::os::unix::fs::symlink(&target, project.join("target")).unwrap(),
    );
    assert!(output.contains("[  ok] run: completed"), "{output}");
    let project = dir.path().join(name);
    let wit = std::fs::read_to_string(project.join("wit/seam.wit")).unwrap();
    assert!(wit.contains("package seam:plugin@0.5.0;"), "{wit}");
    // What it is built for, as `seam inspect` reads it: the async contract and WASI 0.3.
    let wasm = project.join("target/wasm32-wasip2/release/async_helper.wasm");
    let inspected = seam_tests::text(&seam(&["inspect", wasm.to_str().unwrap()]).stdout);
    assert!(
        inspected.contains("seam:plugin@0.5.0")
            && inspected.contains("wasi:clocks/monotonic-clock@0.3"),
        "{inspected}"
    );
    // Its seam.toml shares one instance between runs; a steering message answers a run early.
    let out = Command::new(env!("CARGO_BIN_EXE_seam"))
        .current_dir(&project)
        .args([
            "delegate",
            "seam.toml",
            "--provider",
            name,
            "--prompt",
            "hi",
        ])
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        .output()
        .unwrap();
    assert_eq!(
        seam_tests::text(&out.stdout).trim(),
        "Hello from async-helper: hi",
        "{}",
        seam_tests::text(&out.stderr)
    );
    // The other languages say why they have no async template.
    for (lang, why) in [
        ("js", "componentize-js 0.23.0 cannot"),
        ("python", "componentize-py 0.25.1 builds"),
    ] {
        let out = seam(&[
            "new",
            "provider",
            "p",
            "--lang",
            lang,
            "--async",
            "--dir",
            dir.path().join(lang).to_str().unwrap(),
        ]);
        let err = seam_tests::text(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{lang}: {err}");
        assert!(
            !dir.path().join(lang).exists(),
            "{lang}: nothing is written"
        );
    }
}

/// Generates a provider, a tool and an observer in `lang` and follows the steps `seam new`
/// prints: the toolchain setup, the build and `seam test`. The toolchains are the pinned ones
/// `make setup-kit` installs under target/toolchains; a missing one fails the test, saying so.
fn generated_projects_build_and_pass_seam_test(lang: &str) {
    let toolchains = root().join("target").join("toolchains");
    match lang {
        "python" => assert!(
            toolchains.join("wheels").is_dir(),
            "the componentize-py wheel is missing: `make setup-kit` downloads it (pinned) into {}",
            toolchains.join("wheels").display()
        ),
        _ => assert!(
            Command::new("npm").arg("--version").output().is_ok()
                && toolchains.join("js/.installed").is_file(),
            "npm, or the pinned componentize-js, is missing: install Node.js 20+ with npm, then \
             `make setup-kit`"
        ),
    }
    let dir = tempfile::tempdir().unwrap();
    for kind in ["provider", "tool", "observer"] {
        let name = format!("{lang}-{kind}");
        follow_the_printed_steps(dir.path(), (lang, &[]), kind, &name, |_| {});
        if kind == "provider" {
            // A slow run, so that `seam test` has a run to cancel mid-way.
            let wasm = dir.path().join(&name).join(format!("{name}.wasm"));
            let out = Command::new(env!("CARGO_BIN_EXE_seam"))
                .args(["test", wasm.to_str().unwrap()])
                .args(["--config", r#"{"delayMs": 3000}"#])
                .env(
                    "SEAM_CACHE_DIR",
                    root().join("target").join("seam-test-cache"),
                )
                .env("SEAM_COMPILER", "winch")
                .output()
                .expect("the seam binary runs");
            let stdout = seam_tests::text(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("all checks passed"),
                "{name}: {stdout}{}",
                seam_tests::text(&out.stderr)
            );
            assert!(
                stdout.contains("aborted"),
                "{name}: the cancel check ran: {stdout}"
            );
        }
    }
}

#[test]
fn new_python_projects_build_and_pass_seam_test() {
    generated_projects_build_and_pass_seam_test("python");
}

#[test]
fn new_js_projects_build_and_pass_seam_test() {
    generated_projects_build_and_pass_seam_test("js");
}

#[test]
fn wit_writes_the_package_this_host_supports() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("wit");
    let o = seam(&["wit", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", seam_tests::text(&o.stderr));
    let written = std::fs::read_to_string(out.join("seam.wit")).unwrap();
    let source = std::fs::read_to_string(root().join("wit/v0.5.0/seam.wit")).unwrap();
    assert_eq!(written, source, "the embedded WIT is the repository's");
    assert!(seam_tests::text(&o.stdout).contains("seam.wit"));
    // Its dependency goes where wit-bindgen and componentize-py look for it.
    let poll = std::fs::read_to_string(out.join("deps/io/poll.wit")).unwrap();
    assert!(poll.contains("package wasi:io@0.2.0;"));

    assert!(written.contains("package seam:plugin@0.5.0;"));

    // The frozen 0.1.0 and 0.2.0, unedited (0.2.0 with its dependency).
    let old = dir.path().join("old");
    let o = seam(&["wit", "--out", old.to_str().unwrap(), "--version", "0.1.0"]);
    assert!(o.status.success(), "{}", seam_tests::text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(old.join("seam.wit")).unwrap(),
        std::fs::read_to_string(root().join("wit/v0.1.0/seam.wit")).unwrap()
    );
    let older = dir.path().join("v2");
    let o = seam(&[
        "wit",
        "--out",
        older.to_str().unwrap(),
        "--version",
        "0.2.0",
    ]);
    assert!(o.status.success(), "{}", seam_tests::text(&o.stderr));
    for file in ["seam.wit", "deps/io/poll.wit"] {
        assert_eq!(
            std::fs::read_to_string(older.join(file)).unwrap(),
            std::fs::read_to_string(root().join("wit/v0.2.0").join(file)).unwrap(),
            "{file}"
        );
    }

    let o = seam(&["wit", "--out", out.to_str().unwrap(), "--version", "9.9.9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        seam_tests::text(&o.stderr).contains("does not support `seam:plugin@9.9.9`"),
        "{}",
        seam_tests::text(&o.stderr)
    );
}

/// Waits for a line containing `needle`, returning the lines before it; fails, naming `what`
/// and what was printed, if the process ends or says nothing of the kind for two minutes (a
/// bound on a broken test, not a timing assumption).
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, needle: &str, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(line) if line.contains(needle) => return seen,
            Ok(line) => seen.push(line),
            Err(e) => panic!(
                "{what}: no line with `{needle}` ({e}); saw:\n{}",
                seen.join("\n")
            ),
        }
    }
}

#[test]
fn dev_picks_up_a_rebuilt_component_and_keeps_the_last_good_one_serving() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("devhello");
    let target = root().join("target").join("new-projects");
    let out = seam(&[
        "new",
        "provider",
        "devhello",
        "--dir",
        project.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let build = || {
        let out = Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .current_dir(&project)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .expect("cargo runs");
        assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    };
    build();
    let wasm = target.join("wasm32-wasip2/release/devhello.wasm");
    let config = dir.path().join("dev.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"hello\"\ncomponent = \"{}\"\n",
            wasm.display()
        ),
    )
    .unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_seam"))
        .args(["dev", config.to_str().unwrap(), "--then"])
        .arg("delegate --provider devhello --prompt hi")
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("seam dev starts");
    let stdout = seam_tests::lines_of(child.stdout.take().unwrap());
    let stderr = seam_tests::lines_of(child.stderr.take().unwrap());
    wait_line(&stdout, "loaded hello: loaded", "the first load");
    let before = wait_line(&stdout, "watching", "the first answer");
    assert!(before.iter().any(|l| l == "hi"), "{before:?}");

    // Edit and rebuild: the new version answers, with no restart.
    let lib = project.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let edited = source.replace("\"{prompt}\".into()", "\"rebuilt: {prompt}\".into()");
    assert_ne!(source, edited);
    std::fs::write(&lib, edited).unwrap();
    build();
    wait_line(
        &stdout,
        "reloaded hello: reloaded",
        "the reload after the rebuild",
    );
    let after = wait_line(&stdout, "watching", "the answer after the rebuild");
    assert!(after.iter().any(|l| l == "rebuilt: hi"), "{after:?}");

    // A broken build output: the last good version keeps answering, and the error is shown.
    std::fs::write(&wasm, b"\0asm truncated").unwrap();
    wait_line(
        &stdout,
        "the last good version serves",
        "the broken rebuild",
    );
    let broken = wait_line(&stdout, "watching", "the answer after the broken rebuild");
    assert!(broken.iter().any(|l| l == "rebuilt: hi"), "{broken:?}");
    wait_line(&stderr, "not a valid WebAssembly component", "the error");

    // Ctrl-C ends it, with every plugin unloaded.
    let pid = child.id().to_string();
    let kill = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
}

/// Drives `seam acp CONFIG` with the official Python SDK's client; returns what it printed.
fn acp_client(config: &Path, mode: &str, prompt: &str) -> serde_json::Value {
    acp_client_with(config, mode, prompt, &[])
}

/// [`acp_client`] with more environment for the client (`SEAM_TEST_PERMISSION`).
fn acp_client_with(
    config: &Path,
    mode: &str,
    prompt: &str,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let out = Command::new(seam_tests::acp_python())
        .arg(root().join("tests/fixtures/acp_client.py"))
        .args([
            env!("CARGO_BIN_EXE_seam"),
            config.to_str().unwrap(),
            mode,
            prompt,
        ])
        .current_dir(root())
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        .env("XDG_STATE_HOME", root().join("target/seam-test-state"))
        .envs(env.iter().copied())
        .output()
        .expect("the ACP client runs");
    seam_tests::json_of(&out)
}

#[test]
fn seam_serves_its_agent_over_acp() {
    let out = acp_client(&root().join("examples/demo.toml"), "prompt", "Ship it?");
    assert_eq!(out["protocolVersion"], 1);
    assert_eq!(out["stopReason"], "end_turn", "{out}");
    let updates = out["updates"].as_array().unwrap();
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    // The tree's tool calls and delegations stream, and the answer comes last.
    assert!(
        updates.iter().any(|u| u["sessionUpdate"] == "tool_call"
            && u["title"].as_str().unwrap().contains("tool `research`")),
        "{out}"
    );
    assert!(
        updates.iter().any(|u| u["sessionUpdate"] == "tool_call"
            && u["title"]
                .as_str()
                .unwrap()
                .starts_with("delegate to `fork`")),
        "{out}"
    );
    assert!(kinds.contains(&"tool_call_update"), "{kinds:?}");
    let last = updates.last().unwrap();
    assert_eq!(last["sessionUpdate"], "agent_message_chunk");
    assert!(
        last["content"]["text"]
            .as_str()
            .unwrap()
            .contains("Verdict"),
        "{last}"
    );
}

#[test]
fn session_cancel_aborts_the_served_tree() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("slow.toml");
    let spawn = seam_tests::guest("spawn_provider");
    let tool = seam_tests::guest("subagent_tool");
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"scripted:lead\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }}, {{ text = \"done\" }} ]\n\n\
             [models.scripts.slow]\nsteps = [ {{ text = \"late\", delay_ms = 600000 }} ]\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{}\"\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:slow\" }} }}\n",
            spawn.display(),
            tool.display()
        ),
    )
    .unwrap();
    let out = acp_client(&config, "cancel", "go");
    assert_eq!(out["stopReason"], "cancelled", "{out}");
}

/// A config whose lead calls `first` (the `secret` tool: a mock behind the subagent tool, with
/// `approve = "ask"`; or `down`, a spawned child whose model calls `secret`), then says what it
/// read.
fn approval_config(dir: &Path, first: &str) -> PathBuf {
    let call = |tool: &str| {
        format!("tool_calls = [ {{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"open\" }} }} ]")
    };
    let config = dir.join("approve.toml");
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"scripted:lead\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", {first} }}, {{ text = \"read: {{tool_results}}\" }} ]\n\n\
             [models.scripts.child]\nsteps = [ {{ text = \"child asking\", {secret} }}, {{ text = \"child read: {{tool_results}}\" }} ]\n\n\
             [[plugin]]\nid = \"vault\"\ncomponent = \"{mock}\"\nconfig = {{ name = \"vault\", reply = \"the secret\" }}\n\n\
             [[plugin]]\nid = \"secret\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"vault\", toolName = \"secret\", approve = \"ask\" }}\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{spawn}\"\n\n\
             [[plugin]]\nid = \"down\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"spawn\", toolName = \"down\", agentOptions = {{ model = \"scripted:child\" }} }}\n",
            first = call(first),
            secret = call("secret"),
            mock = seam_tests::guest("mock_provider").display(),
            tool = seam_tests::guest("subagent_tool").display(),
            spawn = seam_tests::guest("spawn_provider").display(),
        ),
    )
    .unwrap();
    config
}

/// The text of the last update (the answer), and whether the `vault` run was started.
fn answer_and_vault(out: &serde_json::Value) -> (String, bool) {
    let updates = out["updates"].as_array().unwrap();
    let last = updates.last().unwrap();
    assert_eq!(last["sessionUpdate"], "agent_message_chunk", "{out}");
    let vault = updates.iter().any(|u| {
        u["sessionUpdate"] == "tool_call"
            && u["title"]
                .as_str()
                .unwrap_or_default()
                .starts_with("delegate to `vault`")
    });
    (last["content"]["text"].as_str().unwrap().to_string(), vault)
}

/// A call of a tool with `approve = "ask"` in the served tree is asked of the editor with
/// `session/request_permission` (the official SDK's client picks an option): allowed, the
/// tool runs and the model reads its result; rejected, or a client that does not offer
/// permission requests, the model reads a denial and the tool never runs.
#[test]
fn seam_acp_asks_the_editor_for_approval() {
    let dir = tempfile::tempdir().unwrap();
    let config = approval_config(dir.path(), "secret");
    let picked = |kind: Option<&str>| {
        let env: Vec<(&str, &str)> = kind
            .map(|k| ("SEAM_TEST_PERMISSION", k))
            .into_iter()
            .collect();
        let out = acp_client_with(&config, "prompt", "go", &env);
        assert_eq!(out["stopReason"], "end_turn", "{out}");
        out
    };

    let out = picked(Some("allow_once"));
    let (text, vault) = answer_and_vault(&out);
    assert!(text.contains("read: the secret"), "{out}");
    assert!(vault, "the allowed tool did not run: {out}");
    let asked = out["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{out}");
    let request = &asked[0];
    assert_eq!(request["sessionId"], out["sessionId"]);
    assert!(
        request["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("call tool `secret`"),
        "{request}"
    );
    assert_eq!(request["toolCall"]["rawInput"]["prompt"], "open");
    let kinds: Vec<&str> = request["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);

    for (kind, said) in [
        (Some("reject_once"), "rejected in the editor"),
        (Some("cancelled"), "cancelled in the editor"),
        // The client answers with an error: it cannot be asked, and no one else can.
        (None, "denied by nobody"),
    ] {
        let out = picked(kind);
        let (text, vault) = answer_and_vault(&out);
        assert!(text.contains(said), "{kind:?}: {out}");
        assert!(!text.contains("the secret"), "{kind:?}: {out}");
        assert!(!vault, "{kind:?}: a denied tool ran: {out}");
        assert_eq!(out["permissions"].as_array().unwrap().len(), 1, "{out}");
    }
}

/// A child run's request reaches the editor too, in its parent's ACP session, naming the run
/// that asks.
#[test]
fn seam_acp_asks_the_editor_for_a_child_runs_approval() {
    let dir = tempfile::tempdir().unwrap();
    let config = approval_config(dir.path(), "down");
    let out = acp_client_with(
        &config,
        "prompt",
        "go",
        &[("SEAM_TEST_PERMISSION", "allow_once")],
    );
    assert_eq!(out["stopReason"], "end_turn", "{out}");
    let (text, vault) = answer_and_vault(&out);
    assert!(text.contains("child read: the secret"), "{out}");
    assert!(vault, "{out}");
    let asked = out["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{out}");
    assert_eq!(asked[0]["sessionId"], out["sessionId"]);
    let title = asked[0]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.contains(" > ") && title.contains("call tool `secret`"),
        "{title}"
    );
}

/// What `seam acp` wrote, in order; a message waited past is kept for a later wait.
struct AcpOutput {
    lines: std::sync::mpsc::Receiver<String>,
    backlog: Vec<serde_json::Value>,
}

impl AcpOutput {
    /// The first message (kept or new) that `wanted` accepts.
    fn next(
        &mut self,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        if let Some(i) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(i);
        }
        loop {
            let line = self
                .lines
                .recv_timeout(std::time::Duration::from_secs(120))
                .unwrap_or_else(|e| panic!("no {what} ({e}); saw:\n{:#?}", self.backlog));
            let message: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("seam acp wrote a line that is not JSON ({e}): {line}"));
            if wanted(&message) {
                return message;
            }
            self.backlog.push(message);
        }
    }

    /// The response to request `id`.
    fn answer(&mut self, id: u64) -> serde_json::Value {
        self.next(&format!("answer to request {id}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
    }
}

/// What a raw JSON-RPC client gets for what `seam acp` cannot serve: a line that is not JSON,
/// JSON that is not JSON-RPC, a method it does not offer, a session it does not have, a second
/// prompt on a busy session, and a turn that ends in an error. Each is an error response with
/// JSON-RPC's code, and the session still serves after it.
#[test]
fn acp_answers_what_it_cannot_serve_with_json_rpc_errors() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("acp.toml");
    // One step, which delegates to a child that waits until cancelled: the next turn finds the
    // script exhausted, which ends that turn with an error. The delegation's `tool_call` is the
    // proof that the turn took its step before it is cancelled (a turn cancelled before its
    // model call takes none: the scripted model's rule).
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"scripted:lead\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }} ]\n\n\
             [models.scripts.slow]\nsteps = [ {{ text = \"late\", delay_ms = 600000 }} ]\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{}\"\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:slow\" }} }}\n",
            seam_tests::guest("spawn_provider").display(),
            seam_tests::guest("subagent_tool").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_seam"))
        .args(["acp", config.to_str().unwrap()])
        .env("XDG_STATE_HOME", root().join("target/seam-test-state"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = AcpOutput {
        lines: seam_tests::lines_of(child.stdout.take().unwrap()),
        backlog: Vec::new(),
    };
    let err = seam_tests::lines_of(child.stderr.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let code = |answer: &serde_json::Value| answer["error"]["code"].as_i64();
    let message = |answer: &serde_json::Value| {
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(out.answer(1)["result"]["protocolVersion"], 1);

    // Not JSON: answered with id null, and the line is named on stderr.
    send("this is not json");
    let answer = out.next("the answer to the line that is not JSON", |m| {
        m["id"].is_null() && m.get("error").is_some()
    });
    assert_eq!(
        (code(&answer), &answer["id"]),
        (Some(-32700), &serde_json::Value::Null)
    );
    wait_line(&err, "this is not json", "the malformed line on stderr");
    // JSON, but not JSON-RPC 2.0: the id it carried is echoed.
    send(r#"{"jsonrpc":"1.0","id":2,"method":"initialize"}"#);
    assert_eq!(code(&out.answer(2)), Some(-32600));

    send(r#"{"jsonrpc":"2.0","id":3,"method":"session/fork","params":{}}"#);
    let answer = out.answer(3);
    assert_eq!(code(&answer), Some(-32601));
    assert!(message(&answer).contains("session/fork"), "{answer}");

    send(
        r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}"#,
    );
    let answer = out.answer(4);
    assert_eq!(code(&answer), Some(-32602));
    assert!(message(&answer).contains("no such session"), "{answer}");

    send(r#"{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#);
    let session = out.answer(5)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let prompt = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"go"}}]}}}}"#
        )
    };
    send(&prompt(6));
    // The turn is running (the model waits): a second prompt is refused, not queued.
    send(&prompt(7));
    let answer = out.answer(7);
    assert_eq!(code(&answer), Some(-32602));
    assert!(message(&answer).contains("already running"), "{answer}");
    // The turn's model call has begun (it answered with the delegation): cancel it there.
    out.next("the turn's tool_call", |m| {
        m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == "tool_call"
    });
    send(&format!(
        r#"{{"jsonrpc":"2.0","method":"session/cancel","params":{{"sessionId":"{session}"}}}}"#
    ));
    assert_eq!(out.answer(6)["result"]["stopReason"], "cancelled");

    // The session serves again; this turn's model call fails, and the answer says how.
    send(&prompt(8));
    let answer = out.answer(8);
    assert_eq!(code(&answer), Some(-32603), "{answer}");
    assert!(
        message(&answer).contains("stop reason `error`") && message(&answer).contains("no step 2"),
        "{answer}"
    );

    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "seam acp ends when stdin closes: {status}"
    );
}

/// A memory figure of process `pid` from /proc/PID/status (`VmHWM`, the peak resident set,
/// or `VmRSS`), in MiB.
fn rss_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    kib / 1024.0
}

/// The first line containing `needle` (see [`wait_line`]).
fn line_with(rx: &std::sync::mpsc::Receiver<String>, needle: &str, what: &str) -> String {
    loop {
        match rx.recv_timeout(std::time::Duration::from_secs(300)) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(e) => panic!("{what}: no line with `{needle}` ({e})"),
        }
    }
}

/// Hostile: a provider floods 400,000 empty progress updates through `seam acp` to a client
/// that reads nothing while the flood lasts, then reads. Seam's outbound queue is bounded by
/// bytes (each empty update charged its overhead): updates are dropped and counted in a
/// warning, the answer and the stop reason still arrive, a well-behaved provider serves in the
/// same turn, and `seam`'s peak RSS during the turn stays under 120 MiB (queued without a
/// bound, the same flood took it past 160 MiB).
#[test]
fn hostile_a_progress_flood_to_a_slow_acp_client_is_dropped_not_queued() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flood.toml");
    let (hostile, tool, mock) = (
        seam_tests::guest("hostile_provider"),
        seam_tests::guest("subagent_tool"),
        seam_tests::guest("mock_provider"),
    );
    let call = |tool: &str| {
        format!("{{ name = \"{tool}\", arguments = {{ description = \"d\", prompt = \"p\" }} }}")
    };
    std::fs::write(
        &config,
        format!(
            // The outbox is what is under test: the flood is not journaled to a disk store
            // (400,000 commits, which its CPU budget would not cover). Nor is the CPU budget:
            // ticks count while the flood's host imports run, about 7 s of this debug host's
            // time alone, more on a loaded machine, so the flood gets ten minutes.
            "[agent]\nmodel = \"scripted:lead\"\n\n[sessions]\nstore = \"memory\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", tool_calls = [ {} ] }}, \
             {{ text = \"asking again\", tool_calls = [ {} ] }}, {{ text = \"all done\" }} ]\n\n\
             [[plugin]]\nid = \"flood\"\ncomponent = \"{}\"\n\
             config = {{ name = \"flood\", mode = \"progress-flood\", count = 400000, bytes = 0 }}\n\
             [plugin.limits]\nmax_output_bytes = 1073741824\ncpu_ms_per_call = 600000\n\n\
             [[plugin]]\nid = \"good\"\ncomponent = \"{}\"\nconfig = {{ name = \"good\", reply = \"fine\" }}\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{}\"\nconfig = {{ provider = \"flood\", toolName = \"ask\" }}\n\n\
             [[plugin]]\nid = \"ask-good\"\ncomponent = \"{}\"\nconfig = {{ provider = \"good\", toolName = \"ask_good\" }}\n",
            call("ask"),
            call("ask_good"),
            hostile.display(),
            mock.display(),
            tool.display(),
            tool.display(),
        ),
    )
    .unwrap();
    // Compiled beforehand, so that the compiler's memory is not in the figures.
    let compiled = seam(&["compile", config.to_str().unwrap()]);
    assert!(
        compiled.status.success(),
        "{}",
        seam_tests::text(&compiled.stderr)
    );
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_seam"))
        .args(["acp", config.to_str().unwrap()])
        .env("XDG_STATE_HOME", root().join("target/seam-test-state"))
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        // The guests' stderr, where the flood says it is over.
        .env("RUST_LOG", "warn,seam_host::guest=info")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let err = seam_tests::lines_of(child.stderr.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}"#);
    let session = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "seam acp ended");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            break message["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    // Loaded (components compiled): the peak from here on is the turn's, not the compiler's.
    let loaded = rss_mib(pid, "VmRSS");
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset VmHWM");
    send(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"go"}}]}}}}"#
    ));
    // Nothing more is read until the flood is over; meanwhile Seam's queue fills.
    let said = wait_line(&err, "flooded 400000", "the end of the flood");
    let flooded_after = started.elapsed();
    let full = said.iter().any(|l| l.contains("dropping progress"));
    let out = seam_tests::lines_of(stdout);
    let mut updates = 0u64;
    let mut chunks = Vec::new();
    let answer = loop {
        let line = out
            .recv_timeout(std::time::Duration::from_secs(300))
            .expect("the prompt's answer");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 3 {
            break message;
        }
        let update = &message["params"]["update"];
        updates += 1;
        if update["sessionUpdate"] == "agent_message_chunk" {
            chunks.push(update["content"]["text"].as_str().unwrap().to_string());
        }
    };
    let answered_after = started.elapsed();
    let peak = rss_mib(pid, "VmHWM");
    eprintln!(
        "progress flood: over after {flooded_after:.1?}, answered after {answered_after:.1?}; \
         seam's RSS {loaded:.1} MiB once loaded, peak {peak:.1} MiB during the turn"
    );
    assert!(
        full,
        "no drop was warned about while the client did not read: {said:#?}"
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        chunks.last().map(String::as_str),
        Some("all done"),
        "{chunks:?}"
    );
    // The burst's end is logged with how many updates it dropped.
    let warned = line_with(&err, "updates while the reader was slow", "the drop count");
    let dropped: u64 = warned
        .split("dropped ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {warned}"));
    drop(stdin);
    let status = child.wait().unwrap();
    eprintln!("progress flood: {updates} updates delivered, {dropped} dropped");
    assert!(status.success(), "{status}");
    assert!(dropped > 0 && updates > 0);
    assert!(
        updates + dropped <= 400_100,
        "{updates} delivered + {dropped} dropped"
    );
    // The outbound queue holds at most 4 MiB of lines; the rest is the host's own.
    assert!(
        peak < 120.0 && peak - loaded < 32.0,
        "seam's peak RSS was {peak:.1} MiB, {loaded:.1} MiB once loaded"
    );
}

/// Hostile: with `RUST_BACKTRACE=1` in the host's environment, a guest whose stream read fails
/// reads the host's error through `wasi:io/error`'s `to-debug-string`: the message, never the
/// host's backtrace or its source paths.
#[test]
fn hostile_a_guest_never_reads_a_host_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("probe.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\nid = \"probe\"\ncomponent = \"{}\"\n\
             config = {{ name = \"probe\", mode = \"stream-error\", path = \"probe.txt\" }}\n\
             [plugin.grants]\ndirs = [{{ host = \"{}\", guest = \"/d\", write = true }}]\n",
            seam_tests::guest("hostile_provider").display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_seam"))
        .args([
            "delegate",
            config.to_str().unwrap(),
            "--provider",
            "probe",
            "--prompt",
            "x",
        ])
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .env(
            "SEAM_CACHE_DIR",
            root().join("target").join("seam-test-cache"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let answer = seam_tests::text(&out.stdout);
    eprintln!("the guest read {} bytes: {}", answer.len(), answer.trim());
    assert!(
        answer.contains("error: ") && answer.contains("os error 9"),
        "{answer}"
    );
    for leak in [
        "backtrace",
        ".rs:",
        "/.cargo/",
        "/rustc/",
        "seam_host",
        "wasmtime",
    ] {
        assert!(
            !answer.contains(leak),
            "`{leak}` reached the guest: {answer}"
        );
    }
    assert!(answer.len() < 1200, "{} bytes", answer.len());
}

/// One `seam acp` process on `config`, driven line by line.
struct AcpProcess {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: AcpOutput,
}

impl AcpProcess {
    fn start(config: &Path, state: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_seam"))
            .args(["acp", config.to_str().unwrap()])
            .env("XDG_STATE_HOME", state)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = AcpOutput {
            lines: seam_tests::lines_of(child.stdout.take().unwrap()),
            backlog: Vec::new(),
        };
        Self { child, stdin, out }
    }

    fn send(&mut self, message: serde_json::Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes stdin and waits for the exit.
    fn end(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

/// `session/load` continues a session an earlier `seam acp` kept: the conversation is replayed
/// as `session/update`s before the answer, and the next prompt's model sees it.
#[test]
fn acp_session_load_replays_and_continues_a_kept_session() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("acp.toml");
    std::fs::write(
        &config,
        "[agent]\nmodel = \"scripted:lead\"\n\n[sessions]\nstore = \"sqlite:sessions.db\"\n\n\
         [models.scripts.lead]\nsteps = [ { text = \"seen {history} messages\" } ]\n",
    )
    .unwrap();
    let text_of = |u: &serde_json::Value| {
        u["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    let mut first = AcpProcess::start(&config, &state);
    first
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}));
    assert_eq!(
        first.out.answer(1)["result"]["agentCapabilities"]["loadSession"],
        true
    );
    first.send(
        json!({"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}),
    );
    let session = first.out.answer(2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    first.send(json!({"jsonrpc":"2.0","id":3,"method":"session/prompt",
        "params":{"sessionId": session, "prompt":[{"type":"text","text":"first question"}]}}));
    assert_eq!(first.out.answer(3)["result"]["stopReason"], "end_turn");
    first.end();

    let mut second = AcpProcess::start(&config, &state);
    second
        .send(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}));
    second.out.answer(1);
    second.send(json!({"jsonrpc":"2.0","id":2,"method":"session/load",
        "params":{"sessionId": "no-such-session", "cwd":"/","mcpServers":[]}}));
    let missing = second.out.answer(2);
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-session"),
        "{missing}"
    );
    second.send(json!({"jsonrpc":"2.0","id":3,"method":"session/load",
        "params":{"sessionId": session, "cwd":"/","mcpServers":[]}}));
    let loaded = second.out.answer(3);
    assert!(loaded.get("error").is_none(), "{loaded}");
    // Everything replayed came before the answer, in order.
    let replayed: Vec<(String, String)> = second
        .out
        .backlog
        .drain(..)
        .filter(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session)
        .map(|m| {
            let u = &m["params"]["update"];
            (u["sessionUpdate"].as_str().unwrap().to_string(), text_of(u))
        })
        .collect();
    assert_eq!(
        replayed,
        [
            (
                "user_message_chunk".to_string(),
                "first question".to_string()
            ),
            (
                "agent_message_chunk".to_string(),
                "seen 1 messages".to_string()
            ),
        ]
    );
    second.send(json!({"jsonrpc":"2.0","id":4,"method":"session/load",
        "params":{"sessionId": session, "cwd":"/","mcpServers":[]}}));
    assert_eq!(
        second.out.answer(4)["error"]["code"],
        -32602,
        "already open"
    );
    second.send(json!({"jsonrpc":"2.0","id":5,"method":"session/prompt",
        "params":{"sessionId": session, "prompt":[{"type":"text","text":"second question"}]}}));
    let chunk = second.out.next("the second answer", |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    });
    assert_eq!(text_of(&chunk["params"]["update"]), "seen 3 messages");
    assert_eq!(second.out.answer(5)["result"]["stopReason"], "end_turn");
    second.end();
}

/// `seam run --tree` draws the delegation tree when the command ends: a grandchild under the
/// child that started it, a failed run marked with its diagnostic, and the branch above it
/// marked too. Durations are masked.
#[test]
fn run_tree_draws_the_delegation_tree_with_a_failed_branch_marked() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tree.toml");
    let (spawn, tool) = (
        seam_tests::guest("spawn_provider"),
        seam_tests::guest("subagent_tool"),
    );
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"scripted:lead\"\n\n[sessions]\nstore = \"memory\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }}, {{ text = \"all done\" }} ]\n\n\
             [models.scripts.middle]\nsteps = [ {{ text = \"asking below\", tool_calls = [ {{ name = \"ask_bad\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }}, {{ text = \"middle done\" }} ]\n\n\
             [models.scripts.bad]\nsteps = [ {{ error = \"boom\" }} ]\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{spawn}\"\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:middle\" }} }}\n\n\
             [[plugin]]\nid = \"ask-bad\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask_bad\", agentOptions = {{ model = \"scripted:bad\" }} }}\n",
            spawn = spawn.display(),
            tool = tool.display()
        ),
    )
    .unwrap();
    let out = seam(&["run", config.to_str().unwrap(), "go", "--tree"]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    assert_eq!(seam_tests::text(&out.stdout).trim(), "all done");
    let stderr = seam_tests::text(&out.stderr);
    let tree: Vec<String> = stderr
        .lines()
        .skip_while(|l| !l.contains("agent:1"))
        .take(3)
        .map(|l| {
            // Durations masked: `0.31 s` -> `T s`.
            let mut masked = String::new();
            let mut rest = l;
            while let Some(i) = rest.find(" s") {
                let (head, tail) = rest.split_at(i);
                let digits = head
                    .char_indices()
                    .rev()
                    .take_while(|(_, c)| c.is_ascii_digit() || *c == '.')
                    .last()
                    .map_or(head.len(), |(j, _)| j);
                if digits < head.len() {
                    masked.push_str(&head[..digits]);
                    masked.push('T');
                } else {
                    masked.push_str(head);
                }
                masked.push_str(" s");
                rest = &tail[2..];
            }
            masked.push_str(rest);
            masked
        })
        .collect();
    assert_eq!(
        tree,
        [
            "✗ agent:1 (completed, T s)",
            "└─ ✗ spawn-1 on `spawn` (completed, T s)",
            "   └─ ✗ spawn-2 on `spawn` (error, T s: model error: scripted model: boom)",
        ],
        "{stderr}"
    );
}

/// `seam run --trace FILE` writes Chrome trace-event JSON: a `subagent.run` slice per run on its
/// child's track, with its provider and stop reason, the turns inside, and each tool call an
/// async slice whose begin and end pair up, the foreground run inside the call that made it.
#[test]
fn run_trace_writes_the_runs_turns_and_tool_calls_as_trace_events() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.json");
    let out = seam(&[
        "run",
        "examples/demo.toml",
        "--trace",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let slices = |name: &str| -> Vec<&serde_json::Value> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["name"] == name)
            .collect()
    };
    let (spawn, fork) = (slices("subagent.run spawn"), slices("subagent.run fork"));
    assert_eq!((spawn.len(), fork.len()), (1, 1), "{trace}");
    for run in [spawn[0], fork[0]] {
        assert_eq!(run["args"]["stop-reason"], "completed", "{run}");
        assert_eq!(run["args"]["parent"], "agent:1");
        // Its child's turn is inside it, on its track.
        let inside = slices("agent.turn").into_iter().any(|t| {
            t["tid"] == run["tid"]
                && t["ts"].as_u64() >= run["ts"].as_u64()
                && t["ts"].as_u64().unwrap() + t["dur"].as_u64().unwrap()
                    <= run["ts"].as_u64().unwrap() + run["dur"].as_u64().unwrap()
        });
        assert!(inside, "no turn inside {run}");
    }
    // Tool calls pair up, and the foreground run lies inside the call that made it.
    let mut calls = std::collections::HashMap::new();
    for e in events.iter().filter(|e| e["cat"] == "tool") {
        let key = e["id2"]["local"].as_str().unwrap().to_string();
        let entry = calls.entry(key).or_insert((None, None, String::new()));
        match e["ph"].as_str().unwrap() {
            "b" => {
                entry.0 = e["ts"].as_u64();
                entry.2 = e["name"].as_str().unwrap().to_string();
            }
            "e" => entry.1 = e["ts"].as_u64(),
            other => panic!("a tool event with phase {other}"),
        }
    }
    assert!(calls.len() >= 2, "{calls:?}");
    assert!(
        calls.values().all(|(b, e, _)| b.is_some() && e >= b),
        "{calls:?}"
    );
    let (b, e, _) = calls
        .values()
        .find(|(_, _, name)| name == "tool.call second_opinion")
        .unwrap();
    let run = fork[0];
    assert!(
        run["ts"].as_u64() >= *b
            && Some(run["ts"].as_u64().unwrap() + run["dur"].as_u64().unwrap()) <= *e,
        "{run} outside the call ({b:?}, {e:?})"
    );
    // Every agent has a named track.
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "agent:1"));
}

/// Tokens add up per tree in `--tree`: each node says what its subtree used (its child
/// agent's turns and every run below), the root the whole tree's. The scripted model reports
/// usage as an endpoint would.
#[test]
fn run_tree_adds_up_the_tokens_of_each_subtree() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("usage.toml");
    let (spawn, tool) = (
        seam_tests::guest("spawn_provider"),
        seam_tests::guest("subagent_tool"),
    );
    std::fs::write(
        &config,
        format!(
            "[agent]\nmodel = \"scripted:lead\"\n\n[sessions]\nstore = \"sqlite:usage.db\"\n\n\
             [models.scripts.lead]\nsteps = [ {{ text = \"asking\", usage = {{ prompt_tokens = 100, completion_tokens = 10 }}, tool_calls = [ {{ name = \"ask\", arguments = {{ description = \"d\", prompt = \"p\" }} }} ] }}, {{ text = \"all done\", usage = {{ prompt_tokens = 120, completion_tokens = 5 }} }} ]\n\n\
             [models.scripts.child]\nsteps = [ {{ text = \"child answer\", usage = {{ prompt_tokens = 30, completion_tokens = 7 }} }} ]\n\n\
             [[plugin]]\nid = \"spawn\"\ncomponent = \"{spawn}\"\n\n\
             [[plugin]]\nid = \"ask\"\ncomponent = \"{tool}\"\nconfig = {{ provider = \"spawn\", toolName = \"ask\", agentOptions = {{ model = \"scripted:child\" }} }}\n",
            spawn = spawn.display(),
            tool = tool.display()
        ),
    )
    .unwrap();
    let out = seam(&["run", config.to_str().unwrap(), "go", "--tree"]);
    assert!(out.status.success(), "{}", seam_tests::text(&out.stderr));
    let stderr = seam_tests::text(&out.stderr);
    let root = stderr.lines().find(|l| l.contains("agent:1")).unwrap();
    assert!(root.contains("272 tokens (250 in, 22 out)"), "{stderr}");
    let child = stderr.lines().find(|l| l.contains("on `spawn`")).unwrap();
    assert!(child.contains("37 tokens (30 in, 7 out)"), "{stderr}");

    // Stored, the same sums: the session's own turns, and with its child's session.
    let list = seam(&[
        "sessions",
        "--config",
        config.to_str().unwrap(),
        "list",
        "--json",
    ]);
    let sessions: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let top = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["parent"].is_null())
        .unwrap_or_else(|| panic!("no top-level session: {sessions}"));
    let show = seam(&[
        "sessions",
        "--config",
        config.to_str().unwrap(),
        "show",
        top["id"].as_str().unwrap(),
    ]);
    let shown = seam_tests::text(&show.stdout);
    assert!(
        shown.contains(
            "tokens: 235 (220 in, 15 out) in this session's turns; 272 (250 in, 22 out) with its children's"
        ),
        "{shown}"
    );
}
