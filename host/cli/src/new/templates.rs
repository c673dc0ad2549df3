//! The files of each generated project, from the templates embedded in the binary.

use super::{test_config, Kind, Lang};

/// What `seam new` writes, and how the result is built.
pub(super) struct Project {
    /// Relative path and text of each file (the WIT is written separately).
    pub files: Vec<(String, String)>,
    /// A one-time setup command for the toolchain, if the language needs one.
    pub setup: Option<&'static str>,
    /// The build command, run in the project's directory.
    pub build: &'static str,
    /// Where the built component lands, relative to the project.
    pub wasm: String,
}

/// The wit-bindgen version the Rust projects pin: the one this host's own guests build with.
const WIT_BINDGEN: &str = "0.63.0";

/// The guest SDK's sources, written beside a Rust project as `seam-plugin/src/`.
const SDK_SOURCES: &[(&str, &str)] = &[
    ("lib.rs", include_str!("../../../../guests/sdk/src/lib.rs")),
    (
        "config.rs",
        include_str!("../../../../guests/sdk/src/config.rs"),
    ),
    (
        "inprocess.rs",
        include_str!("../../../../guests/sdk/src/inprocess.rs"),
    ),
    (
        "provider.rs",
        include_str!("../../../../guests/sdk/src/provider.rs"),
    ),
    (
        "tool.rs",
        include_str!("../../../../guests/sdk/src/tool.rs"),
    ),
    (
        "observer.rs",
        include_str!("../../../../guests/sdk/src/observer.rs"),
    ),
];

/// Where the SDK finds the WIT in this repository, and where it is in a generated project.
const SDK_WIT_IN_REPO: &str = "path: \"../../wit\"";
const SDK_WIT_IN_PROJECT: &str = "path: \"../wit\"";

/// The files of a `lang` project of `kind` named `name`.
pub(super) fn project(lang: Lang, kind: Kind, name: &str) -> anyhow::Result<Project> {
    match lang {
        Lang::Rust => Ok(rust(kind, name)),
        Lang::Python | Lang::Js => anyhow::bail!("only `--lang rust` is generated so far"),
    }
}

fn fill(template: &str, name: &str, kind: Kind, wasm: &str) -> String {
    template
        .replace("{{NAME}}", name)
        .replace("{{KIND}}", kind.name())
        .replace("{{WASM}}", wasm)
        .replace("{{TEST_CONFIG}}", test_config(kind))
}

fn rust(kind: Kind, name: &str) -> Project {
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    let (lib, toml) = match kind {
        Kind::Provider => (
            include_str!("../../templates/rust/provider/lib.rs"),
            include_str!("../../templates/rust/provider/seam.toml"),
        ),
        Kind::Tool => (
            include_str!("../../templates/rust/tool/lib.rs"),
            include_str!("../../templates/rust/tool/seam.toml"),
        ),
        Kind::Observer => (
            include_str!("../../templates/rust/observer/lib.rs"),
            include_str!("../../templates/rust/observer/seam.toml"),
        ),
    };
    let mut files = vec![
        (
            "Cargo.toml",
            include_str!("../../templates/rust/Cargo.toml"),
        ),
        ("src/lib.rs", lib),
        ("seam.toml", toml),
        ("README.md", include_str!("../../templates/rust/README.md")),
        (".gitignore", include_str!("../../templates/rust/gitignore")),
    ]
    .into_iter()
    .map(|(path, text)| (path.to_string(), fill(text, name, kind, &wasm)))
    .collect::<Vec<_>>();
    files.push((
        "seam-plugin/Cargo.toml".into(),
        include_str!("../../templates/rust/sdk.toml")
            .replace("{{SDK_VERSION}}", env!("CARGO_PKG_VERSION"))
            .replace("{{WIT_BINDGEN}}", WIT_BINDGEN),
    ));
    for (file, text) in SDK_SOURCES {
        files.push((
            format!("seam-plugin/src/{file}"),
            text.replace(SDK_WIT_IN_REPO, SDK_WIT_IN_PROJECT),
        ));
    }
    Project {
        files,
        setup: Some("rustup target add wasm32-wasip2"),
        build: "cargo build --release --target wasm32-wasip2",
        wasm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_sdk_reads_the_projects_wit() {
        let project = rust(Kind::Provider, "hello");
        let sdk = project
            .files
            .iter()
            .find(|(path, _)| path == "seam-plugin/src/lib.rs")
            .map(|(_, text)| text)
            .expect("the SDK is written");
        assert!(sdk.contains(SDK_WIT_IN_PROJECT) && !sdk.contains(SDK_WIT_IN_REPO));
        for (path, text) in &project.files {
            assert!(!text.contains("{{"), "{path} has an unfilled placeholder");
        }
    }
}
