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
                if let Some(path) = entry.source.component_file() {
                    assert!(path.is_absolute(), "{path:?}");
                }
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
        budget: None,
        scope: None,
        approver: None,
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

// --- ACP ------------------------------------------------------------------------------------

use seam_host::acp::files::{FileError, Files};
use seam_host::acp::outbox::{self, Kind};
use seam_host::acp::rpc::{self, Incoming, LineError, LineReader};
use serde_json::{json, Value};

/// Runs a future that never waits (its reader is a byte slice), to completion.
fn at_once<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("a read from a byte slice waited"),
    }
}

/// The lines of `data` as an ACP peer reads them, each at most `max` bytes: the lines, and
/// whether the input ended on a line too long (where the reader stops).
fn lines_of(data: &[u8], max: usize) -> (Vec<Vec<u8>>, bool) {
    let mut reader = LineReader::new(data, max);
    let mut lines = Vec::new();
    loop {
        match at_once(reader.next()) {
            Ok(Some(line)) => {
                assert!(
                    line.len() <= max,
                    "a line of {} bytes past {max}",
                    line.len()
                );
                assert!(!line.contains(&b'\n'));
                assert!(!line.trim_ascii().is_empty(), "a blank line came through");
                lines.push(line);
            }
            Ok(None) => return (lines, false),
            Err(LineError::TooLong(n)) => {
                assert_eq!(n, max);
                return (lines, true);
            }
            Err(LineError::Io(e)) => panic!("a byte slice failed: {e}"),
        }
    }
}

/// `line` is one line (one newline, at its end) holding the response to `id`.
fn answers(line: &str, id: &Value) -> Result<Value, rpc::RpcError> {
    assert!(
        line.ends_with('\n') && line.matches('\n').count() == 1,
        "{line:?}"
    );
    match rpc::parse(line.trim_end().as_bytes()) {
        Ok(Incoming::Response { id: got, result }) => {
            assert_eq!(&got, id, "{line}");
            result
        }
        other => panic!("not a response: {other:?} from {line}"),
    }
}

/// Any bytes, as what an ACP agent writes to Seam (the provider's side): read in capped lines
/// and parsed. Whatever a request's id, Seam's answer to it is one line that parses back to
/// a response with that id; a malformed line's error names a JSON-RPC code and stays short;
/// an update is read without panicking; a permission is granted only as one of the options
/// offered, and never when the policy rejects.
pub fn acp_agent_lines(data: &[u8]) {
    let (lines, _) = lines_of(data, 4096);
    for line in lines {
        match rpc::parse(&line) {
            Ok(Incoming::Request { id, method, params }) => {
                let ok = rpc::response(&id, json!({"outcome": {"outcome": "cancelled"}}));
                assert!(answers(&ok, &id).is_ok());
                let refused = rpc::error_response(&id, rpc::METHOD_NOT_FOUND, &method);
                let e = answers(&refused, &id).unwrap_err();
                assert_eq!(
                    (e.code, e.message.as_str()),
                    (rpc::METHOD_NOT_FOUND, &*method)
                );
                for policy in [
                    seam_host::acp::Permissions::Reject,
                    seam_host::acp::Permissions::AllowRead,
                    seam_host::acp::Permissions::Allow,
                ] {
                    let (outcome, kind, allowed) =
                        seam_host::acp::choose_permission(policy, &params);
                    assert!(!(allowed && policy == seam_host::acp::Permissions::Reject));
                    if outcome["outcome"] == "selected" {
                        // An option with that id and a kind of the policy's side was offered
                        // (ids may repeat with different kinds).
                        let prefix = if allowed { "allow_" } else { "reject_" };
                        let offered = params["options"].as_array().is_some_and(|options| {
                            options.iter().any(|o| {
                                o.get("optionId") == Some(&outcome["optionId"])
                                    && o["kind"].as_str().unwrap_or("").starts_with(prefix)
                            })
                        });
                        assert!(offered, "{kind}: {outcome} from {params}");
                    } else {
                        assert_eq!(outcome, json!({"outcome": "cancelled"}));
                    }
                }
            }
            Ok(Incoming::Notification { params, .. }) => {
                if let seam_host::acp::AgentUpdate::Chunk(text) =
                    seam_host::acp::agent_update(&params)
                {
                    assert_eq!(params["update"]["content"]["text"].as_str(), Some(text));
                }
            }
            Ok(Incoming::Response { .. }) => {}
            Err(malformed) => {
                assert!(matches!(
                    malformed.code,
                    rpc::PARSE_ERROR | rpc::INVALID_REQUEST
                ));
                // The line is quoted in part only.
                assert!(
                    malformed.message.len() < 1024,
                    "{}",
                    malformed.message.len()
                );
            }
        }
    }
}

