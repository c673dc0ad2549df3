//! Observer probe: a lifecycle observer for tests. Its config `mode`:
//!
//! - `log` (the default): logs `observed <event name>` for every event it sees, followed by
//!   ` id=<id>` when the event has an `id` (a run's, a plugin's) and ` seq=<seq>` when it has a
//!   `seq` (progress);
//! - `error`, `trap`, `panic`: fails on each event, so tests can prove a faulty observer is
//!   contained;
//! - `sleep`: never returns, sleeping on the WASI clock in a loop (a stuck observer);
//! - `spin`: never returns, burning CPU without calling the host;
//! - `wait`: waits until the file `file` exists (looking every millisecond, sleeping on the WASI
//!   clock in between), then logs like `log`: an observer that is stuck until a test lets it go
//!   (it needs a `dirs` grant for the file's folder).
//!
//! With key `on` (an event name), `sleep`, `spin` and `wait` hold up only that event and log the
//! others like `log`.

use std::time::Duration;

use seam_plugin::types::LogLevel;
use seam_plugin::{log, Observer};
use serde::Deserialize;
use serde_json::Value;

/// The probe's config; an unknown key fails every event.
#[derive(Deserialize)]
struct Config {
    #[serde(default = "log_mode")]
    mode: String,
    on: Option<String>,
    file: Option<String>,
}

fn log_mode() -> String {
    "log".into()
}

struct ObserverProbe;

seam_plugin::export_observer!(ObserverProbe);

/// Logs that `name` (with `id`, if any) was observed.
fn observed(name: &str, id: Option<&str>, seq: Option<u64>) -> Result<(), String> {
    let mut line = format!("observed {name}");
    if let Some(id) = id {
        line.push_str(&format!(" id={id}"));
    }
    if let Some(seq) = seq {
        line.push_str(&format!(" seq={seq}"));
    }
    log(LogLevel::Info, line);
    Ok(())
}

/// Burns CPU forever without calling any host import; `black_box` keeps the loop alive.
fn spin() -> ! {
    let mut state: u64 = 1;
    loop {
        state = std::hint::black_box(
            state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
}

impl Observer for ObserverProbe {
    type Config = Config;

    fn on_event(config: Config, value: Value) -> Result<(), String> {
        let Config { mode, on, file } = config;
        let name = value
            .get("event")
            .and_then(|n| n.as_str())
            .unwrap_or("?")
            .to_string();
        let id = value.get("id").and_then(|n| n.as_str());
        let seq = value.get("seq").and_then(|n| n.as_u64());
        let hold = on.as_deref().is_none_or(|on| on == name);
        match mode.as_str() {
            "log" => observed(&name, id, seq),
            "error" => Err(format!("refusing {name}")),
            "trap" => core::arch::wasm32::unreachable(),
            "panic" => panic!("observer panics on {name}"),
            "sleep" | "spin" | "wait" if !hold => observed(&name, id, seq),
            "sleep" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            "spin" => spin(),
            "wait" => {
                let file = file.ok_or("config key `file` is required in mode `wait`")?;
                while !std::path::Path::new(&file).exists() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                observed(&name, id, seq)
            }
            other => Err(format!("config key `mode`: unknown mode `{other}`")),
        }
    }
}
