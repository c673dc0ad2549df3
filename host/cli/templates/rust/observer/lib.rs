//! {{NAME}}: a Seam observer that logs the name of every lifecycle event.

use seam_plugin::types::LogLevel;
use seam_plugin::Observer;
use serde::Deserialize;

/// This observer takes no config: any key is refused at load.
#[derive(Deserialize)]
struct Config {}

struct Plugin;

impl Observer for Plugin {
    type Config = Config;

    fn on_event(_config: Config, event: serde_json::Value) -> Result<(), String> {
        let name = event["event"].as_str().unwrap_or("?");
        seam_plugin::log(LogLevel::Info, format!("{{NAME}} saw {name}"));
        Ok(())
    }
}

seam_plugin::export_observer!(Plugin);
