//! The mock provider's task as an Extism plugin: the guest side of the Extism peer benchmark.
//!
//! It does what `guests/mock-provider` does for one run, in Extism's idiom (bytes in, bytes out,
//! so JSON both ways): read its configuration, log one debug line through the host, fill the
//! reply template with the request's values and return the result. `noop` is the trivial export
//! for the call-overhead comparison.

use extism_pdk::{config, debug, plugin_fn, FnResult, Json};
use serde::{Deserialize, Serialize};

/// The part of a start request the reply template uses.
#[derive(Deserialize)]
struct Request {
    prompt: String,
    parent: String,
    depth: u32,
}

/// What a run produces.
#[derive(Serialize)]
struct RunResult {
    output: String,
    #[serde(rename = "stopReason")]
    stop_reason: &'static str,
}

/// One run: the same work as the mock provider's `run`.
#[plugin_fn]
pub fn run(Json(request): Json<Request>) -> FnResult<Json<RunResult>> {
    let name = config::get("name")?.unwrap_or_else(|| "mock".to_owned());
    let reply = config::get("reply")?.unwrap_or_else(|| "mock reply".to_owned());
    debug!(
        "mock provider `{name}`: run for parent `{}` at depth {}",
        request.parent, request.depth
    );
    let depth = request.depth.to_string();
    let output = reply
        .replace("{prompt}", &request.prompt)
        .replace("{parent}", &request.parent)
        .replace("{depth}", &depth);
    Ok(Json(RunResult {
        output,
        stop_reason: "completed",
    }))
}

/// Does nothing: the cost of a host-to-guest call.
#[plugin_fn]
pub fn noop(_: ()) -> FnResult<()> {
    Ok(())
}
