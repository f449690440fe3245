"""Versioned prompt files (prompts/<name>.md), loaded by name; never inlined in code.

`load_prompt("answer_system.v1")` returns the text of `prompts/answer_system.v1.md`. A leading HTML
comment (`<!-- ... -->`) is a note for maintainers and is stripped. Names are plain file stems
(letters, digits, `_`, `-`, `.`), so a name can never reach outside the prompts directory.

The directory is looked up in order: the `directory` argument, `<repo>/prompts` (a source checkout),
`./prompts` (the Docker image's WORKDIR /app, where the package itself is installed into
site-packages).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)
REPO_PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"


class PromptNotFound(FileNotFoundError):
    pass


def prompt_dirs(directory: Path | None = None) -> list[Path]:
    dirs = [directory] if directory is not None else []
    dirs += [REPO_PROMPTS_DIR, Path.cwd() / "prompts"]
    return dirs


def prompt_path(name: str, directory: Path | None = None) -> Path:
    if not _NAME.match(name) or ".." in name:
        raise ValueError(f"invalid prompt name {name!r} (expected a file stem such as 'answer_system.v1')")
    for d in prompt_dirs(directory):
        path = d / f"{name}.md"
        if path.is_file():
            return path
    searched = ", ".join(str(d) for d in prompt_dirs(directory))
    raise PromptNotFound(f"prompt {name!r} not found (looked for {name}.md in {searched})")


def load_prompt(name: str, directory: Path | None = None) -> str:
    """The prompt text, without its leading maintainer comment and surrounding whitespace."""
    return _load(prompt_path(name, directory))


@lru_cache(maxsize=64)
def _load(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    text = _LEADING_COMMENT.sub("", text, count=1)
    return text.strip()
