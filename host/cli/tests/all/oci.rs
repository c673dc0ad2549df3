//! Components from registries, through the real `seam` binary and a real registry (Debian's
//! `docker-registry`, started on a loopback port per test): push, sign, lock, pull and load;
//! a tag moved and a registry whose storage was swapped (refused, naming the entry, the lock
//! line and both digests); unsigned and wrongly signed components (refused, naming the entry
//! and the key); a registry that is down (named; a cached digest still loads); a layer over
//! the size limit (refused before it is stored); basic auth and TLS from a CA the test makes.
//!
//! Keys are made with the `openssl` commands the book gives.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use seam_tests::oci::TestRegistry;
use sha2::Digest as _;

/// A test's folder: its configs, keys and its own cache (so its OCI store starts empty).
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `seam` with the cache (and OCI store) `cache` of this test, and no Docker config.
    fn seam_in(&self, cache: &str) -> Command {
        let mut command = seam_tests::seam_command(env!("CARGO_BIN_EXE_seam"));
        command
            .env("SEAM_CACHE_DIR", self.path(cache))
            .env("DOCKER_CONFIG", self.path("no-docker-config"))
            .env_remove("SEAM_OCI_CA_FILE");
        command
    }

    fn seam(&self) -> Command {
        self.seam_in("cache")
    }

    /// An ECDSA P-256 key pair, made as the book says: (private key, public key).
    fn key(&self, name: &str) -> (PathBuf, PathBuf) {
        let (key, public) = (
            self.path(&format!("{name}.key")),
            self.path(&format!("{name}.pub")),
        );
        let made = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
            ])
            .arg(&key)
            .status()
            .expect("openssl runs (apt-get install -y openssl)");
        assert!(made.success());
        let made = Command::new("openssl")
            .args(["pkey", "-pubout", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .status()
            .expect("openssl runs");
        assert!(made.success());
        (key, public)
    }

    /// Writes config `name`.
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("the config");
        path
    }
}

