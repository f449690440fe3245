"""One pickle file per collection in `Settings.kg_dir`, loaded without ever running code from it.

`pickle.load` calls whatever callables the file names (os.system, builtins.eval, ...). Three layers:
1. Before anything is unpickled, every opcode of the stream is read (`pickletools.genops`, which
   builds nothing) and only those that build plain data are allowed: no globals, no calls (REDUCE,
   BUILD, INST, OBJ, NEWOBJ), no persistent ids, no bytes, sets or out-of-band buffers, and no
   extension codes. The last matters: EXT1/EXT2/EXT4 are served from copyreg's process-wide
   extension cache *without* calling `find_class` once any other unpickler in the process has
   resolved that code, so a `find_class` override alone does not stop them.
2. The unpickler's `find_class` refuses every global and `persistent_load` every persistent id.
3. The loaded structure is checked to contain nothing but dict, list, tuple, str, int, float, bool
   and None (exact types), then validated as KGData.
Anything else raises `UnsafeKGFile` or `KGFormatError` with a message that names the file; nothing
in it is executed.

Writes go to a temporary file in the same directory and are moved into place atomically, so a
reader never sees half a file.
"""
from __future__ import annotations

import io
import pickle
import pickletools
import re
from pathlib import Path
from typing import Any

from core.kg.model import KGData, KGFormatError
from storage.files import atomic_write_bytes

PICKLE_PROTOCOL = 4
_PLAIN = (dict, list, tuple, str, int, float, bool, type(None))
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
MAX_DEPTH = 64
_PLAIN_MESSAGE = "a knowledge-graph file may contain only plain data (dicts, lists, tuples, strings, numbers, booleans, None)"
# Opcodes that build only plain data, plus the stack, memo and framing plumbing around them.
_PLAIN_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET",
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "FLOAT", "BINFLOAT", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
    "EMPTY_LIST", "LIST", "APPEND", "APPENDS", "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
    "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
})
_DATA_OF = {
    "BINBYTES": "a bytes", "SHORT_BINBYTES": "a bytes", "BINBYTES8": "a bytes", "BYTEARRAY8": "a bytearray",
    "STRING": "a Python 2 string", "BINSTRING": "a Python 2 string", "SHORT_BINSTRING": "a Python 2 string",
    "EMPTY_SET": "a set", "ADDITEMS": "a set", "FROZENSET": "a frozenset",
    "NEXT_BUFFER": "an out-of-band buffer", "READONLY_BUFFER": "an out-of-band buffer",
}
_STRING_OPCODES = frozenset({"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"})


class UnsafeKGFile(ValueError):
    """The file asks to load code or objects that are not plain data; it was not loaded."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Second layer behind `_check_opcodes`: no global and no persistent id is ever resolved."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeKGFile(f"refused to load {module}.{name}: {_PLAIN_MESSAGE}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeKGFile(f"refused a persistent reference: {_PLAIN_MESSAGE}")


def loads_plain(payload: bytes, source: str = "<bytes>") -> Any:
    """Unpickle `payload` allowing only plain data; UnsafeKGFile for anything else."""
    try:
        _check_opcodes(payload)
        data = _PlainDataUnpickler(io.BytesIO(payload)).load()
    except UnsafeKGFile as exc:
        raise UnsafeKGFile(f"{source}: {exc}") from None
    except (
        pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError
    ) as exc:
        raise KGFormatError(f"{source}: not a readable knowledge-graph file ({type(exc).__name__}: {exc})") from None
    _check_plain(data, source)
    return data


def _check_opcodes(payload: bytes) -> None:
    """UnsafeKGFile at the first opcode that could build anything but plain data (see the module
    docstring); ValueError from pickletools for a stream that is not a pickle."""
    strings: list[str] = []  # the last strings pushed, to name a STACK_GLOBAL's module and name
    for opcode, arg, _pos in pickletools.genops(payload):
        name = opcode.name
        if name in _PLAIN_OPCODES:
            if name in _STRING_OPCODES:
                strings = [*strings[-1:], arg]
            elif name not in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
                strings = []
            continue
        if name in ("GLOBAL", "INST"):
            raise UnsafeKGFile(f"refused to load {str(arg).replace(' ', '.', 1)}: {_PLAIN_MESSAGE}")
        if name == "STACK_GLOBAL":
            what = ".".join(strings) if len(strings) == 2 else "a global"
            raise UnsafeKGFile(f"refused to load {what}: {_PLAIN_MESSAGE}")
        if name in ("EXT1", "EXT2", "EXT4"):
            raise UnsafeKGFile(f"refused extension code {arg} (extension codes name globals): {_PLAIN_MESSAGE}")
        if name in ("PERSID", "BINPERSID"):
            raise UnsafeKGFile(f"refused a persistent reference: {_PLAIN_MESSAGE}")
        if name in _DATA_OF:
            raise UnsafeKGFile(f"contains {_DATA_OF[name]}, which is not plain data")
        raise UnsafeKGFile(f"refused pickle opcode {name} (it calls or builds objects): {_PLAIN_MESSAGE}")


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

    def stamp(self, collection: str) -> tuple[int, int, int] | None:
        """(inode, size, mtime in ns) of the stored file, None without one: changes whenever a
        save replaces it (saves go through a new file moved into place), so caches can follow it."""
        try:
            st = self.path(collection).stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def save(self, data: KGData) -> Path:
        path = self.path(data.collection)
        atomic_write_bytes(path, pickle.dumps(data.to_plain(), protocol=PICKLE_PROTOCOL))
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
