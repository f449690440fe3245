"""Versioned prompt files (prompts/<name>.md), loaded by name; never inlined in code.

`load_prompt("answer_system.v1")` returns the text of `prompts/answer_system.v1.md`. A leading HTML
comment (`<!-- ... -->`) is a note for maintainers and is stripped. Names are plain file stems
(letters, digits, `_`, `-`, `.`), so a name can never reach outside the prompts directory.

`prompts/` is a package whose files are package data (pyproject.toml), so the directory is the same
in a source checkout and in an installed wheel: the `directory` argument first, then that package's
folder. (Before, an installed hypa looked for `<site-packages>/../prompts` and `./prompts`, found
neither, and every `hypa ask` with ANTHROPIC_API_KEY died with PromptNotFound.)
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import prompts as _shipped_prompts
from core.errors import PromptNotFound

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_LEADING_COMMENT = re.compile(r"\A\s*<!--.*?-->\s*", re.DOTALL)
SHIPPED_PROMPTS_DIR = Path(next(iter(_shipped_prompts.__path__))).resolve()


def prompt_dirs(directory: Path | None = None) -> list[Path]:
    dirs = [directory] if directory is not None else []
    dirs.append(SHIPPED_PROMPTS_DIR)
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