/// Runs `command`; its output must say success.
fn ok(command: &mut Command) -> (String, String) {
    let out = command.output().expect("seam runs");
    let (stdout, stderr) = texts(&out);
    assert!(
        out.status.success(),
        "{command:?} failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

/// Runs `command`; it must fail (exit 1). Returns its stdout and stderr together.
fn fails(command: &mut Command) -> String {
    let out = command.output().expect("seam runs");
    let (stdout, stderr) = texts(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{command:?} should have failed:\nstdout: {stdout}\nstderr: {stderr}"
    );
    format!("{stdout}{stderr}")
}

fn texts(out: &Output) -> (String, String) {
    (seam_tests::text(&out.stdout), seam_tests::text(&out.stderr))
}

/// `seam push WASM REFERENCE --http`: the digest reference it printed.
fn push(setup: &Setup, wasm: &Path, reference: &str) -> String {
    let (stdout, _) = ok(setup
        .seam()
        .arg("push")
        .arg(wasm)
        .arg(reference)
        .arg("--http"));
    stdout.trim().to_string()
}

/// The `sha256:HEX` of a digest reference.
fn digest_of(reference: &str) -> &str {
    reference.rsplit('@').next().expect("a digest reference")
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The line of `config`'s lock that holds `digest`.
fn lock_line(config: &Path, digest: &str) -> usize {
    let text = std::fs::read_to_string(config.with_extension("lock")).expect("the lock file");
    text.lines()
        .position(|l| l.starts_with("digest = ") && l.contains(digest))
        .expect("the digest's line")
        + 1
}

fn mock() -> PathBuf {
    seam_tests::guest("mock_provider")
}

#[test]
fn push_sign_lock_pull_and_load_through_a_loopback_registry() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let (key, public) = setup.key("alice");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    // An annotation asking for a grant: metadata only, the entry's grants are what it gets.
    let (pushed, _) = ok(setup.seam().arg("push").arg(mock()).arg(&tag).args([
        "--http",
        "--annotation",
        "dev.seam.grants={\"env\":[\"HOME\"]}",
    ]));
    let pinned = pushed.trim().to_string();
    let digest = digest_of(&pinned).to_string();
    let (signed, _) = ok(setup
        .seam()
        .args(["sign", &tag, "--http", "--key"])
        .arg(&key));
    assert!(
        signed.starts_with(&format!("signed `{pinned}` with key sha256:")),
        "{signed}"
    );
    let (again, _) = ok(setup
        .seam()
        .args(["sign", &pinned, "--http", "--key"])
        .arg(&key));
    assert!(again.starts_with("already signed"), "{again}");

    let config = setup.config(
        "seam.toml",
        &format!(
            r#"[oci]
http = ["{host}"]

[trust.keys]
alice = "alice.pub"

[[plugin]]
id = "researcher"
component = "{tag}"
verify = "alice"
config = {{ name = "researcher", reply = "from the registry: {{prompt}}" }}
"#,
            host = registry.host
        ),
    );
    let (report, stderr) = ok(setup.seam().arg("check").arg(&config));
    assert!(
        report.contains(&format!(
            "pulled: {digest} ({} bytes), signed by `alice`",
            std::fs::metadata(mock()).unwrap().len()
        )),
        "{report}"
    );
    assert!(report.contains("grants: nothing granted"), "{report}");
    assert!(stderr.contains("has no line in the lock file"), "{stderr}");
    let out = fails(setup.seam().args(["check", "--locked"]).arg(&config));
    assert!(out.contains("would change (--locked)"), "{out}");

    let (wrote, _) = ok(setup.seam().arg("lock").arg(&config));
    assert!(
        wrote.contains(&format!("researcher  {tag}  {digest}")),
        "{wrote}"
    );
    let lock = std::fs::read_to_string(setup.path("seam.lock")).unwrap();
    assert!(lock.contains(&format!("digest = \"{digest}\"")), "{lock}");
    assert!(lock.contains("signer = \"alice\""), "{lock}");
    let (same, _) = ok(setup.seam().args(["lock", "--locked"]).arg(&config));
    assert!(same.contains("is up to date (1 component(s))"), "{same}");
    let (_, stderr) = ok(setup.seam().args(["check", "--locked"]).arg(&config));
    assert!(!stderr.contains("stale"), "{stderr}");

    let (pulled, _) = ok(setup
        .seam_in("cache2")
        .args(["pull", "--locked"])
        .arg(&config));
    assert!(
        pulled.contains(&format!("researcher  {pinned}")),
        "{pulled}"
    );
    let (answer, _) = ok(setup.seam_in("cache2").arg("delegate").arg(&config).args([
        "--provider",
        "researcher",
        "--prompt",
        "hi",
    ]));
    assert!(answer.contains("from the registry: hi"), "{answer}");

    // What the component imports, before granting it anything; its signature checked.
    let (inspected, _) = ok(setup
        .seam()
        .args(["inspect", &tag, "--http", "--key"])
        .arg(&public));
    assert!(
        inspected.contains(&format!("reference: {pinned}")),
        "{inspected}"
    );
    assert!(
        inspected.contains("signature: verified against"),
        "{inspected}"
    );
    assert!(inspected.contains("kind:      provider"), "{inspected}");
    assert!(inspected.contains("imports:"), "{inspected}");
}

#[test]
fn a_moved_tag_and_a_swapped_registry_blob_are_refused_naming_the_entry_and_both_digests() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    let a = push(&setup, &mock(), &tag);
    let config_text = |component: &str| {
        format!(
            "[oci]\nhttp = [\"{}\"]\n\n[[plugin]]\nid = \"researcher\"\ncomponent = \"{component}\"\n\
             verify = false\nconfig = {{ name = \"researcher\" }}\n",
            registry.host
        )
    };
    let config = setup.config("seam.toml", &config_text(&tag));
    ok(setup.seam().arg("lock").arg(&config));
    let (a_digest, line) = (digest_of(&a).to_string(), lock_line(&config, digest_of(&a)));

    // The tag is pushed over: a load keeps the locked digest, the lock says it is stale.
    let b = push(&setup, &seam_tests::guest("fork_provider"), &tag);
    let b_digest = digest_of(&b).to_string();
    let (report, stderr) = ok(setup.seam().arg("check").arg(&config));
    assert!(report.contains(&format!("pulled: {a_digest}")), "{report}");
    let moved = format!(
        "plugin `researcher`: `{tag}` now resolves to {b_digest} at the registry; `seam.lock` \
         line {line} locks {a_digest}"
    );
    assert!(stderr.contains(&moved), "{stderr}");
    let out = fails(setup.seam().args(["check", "--locked"]).arg(&config));
    assert!(out.contains(&moved), "{out}");
    let out = fails(setup.seam().args(["lock", "--locked"]).arg(&config));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `seam.lock` line {line} locks {a_digest}, the registry now has {b_digest}"
        )),
        "{out}"
    );

    // The registry's storage is swapped under the locked digest: the layer, then the manifest.
    let layer_a = sha256_hex(&std::fs::read(mock()).unwrap());
    let layer_b = sha256_hex(&std::fs::read(seam_tests::guest("fork_provider")).unwrap());
    let layer_file = registry.blob_file(&layer_a);
    let original_layer = std::fs::read(&layer_file).expect("the registry's layer blob");
    std::fs::copy(registry.blob_file(&layer_b), &layer_file).unwrap();
    let out = fails(setup.seam_in("fresh1").arg("check").arg(&config));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `{tag}` (locked by `seam.lock` line {line}): the registry sent \
             the component layer whose SHA-256 is sha256:{layer_b}, not sha256:{layer_a}: refused"
        )),
        "{out}"
    );
    std::fs::write(&layer_file, original_layer).unwrap();
    let manifest_file = registry.blob_file(a_digest.trim_start_matches("sha256:"));
    std::fs::copy(
        registry.blob_file(b_digest.trim_start_matches("sha256:")),
        &manifest_file,
    )
    .unwrap();
    let out = fails(setup.seam_in("fresh2").arg("check").arg(&config));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `{tag}` (locked by `seam.lock` line {line}): the registry sent \
             a manifest whose SHA-256 is {b_digest}, not {a_digest}: refused"
        )),
        "{out}"
    );

    // The config edited to pin another digest than the lock's.
    let edited = setup.config("seam.toml", &config_text(&b));
    let out = fails(setup.seam().arg("check").arg(&edited));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `{b}` names {b_digest}, but `seam.lock` line {line} locks \
             {a_digest} (`{tag}`): refused (run `seam lock` to lock the new digest)"
        )),
        "{out}"
    );
}

