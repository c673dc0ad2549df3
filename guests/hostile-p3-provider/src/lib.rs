//! Hostile provider for WASI 0.3: the attacks of `guests/hostile-provider` made through the
//! WASI 0.3 interfaces (`wasi:filesystem@0.3`, `wasi:sockets@0.3`, `wasi:http@0.3`,
//! `wasi:cli@0.3`) instead of Rust's std (which binds 0.2), for the hostile-guest suite.
//!
//! It is a `seam:plugin@0.5.0` provider: its `run` is async, so the attack may wait on a WASI
//! 0.3 call (a blocking `run`, 0.4.0's, may not: the component model forbids a synchronous
//! export to block before it returns, and wasmtime 48 traps it). Each run makes the attack its
//! config's `mode` names, in an instance of its own, as any run of a provider.
//!
//! The outcome says whether the sandbox held: `ok: ...` or `denied: ...` where an attack can
//! succeed or fail. Modes (keys as `guests/hostile-provider`'s):
//! - `read-file`, `write-file`, `list-dir`: `path`; reads it, writes `pwned` to it, lists it.
//! - `write-big`: `path`, `bytes`; creates the file and writes `bytes` bytes to it through
//!   `write-via-stream` in 64 KiB chunks; answers `wrote N; ok` or `wrote N; error CODE`.
//!   `append-big` does the same through `append-via-stream`.
//! - `many-files`: `path`, `count`; creates `count` empty files `f0`, `f1`, ... in the
//!   directory; answers `created N; ok` or `created N; error CODE`.
//! - `sparse`: `path`, `bytes`; creates the file and sets its size to `bytes`; `sparse-seek`
//!   writes one byte at offset `bytes` instead. Answers `size N; ok` or `size N; error CODE`.
//! - `connect`: `addr`; opens a TCP connection. `resolve`: `host`; looks the name up.
//!   `socket-flood`: `count`; makes `count` TCP sockets and holds them all; answers `opened N`
//!   or `opened N; then CODE`.
//! - `http-get`: `authority`; sends `GET /` over plain HTTP and answers `status N` or
//!   `refused: CODE`. `http-flood`: `authority`, `count`; starts `count` requests at once and
//!   holds them, never reading a response; answers `opened N` (`opened N; refused CODE` when
//!   one was refused at once).
//! - `env`: `var`; reads one variable. `env-all`: lists every variable it can see.
//!
//! A path is resolved as wasi-libc does: against the granted directory whose guest path is its
//! longest prefix; a path under none is denied here, as libc denies it.

wit_bindgen::generate!({
    path: "../../wit/v0.5.0",
    world: "provider-plugin",
    generate_all,
});

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use exports::seam::plugin::provider::Guest as ProviderGuest;
use seam::plugin::runs;
use seam::plugin::types::{
    Capabilities, ContentBlock, ProviderDescriptor, RuntimeFeatures, StartRequest, StopReason,
    SubagentResult,
};
use seam_plugin::config::{self, Section};
use wasip3::filesystem::preopens;
use wasip3::filesystem::types::{Descriptor, DescriptorFlags, ErrorCode, OpenFlags, PathFlags};
use wasip3::http::types::{Fields, Request, Response, Scheme};
use wasip3::sockets::types::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, TcpSocket};
// The WASI crate's own futures and streams (of bytes, of HTTP trailers), beside this world's.
use wasip3::{wit_future as wasi_future, wit_stream as wasi_stream};

const KEYS: &[&str] = &[
    "mode",
    "name",
    "bytes",
    "path",
    "addr",
    "authority",
    "host",
    "var",
    "count",
];

/// Bytes one write hands the stream: Rust's std (and `guests/hostile-provider`) writes a big
/// file in such chunks too.
const CHUNK: usize = 64 << 10;

struct HostileP3;

export!(HostileP3);

struct Settings {
    mode: String,
    name: String,
    section: serde_json::Map<String, serde_json::Value>,
}

impl Settings {
    fn parse(text: &str) -> Result<Self, String> {
        let fields = config::parse(text)?;
        let root = Section::root(&fields, KEYS)?;
        let mode = root.required_string("mode")?;
        let name = root
            .string("name")?
            .unwrap_or_else(|| "hostile-p3".to_owned());
        Ok(Settings {
            mode,
            name,
            section: fields.clone(),
        })
    }

