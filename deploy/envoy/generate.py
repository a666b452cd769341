"""Envoy's routes, made from the access table: ``python -m deploy.envoy.generate``.

``envoy.yaml`` is written by hand except for the lines between its ``generated:begin`` and
``generated:end`` comments: one exact route per RPC browsers may reach
(:func:`services.common.access.browser_rpcs`), to the cluster named after the workload
serving it. Run this after changing ``services/common/access.py``; ``--check`` changes
nothing and exits 1 while the committed file differs from what the table makes (so does
``tests/unit/test_envoy_generate.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from services.common.access import ACCESS, browser_rpcs

ENVOY_CONFIG: Final = Path(__file__).resolve().parent / "envoy.yaml"
BEGIN: Final = "# generated:begin"
END: Final = "# generated:end"
ROUTE: Final = (
    '{indent}- match: {{path: "{path}"}}\n'
    "{indent}  route: {{cluster: {cluster}, timeout: 0s,"
    " max_stream_duration: {{grpc_timeout_header_max: 0s}}}}\n"
)
"""One route: no route timeout (``WatchTable`` streams for hours), the call's own
``grpc-timeout`` as its deadline."""


class MarkersMissing(ValueError):
    """The configuration has no generated section to fill."""


def routes(access: Mapping[str, frozenset[str]] = ACCESS, indent: str = "") -> str:
    """The generated section: the route lines for every RPC browsers may reach."""
    return "".join(
        ROUTE.format(indent=indent, path=path, cluster=workload)
        for path, workload in browser_rpcs(access).items()
    )


def render(text: str, access: Mapping[str, frozenset[str]] = ACCESS) -> str:
    """``text`` (an ``envoy.yaml``) with its generated section made anew from ``access``."""
    lines = text.splitlines(keepends=True)
    begin = [i for i, line in enumerate(lines) if line.lstrip().startswith(BEGIN)]
    end = [i for i, line in enumerate(lines) if line.lstrip().startswith(END)]
    if len(begin) != 1 or len(end) != 1 or begin[0] > end[0]:
        raise MarkersMissing(f"expected one '{BEGIN}' line before one '{END}' line")
    first = lines[begin[0]]
    indent = first[: len(first) - len(first.lstrip())]
    return "".join(lines[: begin[0] + 1]) + routes(access, indent) + "".join(lines[end[0] :])


def main(argv: list[str] | None = None) -> int:
    """Rewrite the generated section of ``envoy.yaml`` (or, with ``--check``, compare it)."""
    parser = argparse.ArgumentParser(prog="python -m deploy.envoy.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only say whether it is stale")
    parser.add_argument("--config", type=Path, default=ENVOY_CONFIG, help="the file to write")
    args = parser.parse_args(argv)
    text = args.config.read_text()
    try:
        fresh = render(text)
    except MarkersMissing as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if fresh != text:
            print(f"{args.config}: stale routes; run python -m deploy.envoy.generate")
            return 1
        return 0
    if fresh != text:
        args.config.write_text(fresh)
        print(f"{args.config}: routes written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