#[test]
fn unsigned_and_wrongly_signed_components_are_refused_naming_the_entry_and_the_key() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let (alice, _) = setup.key("alice");
    let (mallory, _) = setup.key("mallory");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    let pinned = push(&setup, &mock(), &tag);
    let config = setup.config(
        "seam.toml",
        &format!(
            "[oci]\nhttp = [\"{}\"]\n\n[trust.keys]\nalice = \"alice.pub\"\nmallory = \"mallory.pub\"\n\n\
             [[plugin]]\nid = \"researcher\"\ncomponent = \"{tag}\"\nverify = \"alice\"\n\
             config = {{ name = \"researcher\" }}\n",
            registry.host
        ),
    );
    let (report, _) = ok(setup.seam().args(["inspect", "--http", &tag]));
    assert!(report.contains("signature: not checked"), "{report}");
    let alice_fp = {
        let (out, _) = ok(setup
            .seam()
            .args(["sign", &tag, "--http", "--key"])
            .arg(&alice));
        out.split("with key ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("the fingerprint")
            .to_string()
    };
    // Alice's signature is for the manifest that the tag named; a second push moves the tag to
    // a manifest nobody signed.
    let unsigned = push(&setup, &seam_tests::guest("fork_provider"), &tag);
    let hex = digest_of(&unsigned)
        .trim_start_matches("sha256:")
        .to_string();
    let out = fails(setup.seam().arg("check").arg(&config));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `{unsigned}` is not signed (the registry has no signature at \
             tag `sha256-{hex}.sig`), and the config requires a signature by key `alice` \
             ({alice_fp}): refused"
        )),
        "{out}"
    );
    ok(setup
        .seam()
        .args(["sign", &tag, "--http", "--key"])
        .arg(&mallory));
    let out = fails(setup.seam().arg("check").arg(&config));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: `{unsigned}`: none of its 1 signature(s) is by key `alice` \
             ({alice_fp}) over this manifest: refused (signature 1, key `alice`: its signature \
             does not verify against the key)"
        )),
        "{out}"
    );
    // Back to the manifest Alice signed.
    let at_signed = setup.config(
        "signed.toml",
        &std::fs::read_to_string(&config)
            .unwrap()
            .replace(&tag, &pinned),
    );
    let (report, _) = ok(setup.seam().arg("check").arg(&at_signed));
    assert!(
        report.contains(&format!("signed by `alice` ({alice_fp})")),
        "{report}"
    );
}

