//! The bodies of Seam's fuzz targets. `cargo fuzz` drives them with libFuzzer (see
//! `fuzz_targets/`); the integration tests include this file and drive them with a small
//! deterministic mutator, so they also run in every `cargo test`.
//!
//! Each body must not panic on any input, and checks what must hold whenever the code under test
//! accepts the input.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use seam_host::subagent::validate::{self, MAX_DEPTH_LIMIT, MAX_PROMPT_BYTES, MAX_PROVIDER_NAME};
use seam_host::{
    AgentOptions, Capabilities, Config, ContentBlock, ParentRef, ProviderDescriptor,
    RuntimeFeatures, StartRequest, ToolFilter,
};

/// Any bytes, as a config file. An accepted config has valid, unique ids, absolute component
/// and granted-directory paths, and limits that apply to the defaults without overflow.
pub fn config_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Path::new("/fuzz-base");
    match Config::parse(text, Path::new("fuzz.toml"), base) {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(config) => {
            let mut ids = std::collections::HashSet::new();
            for entry in &config.plugins {
                assert!(
                    !entry.id.is_empty() && entry.id.len() <= 64,
                    "{:?}",
                    entry.id
                );
                assert!(ids.insert(entry.id.clone()), "duplicate id {:?}", entry.id);
                assert!(entry.config.is_object());
                assert!(entry.component.is_absolute(), "{:?}", entry.component);
                for dir in &entry.grants.dirs {
                    assert!(dir.host.is_absolute(), "{:?}", dir.host);
                    assert!(!dir.guest.is_empty());
                }
                for name in &entry.grants.env {
                    assert!(!name.is_empty() && !name.contains('=') && !name.contains('\0'));
                }
                let limits = entry.limits.apply(&seam_host::Limits::default());
                assert!(limits.memory_bytes >= 1 << 20);
                assert!(limits.max_concurrent_runs >= 1 && limits.max_output_bytes >= 1);
                assert!(!limits.summary().is_empty());
            }
        }
    }
}

/// Reads fields out of fuzz input, one after another; reads past the end give defaults.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A string of up to 255 bytes (or, one time in 16, up to 64 KiB), UTF-8 lossily.
    fn string(&mut self) -> String {
        let mut len = usize::from(self.byte());
        if len % 16 == 15 {
            len = len * 256 + usize::from(self.byte());
        }
        let len = len.min(self.0.len());
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8_lossy(head).into_owned()
    }

    fn option<T>(&mut self, read: impl FnOnce(&mut Self) -> T) -> Option<T> {
        self.flag().then(|| read(self))
    }

    fn names(&mut self) -> Vec<String> {
        (0..self.byte() % 5).map(|_| self.string()).collect()
    }
}

