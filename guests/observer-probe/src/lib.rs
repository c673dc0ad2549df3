//! Observer probe: a lifecycle observer for tests. It logs the name of every event it sees
//! (`mode = "log"`), or fails on each one (`"error"`, `"trap"`, `"panic"`) so that tests can prove
//! a faulty observer is contained.

wit_bindgen::generate!({ path: "../../wit", world: "observer-plugin" });

use exports::seam::plugin::observer::Guest;
use seam::plugin::host::log;
use seam::plugin::types::LogLevel;
use seam_guest_support::config::{self, Section};

struct ObserverProbe;

export!(ObserverProbe);

impl Guest for ObserverProbe {
    fn on_event(config: String, event: String) -> Result<(), String> {
        let fields = config::parse(&config)?;
        let root = Section::root(&fields, &["mode"])?;
        let mode = root.string("mode")?.unwrap_or_else(|| "log".to_string());
        let value: serde_json::Value =
            serde_json::from_str(&event).map_err(|e| format!("event is not JSON: {e}"))?;
        let name = value
            .get("event")
            .and_then(|n| n.as_str())
            .unwrap_or("?")
            .to_string();
        match mode.as_str() {
            "log" => {
                log(LogLevel::Info, &format!("observed {name}"));
                Ok(())
            }
            "error" => Err(format!("refusing {name}")),
            "trap" => core::arch::wasm32::unreachable(),
            "panic" => panic!("observer panics on {name}"),
            other => Err(format!("config key `mode`: unknown mode `{other}`")),
        }
    }
}
