//! The files of each generated project, from the templates embedded in the binary.

use seam_host::WitVersion;

use super::{test_config, Kind, Lang};

/// What `seam new` writes, and how the result is built.
pub(super) struct Project {
    /// Relative path and text of each file (the WIT is written separately).
    pub files: Vec<(String, String)>,
    /// A one-time command that installs the language's toolchain for the machine (run
    /// anywhere), if it needs one.
    pub toolchain: Option<&'static str>,
    /// A one-time command run in the project's directory before its first build, if the
    /// language needs one.
    pub setup: Option<&'static str>,
    /// The build command, run in the project's directory.
    pub build: String,
    /// Where the built component lands, relative to the project.
    pub wasm: String,
    /// The contract version it is written for, whose WIT `seam new` writes beside it.
    pub version: WitVersion,
}

/// The contract version of the blocking templates (every language's) and of the guest SDK:
/// the newest whose `provider.run` is blocking (0.5.0 made it async, which the SDK's traits,
/// componentize-py's synchronous bindings and componentize-js, which cannot build an async
/// export, do not use). The async template is written for the latest.
fn blocking_version() -> WitVersion {
    WitVersion::newest_blocking()
}

/// The wit-bindgen version the Rust projects pin: the one this host's own guests build with.
const WIT_BINDGEN: &str = "0.63.0";

/// The Python toolchain, in a virtual environment of the project's own (`.venv`, which the
/// build command and the project's README use).
const PYTHON_SETUP: &str = "python3 -m venv .venv && .venv/bin/pip install componentize-py==0.25.1";

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

/// Where the SDK finds the WIT in this repository (its version's frozen folder), and where it
/// is in a generated project.
fn sdk_wit_in_repo() -> String {
    format!("path: \"../../wit/v{}\"", blocking_version())
}
const SDK_WIT_IN_PROJECT: &str = "path: \"../wit\"";

/// The files of a `lang` project of `kind` named `name`.
pub(super) fn project(lang: Lang, kind: Kind, name: &str) -> Project {
    match lang {
        Lang::Rust => rust(kind, name),
        Lang::Python => python(kind, name),
        Lang::Js => js(kind, name),
    }
}

/// The world a plugin of `kind` targets.
fn world(kind: Kind) -> &'static str {
    seam_host::versions::world_name(kind.into())
}

/// The files of a template directory, `{{NAME}}` filled in.
fn files(template: &[(&str, &str)], name: &str, kind: Kind, wasm: &str) -> Vec<(String, String)> {
    template
        .iter()
        .map(|(path, text)| (path.to_string(), fill(text, name, kind, wasm)))
        .collect()
}

/// One template directory, embedded: `$dir` under `templates/`, with `$file`s to write as
/// `$as`.
macro_rules! template {
    ($dir:literal: $($file:literal as $as:literal),+ $(,)?) => {
        &[$(($as, include_str!(concat!("../../templates/", $dir, "/", $file)))),+]
    };
}

