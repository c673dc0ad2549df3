//! The fuzz targets of `fuzz/` (config parsing, descriptor and request validation, ACP framing
//! in both directions, an ACP agent's file requests), run as a
//! deterministic smoke test: their seeds, then thousands of mutations of them from a fixed seed.
//! `cargo fuzz` explores far more (see docs/src/testing.md); this keeps the targets' invariants
//! checked in every `cargo test`, where no fuzzer is installed.

#[allow(dead_code)]
#[path = "../../../fuzz/src/lib.rs"]
mod targets;

use std::path::PathBuf;

use seam_tests::Rng;

const MUTATIONS: usize = 20_000;

/// Fragments a mutation may splice in: the syntax the parsers care about.
const TOKENS: &[&[u8]] = &[
    b"[[plugin]]\n",
    b"[plugin.grants]\n",
    b"[plugin.limits]\n",
    b"dirs = [{ host = \"..\", guest = \"/\" }]\n",
    b"network = [\"1.2.3.4:5\"]\n",
    b"env = [\"A\"]\n",
    b"memory_mb = 0\n",
    b"max_concurrent_runs = 99999999999999999999\n",
    b"on_concurrency = \"refuse\"\n",
    b"id = \"x\"\n",
    b"component = \"\"\n",
    b"= ",
    b"\"",
    b"{",
    b"}",
    b"\x00",
    b"\xff\xfe",
    b"{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}}}",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            // Mostly ASCII: a config with invalid UTF-8 is refused before parsing.
            1 => input.insert(
                at,
                (rng.next_u64() % 0x7f) as u8 + u8::from(rng.below(64) == 0) * 0x80,
            ),
            2 if !input.is_empty() => {
                let end = (at + rng.below(16)).min(input.len());
                input.drain(at..end);
            }
            3 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                input.splice(at..at, token.iter().copied());
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let to = (from + rng.below(64)).min(other.len());
                input.splice(at..at, other[from..to].iter().copied());
            }
            _ => input.truncate(at),
        }
    }
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!seeds.is_empty());
    seeds
}

fn smoke(target: &str, body: fn(&[u8]), seed: u64) {
    let seeds = seeds(target);
    for s in &seeds {
        body(s);
    }
    let mut rng = Rng(seed);
    let mut input = Vec::new();
    for i in 0..MUTATIONS {
        // Mostly keep mutating the last input; now and then start over from a seed.
        if i % 8 == 0 {
            input = seeds[rng.below(seeds.len())].clone();
        }
        mutate(&mut rng, &seeds, &mut input);
        body(&input);
    }
}

#[test]
fn config_parsing_survives_mutated_configs() {
    smoke("config_parse", targets::config_parse, 0xC0FF_EE01);
}

#[test]
fn request_validation_survives_mutated_requests() {
    smoke(
        "request_validation",
        targets::request_validation,
        0xC0FF_EE02,
    );
}

#[test]
fn acp_agent_lines_survive_mutated_sessions() {
    smoke("acp_agent_lines", targets::acp_agent_lines, 0xC0FF_EE05);
}

#[test]
fn acp_client_lines_are_each_answered_once_in_order() {
    smoke("acp_client_lines", targets::acp_client_lines, 0xC0FF_EE06);
}

#[test]
fn acp_file_requests_never_reach_outside_their_grant() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = seeds("acp_file_requests");
    for s in &seeds {
        targets::acp_file_requests(dir.path(), s);
    }
    // Each input rebuilds the fixture: fewer mutations than the pure targets get.
    let mut rng = Rng(0xC0FF_EE07);
    let mut input = Vec::new();
    for i in 0..2_000 {
        if i % 8 == 0 {
            input = seeds[rng.below(seeds.len())].clone();
        }
        mutate(&mut rng, &seeds, &mut input);
        targets::acp_file_requests(dir.path(), &input);
    }
}

#[test]
fn the_config_seeds_parse() {
    // Mutations are only useful if the seeds themselves are accepted.
    for (i, seed) in seeds("config_parse").iter().enumerate() {
        let text = std::str::from_utf8(seed).unwrap();
        let parsed =
            seam_host::Config::parse(text, std::path::Path::new("seed.toml"), "/b".as_ref());
        assert!(parsed.is_ok(), "seed {i}: {parsed:?}");
    }
}

/// Mutates a component binary: flips bits, overwrites, truncates or splices a run of another
/// guest's bytes, mostly past the header so that the parser gets into the sections.
fn mutate_component(rng: &mut Rng, guests: &[Vec<u8>], input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        if input.is_empty() {
            return;
        }
        let at = rng.below(input.len());
        match rng.below(5) {
            0 => input[at] ^= 1 << rng.below(8),
            1 => input[at] = (rng.next_u64() & 0xff) as u8,
            2 => input.truncate(at.max(8)),
            3 => {
                let end = (at + 1 + rng.below(64)).min(input.len());
                input.drain(at..end);
            }
            _ => {
                let other = &guests[rng.below(guests.len())];
                let from = rng.below(other.len());
                let to = (from + rng.below(256)).min(other.len());
                input.splice(at..at, other[from..to].iter().copied());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_components_are_refused_cleanly_and_the_host_keeps_serving() {
    use seam_tests::guests::*;
    let guests: Vec<Vec<u8>> = [MOCK_PROVIDER, SUBAGENT_TOOL, OBSERVER_PROBE, SPAWN_PROVIDER]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let mut options = seam_tests::test_options();
    // Mutants must not fill the shared cache.
    options.engine.cache_dir = None;
    let host = seam_host::Host::new(options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The unmutated guests load.
    for g in &guests {
        targets::component_load(&host, dir.path(), g).await;
    }
    let mut rng = Rng(0xC0FF_EE03);
    for _ in 0..120 {
        let mut input = guests[rng.below(guests.len())].clone();
        mutate_component(&mut rng, &guests, &mut input);
        targets::component_load(&host, dir.path(), &input).await;
    }
    // And the same host still loads and serves a good plugin.
    still_serves(&host, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_import_sequences_end_every_run_cleanly() {
    let text = targets::provider_imports_config(&seam_tests::guest_dir());
    let host = seam_tests::test_host();
    let report = host
        .load(
            &seam_host::Config::parse(
                &text,
                std::path::Path::new("fuzz.toml"),
                &seam_tests::guest_dir(),
            )
            .unwrap(),
        )
        .await;
    assert!(report.is_ok(), "{}", report.failures());
    // `fuzz_provider.wasm` is the component the programs drive.
    let mut rng = Rng(0xC0FF_EE04);
    for _ in 0..150 {
        let len = 1 + rng.below(96);
        let program: Vec<u8> = (0..len).map(|_| (rng.next_u64() & 0xff) as u8).collect();
        targets::provider_imports(&host, &program).await;
    }
    still_serves(&host, &text).await;
}

/// Loads `kept` (the entries already loaded) plus a good mock into `host`, and runs the mock:
/// whatever the fuzzing did, the host must still load and serve.
async fn still_serves(host: &seam_host::Host, kept: &str) {
    let text = kept.to_string() + &seam_tests::mock("good", "reply = \"fine\"");
    let report = host.load(&seam_tests::config(&text)).await;
    assert!(report.is_ok(), "{}", report.failures());
    let run = host
        .subagents()
        .start("good", seam_tests::request("x"))
        .unwrap();
    assert_eq!(seam_tests::words(&run.result().await.unwrap()), "fine");
    run.dispose().await;
}
