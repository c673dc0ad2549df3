"""{{NAME}}: a Seam subagent provider.

componentize-py generates the `wit_world` package from `wit/` at build time; the
exported interface `provider` is implemented by the class `Provider` below.
"""

import json

from wit_world import exports
from wit_world.imports import run_context
from wit_world.imports.types import (
    Capabilities,
    ContentBlock_Text,
    ProviderDescriptor,
    RuntimeFeatures,
    StartRequest,
    StopReason_Aborted,
    StopReason_Completed,
    SubagentResult,
)
from componentize_py_types import Err

# The config keys this provider reads; any other key is refused, so a typo is caught at load.
KEYS = ("name", "reply", "delayMs")


def settings(config: str) -> dict:
    """Reads the config strictly. Raising `Err(text)` returns `err(text)` to the host."""
    try:
        fields = json.loads(config or "{}")
    except ValueError as e:
        raise Err(f"the config is not JSON: {e}")
    if not isinstance(fields, dict):
        raise Err("the config must be a JSON object")
    for key in fields:
        if key not in KEYS:
            raise Err(f"config key `{key}` is unknown; known keys: {', '.join(KEYS)}")
    for key in ("name", "reply"):
        if key in fields and not isinstance(fields[key], str):
            raise Err(f"config key `{key}` must be a string")
    delay = fields.get("delayMs", 0)
    # `bool` is an `int` in Python: refuse `true` explicitly.
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
        raise Err("config key `delayMs` must be a whole number")
    return {
        "name": fields.get("name", "{{NAME}}"),
        "reply": fields.get("reply", "{prompt}"),
        "delay_ms": delay,
    }


class Provider(exports.Provider):
    def describe(self, config: str) -> ProviderDescriptor:
        # Called once at load; an error here refuses the plugin.
        s = settings(config)
        return ProviderDescriptor(
            name=s["name"],
            capabilities=Capabilities(
                output_schema=False, depth_limit=False, tool_filter=False, persona=False
            ),
            features=RuntimeFeatures(steering=False, resume=False),
            inherits_parent_context=False,
        )

    def run(self, config: str, run_id: str, request: StartRequest) -> SubagentResult:
        # Each run gets a fresh instance, so nothing carries over between runs.
        s = settings(config)
        # The child exists: `started` resolves and `subagent/start` is emitted.
        run_context.ready()
        run_context.progress([ContentBlock_Text("working on it")])
        # A cancellable wait: `sleep` returns False as soon as the run is cancelled. (To wait on
        # I/O and the cancel together, poll `run_context.cancelled()` with it.)
        if s["delay_ms"] > 0 and not run_context.sleep(s["delay_ms"]):
            return SubagentResult(
                output=[],
                structured=None,
                stop_reason=StopReason_Aborted(),
                diagnostic=run_context.cancel_reason() or "cancelled",
            )
        prompt = "\n".join(b.value for b in request.prompt if isinstance(b, ContentBlock_Text))
        return SubagentResult(
            output=[ContentBlock_Text(s["reply"].replace("{prompt}", prompt))],
            structured=None,
            stop_reason=StopReason_Completed(),
            diagnostic=None,
        )