#[test]
fn a_registry_that_is_down_is_named_and_a_pulled_digest_still_loads() {
    let mut registry = TestRegistry::start();
    let setup = Setup::new();
    let (key, _) = setup.key("alice");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    let pinned = push(&setup, &mock(), &tag);
    ok(setup
        .seam()
        .args(["sign", &tag, "--http", "--key"])
        .arg(&key));
    let config = |name: &str, component: &str| {
        setup.config(
            name,
            &format!(
                "[oci]\nhttp = [\"{}\"]\n\n[trust.keys]\nalice = \"alice.pub\"\n\n[[plugin]]\n\
                 id = \"researcher\"\ncomponent = \"{component}\"\nconfig = {{ name = \"researcher\" }}\n",
                registry.host
            ),
        )
    };
    let by_digest = config("digest.toml", &pinned);
    let locked_tag = config("locked.toml", &tag);
    let unlocked_tag = config("unlocked.toml", &tag);
    ok(setup.seam().arg("check").arg(&by_digest));
    ok(setup.seam().arg("lock").arg(&locked_tag));

    registry.stop();
    let (report, _) = ok(setup.seam().arg("check").arg(&by_digest));
    assert!(report.contains("signed by `alice`"), "{report}");
    ok(setup.seam().arg("check").arg(&locked_tag));
    let out = fails(setup.seam().arg("check").arg(&unlocked_tag));
    assert!(
        out.contains(&format!(
            "plugin `researcher`: cannot reach registry `{}` for `{tag}`",
            registry.host
        )),
        "{out}"
    );

    // A damaged store blob is refused on read, and pulled again once the registry is back.
    let layer = sha256_hex(&std::fs::read(mock()).unwrap());
    let stored = setup.path("cache/oci/blobs/sha256").join(&layer);
    std::fs::write(&stored, b"not the component").unwrap();
    let out = fails(setup.seam().arg("check").arg(&by_digest));
    assert!(out.contains("refusing OCI store blob"), "{out}");
    assert!(out.contains("cannot reach registry"), "{out}");
    registry.restart();
    ok(setup.seam().arg("check").arg(&by_digest));
    assert_eq!(
        sha256_hex(&std::fs::read(&stored).unwrap()),
        layer,
        "pulled again"
    );
}

