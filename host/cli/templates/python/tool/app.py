"""{{NAME}}: a Seam tool that delegates its `prompt` argument to the provider it follows.

componentize-py generates the `wit_world` package from `wit/` at build time; the
exported interface `tool` is implemented by the class `Tool` below.
"""

import json
from typing import Optional

from wit_world import exports
from wit_world.exports.tool import ToolBinding, ToolDescriptor, ToolResult
from wit_world.imports import subagents
from wit_world.imports.types import (
    ContentBlock_Text,
    ParentRef,
    ProviderDescriptor,
    StartRequest,
    StopReason_Completed,
)
from componentize_py_types import Err

# The config keys this tool reads; any other key is refused, so a typo is caught at load.
KEYS = ("toolName", "provider")

# What the model may send: one string, `prompt`, and nothing else.
SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The task, self-contained."}},
        "required": ["prompt"],
        "additionalProperties": False,
    }
)


def binding(config: str) -> ToolBinding:
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
    for key in KEYS:
        if not isinstance(fields.get(key), str) or not fields[key]:
            raise Err(f"config key `{key}` (a non-empty string) is required")
    return ToolBinding(tool_name=fields["toolName"], provider=fields["provider"])


def failed(message: str) -> ToolResult:
    """A result the model sees as a failed call."""
    return ToolResult(content=[ContentBlock_Text(message)], is_error=True)


class Tool(exports.Tool):
    def bind(self, config: str) -> ToolBinding:
        # Read once at load: the tool is mounted only while its provider is registered.
        return binding(config)

    def describe(self, config: str, provider: Optional[ProviderDescriptor]) -> ToolDescriptor:
        b = binding(config)
        on = f"`{provider.name}`" if provider is not None else "a subagent"
        return ToolDescriptor(
            name=b.tool_name,
            description=f"Ask {on} to do a task; only its final answer comes back.",
            parameters_schema=SCHEMA,
        )

    def execute(self, config: str, caller: ParentRef, arguments: str) -> ToolResult:
        # `execute` has no error channel: every failure is a result with `is_error=True`.
        try:
            provider = binding(config).provider
        except Err as e:
            return failed(e.value)
        try:
            args = json.loads(arguments)
        except ValueError as e:
            return failed(f"the arguments are not JSON: {e}")
        prompt = args.get("prompt") if isinstance(args, dict) else None
        if not isinstance(prompt, str):
            return failed("missing required argument `prompt` (a string)")
        request = StartRequest(
            prompt=[ContentBlock_Text(prompt)],
            parent=caller,
            agent_options=None,
            output_schema=None,
            max_depth=None,
            tool_filter=None,
            persona=None,
            # A narrower scope for the run's subtree (JSON); the entry's `config.scope` still
            # bounds it.
            scope=None,
        )
        # A call that returns `err(e)` raises `Err(e)`, with `e` a `SubagentError_*` case.
        # `with` drops the run handle at the end, which disposes the run.
        try:
            with subagents.start(provider, request) as run:
                result = run.result()
        except Err as e:
            return failed(f"the run failed: {e.value}")
        if isinstance(result.stop_reason, StopReason_Completed):
            return ToolResult(content=result.output, is_error=False)
        return failed(result.diagnostic or f"the run ended {result.stop_reason}")
