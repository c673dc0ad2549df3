"""{{NAME}}: a Seam observer that logs the name of every lifecycle event.

componentize-py generates the `wit_world` package from `wit/` at build time; the
exported interface `observer` is implemented by the class `Observer` below.
"""

import json

from wit_world import exports
from wit_world.imports.host import log
from wit_world.imports.types import LogLevel
from componentize_py_types import Err


class Observer(exports.Observer):
    def on_event(self, config: str, event: str) -> None:
        # Raising `Err(text)` returns `err(text)`: the host logs it and carries on.
        if config.strip() not in ("", "{}"):
            raise Err("this observer takes no config")
        try:
            name = json.loads(event).get("event", "?")
        except (ValueError, AttributeError) as e:
            raise Err(f"the event is not a JSON object: {e}")
        # The host tags the line with this plugin's id (`RUST_LOG=seam_host=info` shows it).
        log(LogLevel.INFO, f"{{NAME}} saw {name}")