#[test]
fn a_reference_the_grammar_refuses_is_named_before_any_registry_is_asked() {
    let setup = Setup::new();
    // Nothing listens on port 9 of loopback: a reach would say `cannot reach registry`.
    let config = setup.config(
        "bad.toml",
        "[oci]\nhttp = [\"127.0.0.1:9\"]\n\n[[plugin]]\nid = \"researcher\"\n\
         component = \"oci://127.0.0.1:9/Seam/Mock:1.0\"\nverify = false\n",
    );
    for command in ["check", "pull"] {
        let out = fails(setup.seam().arg(command).arg(&config));
        assert!(
            out.contains("plugin `researcher`")
                && out.contains("`oci://127.0.0.1:9/Seam/Mock:1.0` is not an OCI reference"),
            "seam {command}: {out}"
        );
        assert!(
            !out.contains("cannot reach registry"),
            "seam {command}: {out}"
        );
    }
    let out = fails(
        setup
            .seam()
            .args(["delegate", "--provider", "researcher", "--prompt", "hi"])
            .arg(&config),
    );
    assert!(out.contains("is not an OCI reference"), "{out}");
    assert!(!out.contains("cannot reach registry"), "{out}");
}

#[test]
fn a_layer_over_the_size_limit_is_refused_before_it_is_stored() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    // A valid component of just over 2 MiB: the mock provider and a custom section.
    let mut big = std::fs::read(mock()).unwrap();
    let name = b"seam-test-padding";
    let payload = vec![0u8; 2 << 20];
    let mut section = Vec::new();
    leb128(&mut section, (1 + name.len() + payload.len()) as u64);
    section.push(name.len() as u8);
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    big.push(0);
    big.extend_from_slice(&section);
    let file = setup.path("big.wasm");
    std::fs::write(&file, &big).unwrap();
    let tag = format!("oci://{}/seam/big:1.0", registry.host);
    push(&setup, &file, &tag);
    let config = |mb: u64| {
        setup.config(
            "seam.toml",
            &format!(
                "[oci]\nhttp = [\"{}\"]\nmax_layer_mb = {mb}\n\n[[plugin]]\nid = \"big\"\n\
                 component = \"{tag}\"\nverify = false\nconfig = {{ name = \"big\" }}\n",
                registry.host
            ),
        )
    };
    let out = fails(setup.seam().arg("check").arg(config(1)));
    assert!(
        out.contains(&format!(
            "plugin `big`: `{tag}`: the component layer is {} bytes, more than the limit of \
             1048576 bytes ([oci] max_layer_mb): refused before it was stored",
            big.len()
        )),
        "{out}"
    );
    let stored = setup.path("cache/oci/blobs/sha256").join(sha256_hex(&big));
    assert!(!stored.exists(), "nothing of it was stored");
    ok(setup.seam().arg("check").arg(config(4)));
    assert!(stored.exists());
}