/// Any bytes, as what an ACP client writes to `seam acp` (the server's side): read in capped
/// lines and answered through a small byte-bounded outbox, with progress updates offered in
/// between. Every request and every malformed line gets exactly one answer, in order, with
/// its id and (for a malformed line) its JSON-RPC code; progress may be dropped, answers never;
/// once drained the outbox holds nothing.
pub fn acp_client_lines(data: &[u8]) {
    let (lines, _) = lines_of(data, 4096);
    let (out, mut reader) = outbox::outbox(8 << 10, "fuzz");
    let mut expected = Vec::new();
    for line in &lines {
        let answer = match rpc::parse(line) {
            Ok(Incoming::Request { id, method, .. }) => {
                Some((rpc::response(&id, json!({ "method": method })), id, None))
            }
            Ok(Incoming::Notification { .. } | Incoming::Response { .. }) => None,
            Err(m) => Some((
                rpc::error_response(&m.id, m.code, &m.message),
                m.id,
                Some(m.code),
            )),
        };
        if let Some((line, id, code)) = answer {
            assert!(out.offer(line, Kind::Answer), "an answer was dropped");
            expected.push((id, code));
        }
        out.offer(
            rpc::notification("session/update", json!({"update": {}})),
            Kind::Progress,
        );
    }
    drop(out);
    let mut answered = Vec::new();
    while let Some(line) = at_once(reader.next()) {
        match rpc::parse(line.trim_end().as_bytes()) {
            Ok(Incoming::Response { id, result }) => {
                answered.push((id, result.err().map(|e| e.code)));
            }
            Ok(Incoming::Notification { method, .. }) => assert_eq!(method, "session/update"),
            other => panic!("the outbox gave back {other:?}"),
        }
    }
    assert_eq!(answered, expected);
}

/// Names a file request's path is made of: the fixture's links and files, `..`, `.`.
const PARTS: &[&str] = &[
    "in",
    "..",
    ".",
    "",
    "file.txt",
    "sub",
    "new.txt",
    "abs",
    "rel",
    "dangling",
    "chain",
    "dir",
    "up",
    "outside",
    "secret.txt",
    "loop",
];

/// The file outside the grant: no write of the input's can produce it (see its writes).
const SECRET: &str = "\u{1}SECRET\u{1}";

/// Where a link the input makes may point.
const TARGETS: &[&str] = &[
    "file.txt",
    "../outside/secret.txt",
    "../outside/made",
    "../../",
    "sub/../..",
    "/",
    "/etc/passwd",
    "sub",
    "loop",
    "nothing",
];

/// A granted directory `in` (writable) beside an `outside` one, under `root`, rebuilt: links
/// inside `in` lead out absolutely, relatively, dangling, chained, to a directory, in a loop.
fn file_fixture(root: &Path) -> (Files, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::symlink;
    let (inside, outside) = (root.join("in"), root.join("outside"));
    let _ = std::fs::remove_dir_all(&inside);
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(inside.join("sub")).expect("the fixture");
    std::fs::create_dir_all(&outside).expect("the fixture");
    std::fs::write(outside.join("secret.txt"), SECRET).expect("the fixture");
    std::fs::write(inside.join("file.txt"), "granted\nlines\n").expect("the fixture");
    for (name, target) in [
        ("abs", outside.join("secret.txt")),
        ("rel", "../outside/secret.txt".into()),
        ("dangling", "../outside/made".into()),
        ("chain", "rel".into()),
        ("dir", outside.clone()),
        ("up", "..".into()),
        ("loop", "loop".into()),
    ] {
        symlink(target, inside.join(name)).expect("the fixture");
    }
    let files = Files::new(
        vec![seam_host::sandbox::DirGrant {
            host: inside.clone(),
            guest: "/in".into(),
            write: true,
        }],
        64,
    );
    (files, inside, outside)
}

