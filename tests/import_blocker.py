"""Scripts for a subprocess in which some top-level packages cannot be imported.

`blocking_script(blocked, body)`: Python source that installs a meta-path finder raising
`ImportError` for every module whose top-level package is in the set `BLOCKED` (initially
`blocked`; the body may add or discard names as it goes), then runs `body`.
"""

import textwrap

_PREAMBLE = """
import importlib.abc, sys
BLOCKED = set({blocked!r})

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked in this subprocess")
        return None

sys.meta_path.insert(0, Blocker())
"""


def blocking_script(blocked, body: str) -> str:
    """`_PREAMBLE` for `blocked` (an iterable of top-level package names), then `body`."""
    return _PREAMBLE.format(blocked=sorted(blocked)) + textwrap.dedent(body)