/// Any bytes, decoded into a provider descriptor and a start request, through the checks a start
/// makes before anything is instantiated. An accepted request has a non-empty prompt within the
/// size limit, a depth cap within range and an object-rooted schema.
pub fn request_validation(data: &[u8]) {
    let mut input = Input(data);
    let descriptor = ProviderDescriptor {
        name: input.string(),
        capabilities: Capabilities {
            output_schema: input.flag(),
            depth_limit: input.flag(),
            tool_filter: input.flag(),
            persona: input.flag(),
        },
        features: RuntimeFeatures {
            steering: input.flag(),
            resume: input.flag(),
        },
        inherits_parent_context: input.flag(),
    };
    let prompt = (0..input.byte() % 4)
        .map(|_| {
            if input.flag() {
                ContentBlock::Json(input.string())
            } else {
                ContentBlock::Text(input.string())
            }
        })
        .collect();
    let request = StartRequest {
        prompt,
        parent: ParentRef {
            id: input.string(),
            session_id: input.string(),
            working_directory: input.string(),
            depth: u32::from(input.byte()),
        },
        signal: None,
        agent_options: input.option(|i| AgentOptions {
            model: i.option(Input::string),
            system_prompt: i.option(Input::string),
        }),
        output_schema: input
            .option(|i| serde_json::from_str(&i.string()).unwrap_or(serde_json::Value::Null)),
        max_depth: input.option(|i| i64::from(i.byte() as i8) * i64::from(i.byte())),
        tool_filter: input.option(|i| ToolFilter {
            allow: i.option(Input::names),
            deny: i.option(Input::names),
        }),
        persona: input.option(Input::string),
    };

    let described = validate::descriptor("fuzz", &descriptor);
    if described.is_ok() {
        assert!(!descriptor.name.is_empty() && descriptor.name.len() <= MAX_PROVIDER_NAME);
    } else if let Err(e) = &described {
        // The message stays short whatever the name was.
        assert!(e.to_string().len() < 300 + MAX_PROVIDER_NAME * 4, "{e}");
    }
    let capable = validate::capabilities(&descriptor, &request);
    if capable.is_ok() {
        assert!(request.output_schema.is_none() || descriptor.capabilities.output_schema);
        assert!(request.persona.is_none() || descriptor.capabilities.persona);
    }
    let valid = validate::request(&request);
    // The checks are pure: the same input gives the same answer.
    assert_eq!(valid, validate::request(&request));
    if valid.is_ok() {
        assert!(request
            .prompt
            .iter()
            .any(|b| !b.as_text().trim().is_empty()));
        let size: usize = request.prompt.iter().map(|b| b.as_text().len()).sum();
        assert!(size <= MAX_PROMPT_BYTES);
        if let Some(max) = request.max_depth {
            assert!((0..=MAX_DEPTH_LIMIT).contains(&max));
        }
        if let Some(schema) = &request.output_schema {
            assert_eq!(schema["type"], "object");
        }
    }
}

/// Any bytes, as a component file (mutated from the built guests): `inspect` and loading it as
/// a plugin each succeed or fail with an error naming the file or the entry; nothing panics,
/// and afterwards no instance is left.
pub async fn component_load(host: &seam_host::Host, dir: &Path, data: &[u8]) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = dir.join(format!(
        "fuzz-{}.wasm",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    match host.inspect(&path, None).await {
        Ok(info) => assert!(!info.exports.is_empty()),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(&*path.to_string_lossy()), "{text}");
        }
    }
    let toml = format!(
        "[[plugin]]\nid = \"fuzz\"\ncomponent = \"{}\"\n",
        path.display()
    );
    if let Ok(config) = Config::parse(&toml, Path::new("fuzz.toml"), dir) {
        let report = host.load(&config).await;
        for failure in &report.failed {
            let text = failure.to_string();
            assert!(text.starts_with("plugin `fuzz`"), "{text}");
        }
        host.unload_all().await;
    }
    assert_eq!(
        host.live_instances(),
        0,
        "an instance outlived inspect or load"
    );
    let _ = std::fs::remove_file(&path);
}

/// The config `provider_imports` needs: the fuzz provider component from `guest_dir`, and a
/// script for the children it creates on the default model.
pub fn provider_imports_config(guest_dir: &Path) -> String {
    format!(
        "[models.scripts.default]\nsteps = [{{ text = \"child\" }}]\n\n\
         [[plugin]]\nid = \"fuzz\"\ncomponent = \"{}\"\n",
        guest_dir.join("fuzz_provider.wasm").display()
    )
}

/// Any bytes, as a program of import calls (see `guests/fuzz-provider`): the run ends with a
/// result whatever the calls, their order and their arguments, never an infrastructure error;
/// a structured answer that was not asked for never comes back; disposing leaves no run,
/// instance or agent behind.
pub async fn provider_imports(host: &seam_host::Host, data: &[u8]) {
    let program: String = data.iter().map(|b| format!("{b:02x}")).collect();
    let request = StartRequest::new(program, ParentRef::top_level("fuzz", "/"));
    let run = host
        .subagents()
        .start("fuzz", request)
        .expect("a plain request starts");
    let result = run
        .result()
        .await
        .expect("result never fails on a guest's doing");
    assert!(result.structured.is_none(), "{result:?}");
    run.dispose().await;
    assert_eq!(host.live_runs(), 0);
    assert_eq!(host.live_instances(), 0);
    assert_eq!(host.live_agents(), 0);
}
