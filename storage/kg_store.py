"""One pickle file per collection in `Settings.kg_dir`, loaded without ever running code from it.

`pickle.load` calls whatever callables the file names (os.system, builtins.eval, ...). The loader
here is a `pickle.Unpickler` whose `find_class` refuses every global, so only pickle's built-in
types can be rebuilt. Extension-registry opcodes also go through `find_class`, and persistent ids
are refused. After loading, the whole structure is checked to contain nothing but dict, list, tuple,
str, int, float, bool and None (exact types; not even bytes or sets, which KGData never writes),
then validated as KGData. Anything else raises `UnsafeKGFile` or `KGFormatError` with a message
that names the file; nothing in it is executed.

Writes go to a temporary file in the same directory and are moved into place atomically, so a
reader never sees half a file.
"""
from __future__ import annotations

import io
import os
import pickle
import re
import tempfile
from pathlib import Path
from typing import Any

from core.kg.model import KGData, KGFormatError

PICKLE_PROTOCOL = 4
_PLAIN = (dict, list, tuple, str, int, float, bool, type(None))
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
MAX_DEPTH = 64


class UnsafeKGFile(ValueError):
    """The file asks to load code or objects that are not plain data; it was not loaded."""


class _PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeKGFile(
            f"refused to load {module}.{name}: a knowledge-graph file may contain only plain data "
            "(dicts, lists, tuples, strings, numbers, booleans, None)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeKGFile("refused a persistent reference: a knowledge-graph file may contain only plain data")


def loads_plain(payload: bytes, source: str = "<bytes>") -> Any:
    """Unpickle `payload` allowing only plain data; UnsafeKGFile for anything else."""
    try:
        data = _PlainDataUnpickler(io.BytesIO(payload)).load()
    except UnsafeKGFile as exc:
        raise UnsafeKGFile(f"{source}: {exc}") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        raise KGFormatError(f"{source}: not a readable knowledge-graph file ({type(exc).__name__}: {exc})") from None
    _check_plain(data, source)
    return data


def _check_plain(value: Any, source: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise KGFormatError(f"{source}: data nested deeper than {MAX_DEPTH} levels")
    if type(value) not in _PLAIN:  # exact types: no subclasses with custom behaviour
        raise UnsafeKGFile(f"{source}: contains a {type(value).__name__}, which is not plain data")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_plain(k, source, depth + 1)
            _check_plain(v, source, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_plain(v, source, depth + 1)


class KGStore:
    """`<kg_dir>/<collection>.kg.pkl` per collection."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def path(self, collection: str) -> Path:
        if not _COLLECTION.match(collection):
            raise ValueError(f"invalid collection name {collection!r}")
        return self.directory / f"{collection}.kg.pkl"

    def exists(self, collection: str) -> bool:
        return self.path(collection).is_file()

    def save(self, data: KGData) -> Path:
        path = self.path(data.collection)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = pickle.dumps(data.to_plain(), protocol=PICKLE_PROTOCOL)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".kg.pkl", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def load(self, collection: str) -> KGData | None:
        """The stored graph data, or None if there is none. Refuses unsafe or malformed files."""
        path = self.path(collection)
        try:
            payload = path.read_bytes()
        except FileNotFoundError:
            return None
        return load_payload(payload, str(path))

    def delete(self, collection: str) -> None:
        self.path(collection).unlink(missing_ok=True)


def load_payload(payload: bytes, source: str) -> KGData:
    plain = loads_plain(payload, source)
    try:
        return KGData.from_plain(plain)
    except KGFormatError as exc:
        raise KGFormatError(f"{source}: {exc}") from None
