"""Scripts for a subprocess in which some top-level packages cannot be imported.

`blocking_script(blocked, body)`: Python source that installs a meta-path finder raising
`ImportError` for every module in the set `BLOCKED` or below one of its names (`"trajopt"`
blocks `trajopt.engine.fddp`; `"controllers.mpc"` blocks that module only), initially `blocked`
(the body may add or discard names as it goes), then runs `body`.
"""

import textwrap

_PREAMBLE = """
import importlib.abc, sys
BLOCKED = set({blocked!r})

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ImportError(f"{{name}} is blocked in this subprocess")
        return None

sys.meta_path.insert(0, Blocker())
"""


def blocking_script(blocked, body: str) -> str:
    """`_PREAMBLE` for `blocked` (an iterable of top-level package names), then `body`."""
    return _PREAMBLE.format(blocked=sorted(blocked)) + textwrap.dedent(body)