fn leb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[test]
fn basic_auth_and_tls_from_a_private_ca() {
    let registry = TestRegistry::start_secure();
    let setup = Setup::new();
    let ca = registry.ca_file.clone().expect("a CA");
    let (user, password) = registry.credentials.clone().expect("credentials");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);

    let out = fails(setup.seam().arg("push").arg(mock()).arg(&tag));
    assert!(
        out.contains(&format!("registry `{}`", registry.host)),
        "{out}"
    );
    let out = fails(
        setup
            .seam()
            .arg("push")
            .arg(mock())
            .arg(&tag)
            .arg("--ca-file")
            .arg(&ca),
    );
    assert!(
        out.contains(&format!(
            "registry `{}` refused access to `{tag}`",
            registry.host
        )),
        "{out}"
    );
    let (pinned, _) = ok(setup
        .seam()
        .arg("push")
        .arg(mock())
        .arg(&tag)
        .arg("--ca-file")
        .arg(&ca)
        .args(["--username-env", "REG_USER", "--password-env", "REG_PASS"])
        .env("REG_USER", &user)
        .env("REG_PASS", &password));
    let pinned = pinned.trim();

    // A config names the CA and the variables; the plugin is granted none of them.
    let config = setup.config(
        "seam.toml",
        &format!(
            "[oci]\nca_file = \"{ca}\"\n[oci.auth.\"{host}\"]\nusername_env = \"REG_USER\"\n\
             password_env = \"REG_PASS\"\n\n[[plugin]]\nid = \"researcher\"\ncomponent = \"{tag}\"\n\
             verify = false\nconfig = {{ name = \"researcher\" }}\n",
            ca = ca.display(),
            host = registry.host
        ),
    );
    let out = fails(setup.seam().arg("check").arg(&config));
    assert!(out.contains("`REG_USER`, which is not set"), "{out}");
    let (report, _) = ok(setup
        .seam()
        .arg("check")
        .arg(&config)
        .env("REG_USER", &user)
        .env("REG_PASS", &password));
    assert!(
        report.contains(&format!("pulled: {}", digest_of(pinned))),
        "{report}"
    );
    assert!(report.contains("grants: nothing granted"), "{report}");

    // Or the Docker config file's credentials, and the CA from the environment.
    let docker = setup.path("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    std::fs::write(
        docker.join("config.json"),
        format!(
            "{{\"auths\": {{\"{}\": {{\"auth\": \"{auth}\"}}}}}}",
            registry.host
        ),
    )
    .unwrap();
    let plain = setup.config(
        "plain.toml",
        &format!(
            "[[plugin]]\nid = \"researcher\"\ncomponent = \"{pinned}\"\nverify = false\n\
             config = {{ name = \"researcher\" }}\n"
        ),
    );
    let (pulled, _) = ok(setup
        .seam_in("cache2")
        .arg("pull")
        .arg(&plain)
        .env("DOCKER_CONFIG", &docker)
        .env("SEAM_OCI_CA_FILE", &ca));
    assert!(
        pulled.contains(&format!("researcher  {pinned}")),
        "{pulled}"
    );
}

/// Credentials the registry refuses are said to be refused, naming the registry and where they
/// came from (the flags' variables, `[oci.auth]`, the Docker config file); with none, `seam
/// push` is told its own flags, a config its `[oci.auth]` table.
#[test]
fn refused_credentials_are_named_with_where_they_came_from() {
    let registry = TestRegistry::start_secure();
    let setup = Setup::new();
    let ca = registry.ca_file.clone().expect("a CA");
    let (user, _) = registry.credentials.clone().expect("credentials");
    let host = &registry.host;
    let tag = format!("oci://{host}/seam/mock:1.0");
    let push = |setup: &Setup| {
        let mut command = setup.seam();
        command
            .arg("push")
            .arg(mock())
            .arg(&tag)
            .arg("--ca-file")
            .arg(&ca);
        command
    };

    // None given: push is told its flags, not a config table it does not read.
    let out = fails(&mut push(&setup));
    assert!(
        out.contains(&format!(
            "registry `{host}` refused access to `{tag}`: it asks for credentials and none were \
             given: pass --username-env VAR --password-env VAR"
        )),
        "{out}"
    );
    assert!(!out.contains("[oci.auth"), "{out}");

    // Wrong ones from the flags' variables.
    let out = fails(
        push(&setup)
            .args(["--username-env", "REG_USER", "--password-env", "REG_PASS"])
            .env("REG_USER", &user)
            .env("REG_PASS", "not-the-password"),
    );
    assert!(
        out.contains(&format!(
            "registry `{host}` refused the credentials in `$REG_USER` and `$REG_PASS` \
             (--username-env, --password-env) for `{tag}`"
        )),
        "{out}"
    );
    assert!(!out.contains("give it credentials"), "{out}");

    // Wrong ones from a config's `[oci.auth]`.
    let config = setup.config(
        "seam.toml",
        &format!(
            "[oci]\nca_file = \"{ca}\"\n[oci.auth.\"{host}\"]\nusername_env = \"REG_USER\"\n\
             password_env = \"REG_PASS\"\n\n[[plugin]]\nid = \"researcher\"\ncomponent = \"{tag}\"\n\
             verify = false\nconfig = {{ name = \"researcher\" }}\n",
            ca = ca.display(),
        ),
    );
    let out = fails(
        setup
            .seam()
            .arg("check")
            .arg(&config)
            .env("REG_USER", &user)
            .env("REG_PASS", "not-the-password"),
    );
    assert!(
        out.contains(&format!(
            "registry `{host}` refused the credentials in `$REG_USER` and `$REG_PASS` \
             ([oci.auth.\"{host}\"]) for `{tag}`"
        )),
        "{out}"
    );

    // Wrong ones from the Docker config file.
    let docker = setup.path("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:wrong"));
    std::fs::write(
        docker.join("config.json"),
        format!("{{\"auths\": {{\"{host}\": {{\"auth\": \"{auth}\"}}}}}}"),
    )
    .unwrap();
    let out = fails(push(&setup).env("DOCKER_CONFIG", &docker));
    assert!(
        out.contains(&format!(
            "registry `{host}` refused the credentials in the Docker config file `{}` for `{tag}`",
            docker.join("config.json").display()
        )),
        "{out}"
    );
}