    fn string(&self, key: &str) -> Result<String, String> {
        Section::root(&self.section, KEYS)?.required_string(key)
    }

    fn number(&self, key: &str, default: u64) -> Result<u64, String> {
        Ok(Section::root(&self.section, KEYS)?
            .u64(key)?
            .unwrap_or(default))
    }
}

/// The granted directory holding `path`, and `path` relative to it.
fn locate(path: &str) -> Result<(Descriptor, String), String> {
    let mut best: Option<(Descriptor, String, usize)> = None;
    for (dir, guest) in preopens::get_directories() {
        let prefix = guest.trim_end_matches('/');
        let rest = if path == guest || path == prefix {
            Some(".")
        } else {
            path.strip_prefix(prefix).and_then(|r| r.strip_prefix('/'))
        };
        let Some(rest) = rest else { continue };
        if best.as_ref().is_none_or(|(_, _, len)| prefix.len() > *len) {
            best = Some((dir, rest.to_owned(), prefix.len()));
        }
    }
    best.map(|(dir, rest, _)| (dir, rest))
        .ok_or_else(|| format!("no granted directory holds {path}"))
}

/// Opens `path` with `open` and `flags`, following symbolic links as libc's `open` does.
async fn open(path: &str, open: OpenFlags, flags: DescriptorFlags) -> Result<Descriptor, String> {
    let (dir, rest) = locate(path)?;
    dir.open_at(PathFlags::SYMLINK_FOLLOW, rest, open, flags)
        .await
        .map_err(|e| format!("{e:?}"))
}

/// `ok: detail` or `denied: error`.
fn outcome(result: Result<String, String>) -> String {
    match result {
        Ok(detail) => format!("ok: {detail}"),
        Err(e) => format!("denied: {e}"),
    }
}

