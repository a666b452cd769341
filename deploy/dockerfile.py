"""Rules the deployment relies on in deploy/docker/Dockerfile, checked without a Docker engine.

hadolint lints the general practice; these are ours: a multi-stage build whose final stage
has no compilers, package installs or copied sources, runs ``kishpa`` as a numeric non-root
user, and bakes in no secret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|clang|build-essential|make|cmake|grpcio-tools|pip install|apt-get install"
    r"|apk add)\b"
)
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|PRIVATE|_KEY\b|DATABASE_URL")
ENV_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")


@dataclass
class Stage:
    """One ``FROM`` stage: its name and its (instruction, arguments) pairs."""

    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args_of(self, instruction: str) -> list[str]:
        """Arguments of every ``instruction`` of the stage, in order."""
        return [a for i, a in self.instructions if i == instruction]


def parse(text: str) -> list[Stage]:
    """Stages of a Dockerfile, continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(" ".join(current.split()))
        current = ""
    stages: list[Stage] = []
    for entry in logical:
        instruction, _, arguments = entry.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            parts = arguments.split()
            stages.append(Stage(parts[-1] if len(parts) >= 3 and parts[-2].upper() == "AS" else ""))
        if stages:
            stages[-1].instructions.append((instruction, arguments.strip()))
    return stages


def env_names(arguments: str) -> list[str]:
    """Names an ``ENV`` or ``ARG`` instruction sets."""
    return ENV_ASSIGNMENT.findall(arguments) or [arguments.split()[0]]


def check(text: str) -> list[str]:
    """Problems of a Dockerfile against the deployment's rules (empty when it passes)."""
    stages = parse(text)
    if len(stages) < 2:
        return ["needs a multi-stage build: a builder stage and a runtime stage"]
    problems = []
    final = stages[-1]
    for run in final.args_of("RUN"):
        if BUILD_TOOLS.search(run):
            problems.append(f"final stage installs or builds: RUN {run}")
    for copy in final.args_of("COPY") + final.args_of("ADD"):
        if not copy.startswith("--from="):
            problems.append(f"final stage copies from the build context: {copy}")
    users = final.args_of("USER")
    user = users[-1].split(":")[0] if users else ""
    if not user.isdigit():
        problems.append("final stage needs a numeric USER (Kubernetes verifies runAsNonRoot)")
    elif int(user) == 0:
        problems.append("final stage runs as root")
    if final.args_of("ENTRYPOINT") != ['["kishpa"]']:
        problems.append('ENTRYPOINT must be ["kishpa"] (exec form)')
    for stage in stages:
        for instruction, arguments in stage.instructions:
            if instruction in ("ENV", "ARG"):
                for name in env_names(arguments):
                    if SECRET_NAME.search(name.upper()):
                        problems.append(f"{instruction} {name}: secrets never go in the image")
    return problems