/// `SEAM_OCI_CA_FILE=` (set, but empty) is as if it were unset, not a file named "".
#[test]
fn an_empty_ca_file_variable_is_unset() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    ok(setup
        .seam()
        .arg("push")
        .arg(mock())
        .arg(&tag)
        .arg("--http")
        .env("SEAM_OCI_CA_FILE", ""));
}

/// `seam inspect --key` names the key file once quoted, as every other message names a key.
#[test]
fn inspect_names_its_key_with_single_backticks() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let (_, public) = setup.key("alice");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    push(&setup, &mock(), &tag);
    let out = fails(
        setup
            .seam()
            .args(["inspect", &tag, "--http", "--key"])
            .arg(&public),
    );
    assert!(
        out.contains(&format!("by key `{}` (sha256:", public.display())),
        "{out}"
    );
    assert!(!out.contains("``"), "{out}");
}

/// A locked tag moved to a manifest nobody signed: `seam lock --locked` says first that the
/// lock would change (which is what `--locked` asks), not why the new digest cannot be locked.
#[test]
fn lock_locked_reports_a_moved_tag_before_its_missing_signature() {
    let registry = TestRegistry::start();
    let setup = Setup::new();
    let (alice, _) = setup.key("alice");
    let tag = format!("oci://{}/seam/mock:1.0", registry.host);
    let signed = push(&setup, &mock(), &tag);
    ok(setup
        .seam()
        .args(["sign", &tag, "--http", "--key"])
        .arg(&alice));
    let config = setup.config(
        "seam.toml",
        &format!(
            "[oci]\nhttp = [\"{}\"]\n\n[trust.keys]\nalice = \"alice.pub\"\n\n\
             [[plugin]]\nid = \"researcher\"\ncomponent = \"{tag}\"\nverify = \"alice\"\n\
             config = {{ name = \"researcher\" }}\n",
            registry.host
        ),
    );
    ok(setup.seam().arg("lock").arg(&config));
    let line = lock_line(&config, digest_of(&signed));
    let unsigned = push(&setup, &seam_tests::guest("fork_provider"), &tag);
    let out = fails(setup.seam().args(["lock", "--locked"]).arg(&config));
    assert!(
        out.contains(&format!(
            "the lock file `{}` would change (--locked): plugin `researcher`: `seam.lock` line \
             {line} locks {}, the registry now has {}",
            config.with_extension("lock").display(),
            digest_of(&signed),
            digest_of(&unsigned)
        )),
        "{out}"
    );
    assert!(!out.contains("is not signed"), "{out}");
}