async fn read_file(path: &str) -> Result<String, String> {
    let file = open(path, OpenFlags::empty(), DescriptorFlags::READ).await?;
    let (bytes, done) = file.read_via_stream(0);
    let bytes = bytes.collect().await;
    done.await.map_err(|e| format!("{e:?}"))?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

async fn list_dir(path: &str) -> Result<String, String> {
    let dir = open(path, OpenFlags::DIRECTORY, DescriptorFlags::READ).await?;
    let (entries, done) = dir.read_directory();
    let entries = entries.collect().await;
    done.await.map_err(|e| format!("{e:?}"))?;
    let mut names: Vec<String> = entries.into_iter().map(|e| e.name).collect();
    names.sort();
    Ok(names.join(","))
}

/// Where a stream writes: at an offset (`write-via-stream`) or at the end (`append-via-stream`).
#[derive(Clone, Copy)]
enum At {
    Offset(u64),
    End,
}

/// Writes `total` bytes to `file` through a stream, each write the first bytes of `content`
/// (at least `CHUNK` long, or `total`); answers how many the stream took and the write's own
/// result.
async fn write_stream(
    file: &Descriptor,
    at: At,
    content: &[u8],
    total: u64,
) -> (u64, Result<(), ErrorCode>) {
    let (mut tx, rx) = wasi_stream::new::<u8>();
    let done = match at {
        At::Offset(offset) => file.write_via_stream(rx, offset),
        At::End => file.append_via_stream(rx),
    };
    let mut written = 0u64;
    while written < total {
        let n = (total - written).min(content.len() as u64) as usize;
        let left = tx.write_all(content[..n].to_vec()).await;
        written += (n - left.len()) as u64;
        if !left.is_empty() {
            // The reader went away: the write failed, and `done` says why.
            break;
        }
    }
    drop(tx);
    (written, done.await)
}

/// `PREFIX N; ok` or `PREFIX N; error CODE`.
fn progress(done: String, result: Result<(), String>) -> String {
    match result {
        Ok(()) => format!("{done}; ok"),
        Err(e) => format!("{done}; error {e}"),
    }
}

async fn write_big(path: &str, bytes: u64, at: At) -> String {
    let file = match open(
        path,
        OpenFlags::CREATE | OpenFlags::TRUNCATE,
        DescriptorFlags::WRITE,
    )
    .await
    {
        Ok(file) => file,
        Err(e) => return progress("wrote 0".into(), Err(e)),
    };
    let content = vec![b'w'; CHUNK];
    let (written, result) = write_stream(&file, at, &content, bytes).await;
    progress(
        format!("wrote {written}"),
        result.map_err(|e| format!("{e:?}")),
    )
}

async fn many_files(dir: &str, count: u64) -> String {
    let mut created = 0u64;
    for i in 0..count {
        if let Err(e) = open(
            &format!("{dir}/f{i}"),
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        )
        .await
        {
            return progress(format!("created {created}"), Err(e));
        }
        created += 1;
    }
    progress(format!("created {created}"), Ok(()))
}

async fn sparse(path: &str, bytes: u64, seek: bool) -> String {
    let result = async {
        let file = open(
            path,
            OpenFlags::CREATE | OpenFlags::TRUNCATE,
            DescriptorFlags::READ | DescriptorFlags::WRITE,
        )
        .await?;
        let result = if seek {
            write_stream(&file, At::Offset(bytes), b"x", 1).await.1
        } else {
            file.set_size(bytes).await
        };
        let size = file.stat().await.map_or(0, |s| s.size);
        Ok::<_, String>((size, result.map_err(|e| format!("{e:?}"))))
    }
    .await;
    match result {
        Ok((size, result)) => progress(format!("size {size}"), result),
        Err(e) => progress("size 0".into(), Err(e)),
    }
}

async fn connect(addr: &str) -> Result<String, String> {
    let parsed: std::net::SocketAddrV4 = addr
        .parse()
        .map_err(|e| format!("not an IPv4 address `{addr}`: {e}"))?;
    let [a, b, c, d] = parsed.ip().octets();
    let remote = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port: parsed.port(),
        address: (a, b, c, d),
    });
    let socket = TcpSocket::create(IpAddressFamily::Ipv4).map_err(|e| format!("{e:?}"))?;
    socket.connect(remote).await.map_err(|e| format!("{e:?}"))?;
    let peer = socket.get_remote_address().map_err(|e| format!("{e:?}"))?;
    Ok(format!("connected to {peer:?}"))
}

async fn resolve(host: &str) -> Result<String, String> {
    wasip3::sockets::ip_name_lookup::resolve_addresses(host.to_owned())
        .await
        .map(|addrs| format!("{addrs:?}"))
        .map_err(|e| format!("{e:?}"))
}

/// A `GET /` to `authority` (as given, user information and all) over plain HTTP.
fn http_request(authority: &str) -> Result<Request, String> {
    let (trailers_tx, trailers) = wasi_future::new(|| Ok(None));
    // Dropped, it sends its default: no trailers.
    drop(trailers_tx);
    let (request, _sent) = Request::new(Fields::new(), None, trailers, None);
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| "bad scheme".to_string())?;
    request
        .set_authority(Some(authority))
        .map_err(|()| format!("bad authority `{authority}`"))?;
    request
        .set_path_with_query(Some("/"))
        .map_err(|()| "bad path".to_string())?;
    Ok(request)
}

async fn http_get(authority: &str) -> String {
    let request = match http_request(authority) {
        Ok(request) => request,
        Err(e) => return format!("refused: {e}"),
    };
    match wasip3::http::client::send(request).await {
        Ok(response) => format!("status {}", response.get_status_code()),
        Err(e) => format!("refused: {e:?}"),
    }
}

type Sent = Pin<Box<dyn Future<Output = Result<Response, wasip3::http::types::ErrorCode>>>>;

/// Starts `count` requests to `authority` at once and holds them: each is a connection, and a
/// descriptor, of the host's.
async fn http_flood(authority: &str, count: u64) -> String {
    let mut sends: Vec<Sent> = Vec::new();
    for _ in 0..count {
        match http_request(authority) {
            Ok(request) => sends.push(Box::pin(wasip3::http::client::send(request))),
            Err(e) => return format!("opened 0; then {e}"),
        }
    }
    // One poll each starts every request; none is waited for.
    let mut refused = None;
    futures::future::poll_fn(|cx| {
        for send in &mut sends {
            if let Poll::Ready(Err(e)) = send.as_mut().poll(cx) {
                refused.get_or_insert_with(|| format!("{e:?}"));
            }
        }
        Poll::Ready(())
    })
    .await;
    match refused {
        Some(e) => format!("opened {count}; refused {e}"),
        None => format!("opened {count}"),
    }
}