/// Any bytes, as a sequence of an agent's file requests (reads and writes of paths made of
/// [`PARTS`], beneath the grant or not) mixed with changes the agent makes itself inside the
/// grant (a link made or replaced, pointing at one of [`TARGETS`]). Nothing outside the grant
/// is ever created, changed or read, whatever the links; refusals are typed; what is read is
/// at most the limit.
pub fn acp_file_requests(root: &Path, data: &[u8]) {
    // The fixture is rebuilt only after an input changed it (most inputs only read, or are
    // refused): a fresh tree per input would cost more than the requests.
    static CHANGED: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);
    let mut changed = CHANGED.lock().unwrap_or_else(|p| p.into_inner());
    let (files, inside, outside) = if changed.as_deref() == Some(root) {
        let files = Files::new(
            vec![seam_host::sandbox::DirGrant {
                host: root.join("in"),
                guest: "/in".into(),
                write: true,
            }],
            64,
        );
        (files, root.join("in"), root.join("outside"))
    } else {
        file_fixture(root)
    };
    *changed = Some(root.to_path_buf());
    let mut input = Input(data);
    for _ in 0..8 {
        if input.0.is_empty() {
            break;
        }
        let op = input.byte();
        let mut path = if op & 0x40 == 0 {
            inside.display().to_string()
        } else {
            root.display().to_string()
        };
        for _ in 0..input.byte() % 5 {
            path.push('/');
            path.push_str(PARTS[usize::from(input.byte()) % PARTS.len()]);
        }
        match op % 4 {
            0 => {
                let params = json!({"path": path, "line": input.byte(), "limit": input.byte()});
                match files.serve("fs/read_text_file", &params) {
                    Ok(read) => {
                        let text = read["content"].as_str().expect("content");
                        // What the input writes has no control characters; the secret has.
                        assert!(!text.contains(SECRET), "{path} read outside: {text}");
                        assert!(text.len() <= 64);
                    }
                    Err(e) => refused(&e, &path),
                }
            }
            1 => {
                let content: String = input.string().chars().filter(|c| !c.is_control()).collect();
                let params = json!({"path": path, "content": content});
                match files.serve("fs/write_text_file", &params) {
                    Ok(_) => *changed = None,
                    Err(e) => refused(&e, &path),
                }
            }
            2 => {
                // The agent replaces a link inside its grant (as it could on its own).
                let name = inside.join(PARTS[usize::from(input.byte()) % PARTS.len()]);
                let target = TARGETS[usize::from(input.byte()) % TARGETS.len()];
                if name.starts_with(&inside) && name != inside {
                    *changed = None;
                    let _ = std::fs::remove_file(&name);
                    let _ = std::os::unix::fs::symlink(target, &name);
                }
            }
            _ => {
                let method = ["fs/other", "fs/read_text_file", "fs/write_text_file"]
                    [usize::from(input.byte()) % 3];
                let _ = files.serve(method, &json!({ "path": input.string() }));
            }
        }
        let mut seen: Vec<String> = std::fs::read_dir(&outside)
            .expect("outside")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        seen.sort();
        assert_eq!(seen, ["secret.txt"], "a file appeared outside the grant");
        assert_eq!(
            std::fs::read_to_string(outside.join("secret.txt")).expect("the secret"),
            SECRET,
            "the file outside was changed"
        );
    }
}

/// A refusal names the path it refuses (or the field missing).
fn refused(e: &FileError, path: &str) {
    let text = e.to_string();
    assert!(!text.is_empty());
    match e {
        FileError::MissingPath | FileError::MissingContent | FileError::TooBigToWrite { .. } => {}
        FileError::Grant { .. } => panic!("the grant's directory failed: {text}"),
        _ => assert!(text.contains(path), "{text} does not name {path}"),
    }
}