fn python(kind: Kind, name: &str) -> Project {
    let template: &[(&str, &str)] = match kind {
        Kind::Provider => {
            template!("python/provider": "app.py" as "app.py", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
        Kind::Tool => {
            template!("python/tool": "app.py" as "app.py", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
        Kind::Observer => {
            template!("python/observer": "app.py" as "app.py", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
    };
    let wasm = format!("{name}.wasm");
    Project {
        files: files(template, name, kind, &wasm),
        toolchain: None,
        setup: Some(PYTHON_SETUP),
        build: format!(
            ".venv/bin/componentize-py -d wit -w {} componentize app -o {wasm}",
            world(kind)
        ),
        wasm,
        version: blocking_version(),
    }
}

fn js(kind: Kind, name: &str) -> Project {
    let template: &[(&str, &str)] = match kind {
        Kind::Provider => {
            template!("js/provider": "app.js" as "app.js", "package.json" as "package.json", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
        Kind::Tool => {
            template!("js/tool": "app.js" as "app.js", "package.json" as "package.json", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
        Kind::Observer => {
            template!("js/observer": "app.js" as "app.js", "package.json" as "package.json", "README.md" as "README.md", "seam.toml" as "seam.toml", "gitignore" as ".gitignore")
        }
    };
    let wasm = format!("{name}.wasm");
    Project {
        files: files(template, name, kind, &wasm),
        toolchain: None,
        setup: None,
        build: "npm install && npm run build".into(),
        wasm,
        version: blocking_version(),
    }
}

fn fill(template: &str, name: &str, kind: Kind, wasm: &str) -> String {
    template
        .replace("{{NAME}}", name)
        .replace("{{KIND}}", kind.name())
        .replace("{{WASM}}", wasm)
        .replace("{{TEST_CONFIG}}", test_config(kind))
        // The JS templates import interfaces by their versioned names: the WIT `seam new` writes.
        .replace("{{WIT_VERSION}}", blocking_version().as_str())
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
            text.replace(&sdk_wit_in_repo(), SDK_WIT_IN_PROJECT),
        ));
    }
    Project {
        files,
        toolchain: Some("rustup target add wasm32-wasip2"),
        setup: None,
        build: "cargo build --release --target wasm32-wasip2".into(),
        wasm,
        version: blocking_version(),
    }
}

/// The files of a Rust provider with an async `run` (the latest contract, WASI 0.3), named
/// `name`: no SDK, the bindings wit-bindgen makes of `wit/`.
pub(super) fn async_provider(name: &str) -> Project {
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    let template: &[(&str, &str)] = template!("rust/async-provider":
        "Cargo.toml" as "Cargo.toml", "lib.rs" as "src/lib.rs", "seam.toml" as "seam.toml",
        "README.md" as "README.md");
    let mut files: Vec<(String, String)> = template
        .iter()
        .map(|(path, text)| {
            let text = fill(text, name, Kind::Provider, &wasm)
                .replace("{{WIT_VERSION}}", WitVersion::LATEST.as_str())
                .replace("{{WIT_BINDGEN}}", WIT_BINDGEN);
            (path.to_string(), text)
        })
        .collect();
    files.push((
        ".gitignore".into(),
        include_str!("../../templates/rust/gitignore").into(),
    ));
    Project {
        files,
        toolchain: Some("rustup target add wasm32-wasip2"),
        setup: None,
        build: "cargo build --release --target wasm32-wasip2".into(),
        wasm,
        version: WitVersion::LATEST,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_fills_its_placeholders() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            for kind in [Kind::Provider, Kind::Tool, Kind::Observer] {
                let project = project(lang, kind, "my-plugin");
                assert!(project.files.iter().any(|(p, _)| p == "README.md"));
                assert!(project.files.iter().any(|(p, _)| p == ".gitignore"));
                for (path, text) in &project.files {
                    assert!(
                        !text.contains("{{"),
                        "{lang:?} {kind:?} {path}: unfilled placeholder"
                    );
                }
                let toml = &project
                    .files
                    .iter()
                    .find(|(p, _)| p == "seam.toml")
                    .unwrap()
                    .1;
                assert!(
                    toml.contains(&format!("component = \"{}\"", project.wasm)),
                    "{toml}"
                );
            }
        }
        // The Makefile's setup installs the componentize-py the projects pin.
        let makefile = include_str!("../../../../Makefile");
        let pinned = makefile
            .lines()
            .find_map(|l| l.strip_prefix("COMPONENTIZE_PY := "))
            .expect("the Makefile pins componentize-py");
        assert!(PYTHON_SETUP.ends_with(&format!("componentize-py=={pinned}")));
    }

    #[test]
    fn the_vendored_sdk_reads_the_projects_wit() {
        let project = rust(Kind::Provider, "hello");
        let sdk = project
            .files
            .iter()
            .find(|(path, _)| path == "seam-plugin/src/lib.rs")
            .map(|(_, text)| text)
            .expect("the SDK is written");
        assert!(sdk.contains(SDK_WIT_IN_PROJECT) && !sdk.contains(&sdk_wit_in_repo()));
        for (path, text) in &project.files {
            assert!(!text.contains("{{"), "{path} has an unfilled placeholder");
        }
    }
}