async fn attack(settings: &Settings) -> Result<String, String> {
    Ok(match settings.mode.as_str() {
        "read-file" => outcome(read_file(&settings.string("path")?).await),
        "write-file" => {
            let written = async {
                let file = open(
                    &settings.string("path")?,
                    OpenFlags::CREATE | OpenFlags::TRUNCATE,
                    DescriptorFlags::WRITE,
                )
                .await?;
                match write_stream(&file, At::Offset(0), b"pwned", 5).await.1 {
                    Ok(()) => Ok("written".to_owned()),
                    Err(e) => Err(format!("{e:?}")),
                }
            };
            outcome(written.await)
        }
        "list-dir" => outcome(list_dir(&settings.string("path")?).await),
        "write-big" | "append-big" => {
            let at = if settings.mode == "write-big" {
                At::Offset(0)
            } else {
                At::End
            };
            write_big(
                &settings.string("path")?,
                settings.number("bytes", 1 << 30)?,
                at,
            )
            .await
        }
        "many-files" => {
            many_files(
                &settings.string("path")?,
                settings.number("count", 100_000)?,
            )
            .await
        }
        "sparse" | "sparse-seek" => {
            sparse(
                &settings.string("path")?,
                settings.number("bytes", 1 << 40)?,
                settings.mode == "sparse-seek",
            )
            .await
        }
        "connect" => outcome(connect(&settings.string("addr")?).await),
        "resolve" => outcome(resolve(&settings.string("host")?).await),
        "socket-flood" => {
            let count = settings.number("count", 1_000)?;
            let mut held = Vec::new();
            for _ in 0..count {
                match TcpSocket::create(IpAddressFamily::Ipv4) {
                    Ok(socket) => held.push(socket),
                    Err(e) => return Ok(format!("opened {}; then {e:?}", held.len())),
                }
            }
            format!("opened {}", held.len())
        }
        "http-get" => http_get(&settings.string("authority")?).await,
        "http-flood" => {
            http_flood(
                &settings.string("authority")?,
                settings.number("count", 1_000)?,
            )
            .await
        }
        "env" => {
            let var = settings.string("var")?;
            match wasip3::cli::environment::get_environment()
                .into_iter()
                .find(|(name, _)| *name == var)
            {
                Some((_, value)) => format!("set: {value}"),
                None => "unset".into(),
            }
        }
        "env-all" => {
            let mut names: Vec<String> = wasip3::cli::environment::get_environment()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            names.sort();
            format!("vars: [{}]", names.join(","))
        }
        other => return Err(format!("unknown mode `{other}`")),
    })
}

fn text(s: String) -> SubagentResult {
    SubagentResult {
        output: vec![ContentBlock::Text(s)],
        structured: None,
        stop_reason: StopReason::Completed,
        diagnostic: None,
    }
}

impl ProviderGuest for HostileP3 {
    fn describe(config: String) -> Result<ProviderDescriptor, String> {
        let settings = Settings::parse(&config)?;
        Ok(ProviderDescriptor {
            name: settings.name,
            capabilities: Capabilities {
                output_schema: false,
                depth_limit: false,
                tool_filter: false,
                persona: false,
            },
            features: RuntimeFeatures {
                steering: false,
                resume: false,
            },
            inherits_parent_context: false,
        })
    }

    async fn run(
        config: String,
        run_id: String,
        _request: StartRequest,
        _cancel: wit_bindgen::FutureReader<Option<String>>,
        _messages: wit_bindgen::StreamReader<Vec<ContentBlock>>,
    ) -> Result<SubagentResult, String> {
        let settings = Settings::parse(&config)?;
        runs::ready(&run_id);
        attack(&settings).await.map(text)
    }
}
