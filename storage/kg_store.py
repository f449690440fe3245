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

Plain data can still be a bomb: the memo opcodes (PUT/GET) let a list hold the *same* list twice,
so 40 levels of "the previous level, twice" are 259 bytes that expand to 2**40 items for anything
that walks them. `KGLoadLimits` bounds every load (`KGLimitExceeded`, a kind of UnsafeKGFile):
- **size**: the file is read only up to `max_bytes` (HYPA_KG_MAX_FILE_MB);
- **shared references**: the data expanded as a tree (what every later pass walks) may have at
  most `EXPANSION_PER_BYTE` items per byte of the file. Each container is walked once however
  often it is referred to, so the check is linear in the file, and so is every later pass;
  `KGData.to_plain()` writes a tree (only strings are shared), at ~0.1 items per byte;
- **depth**: `max_depth` levels (the graph's data is 5 deep);
- **time**: the opcode scan and the walk stop after `max_seconds` (HYPA_KG_LOAD_TIMEOUT_S), a
  backstop for whatever the other bounds miss.

Writes go to a temporary file in the same directory and are moved into place atomically, so a
reader never sees half a file.
"""
from __future__ import annotations

import io
import itertools
import pickle
import pickletools
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import KGFormatError, KGLimitExceeded, UnsafeKGFile
from core.files import atomic_write_bytes
from core.kg.model import KGData

PICKLE_PROTOCOL = 4
_PLAIN = (dict, list, tuple, str, int, float, bool, type(None))
_COLLECTION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_CHECK_EVERY = 4096  # opcodes or items between two looks at the clock
# Items of the data expanded as a tree, per byte of the file. Every item costs the pickle at least one
# opcode byte, so a file without shared containers stays under 1; real graphs are at ~0.1.
EXPANSION_PER_BYTE = 4
_END = object()
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


@dataclass(frozen=True)
class KGLoadLimits:
    """Bounds of one load (see the module docstring). The defaults are far above real graphs: the
    EU AI Act's is 0.5 MB and loads in ~50 ms."""

    max_bytes: int = 64 * 1024 * 1024  # HYPA_KG_MAX_FILE_MB: ~8-15 s of loading here, 120x the EU AI Act
    max_seconds: float = 30.0  # HYPA_KG_LOAD_TIMEOUT_S
    max_depth: int = 16


DEFAULT_LIMITS = KGLoadLimits()


class _PlainDataUnpickler(pickle.Unpickler):
    """Second layer behind `_check_opcodes`: no global and no persistent id is ever resolved."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafeKGFile(f"refused to load {module}.{name}: {_PLAIN_MESSAGE}")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafeKGFile(f"refused a persistent reference: {_PLAIN_MESSAGE}")


def loads_plain(payload: bytes, source: str = "<bytes>", limits: KGLoadLimits = DEFAULT_LIMITS) -> Any:
    """Unpickle `payload` allowing only plain data within `limits`; UnsafeKGFile for anything else."""
    deadline = time.monotonic() + limits.max_seconds
    try:
        if len(payload) > limits.max_bytes:
            raise KGLimitExceeded(_too_large(limits))
        _check_opcodes(payload, deadline, limits)
        data = _PlainDataUnpickler(io.BytesIO(payload)).load()
        _check_plain(data, deadline, limits, len(payload))
    except UnsafeKGFile as exc:
        raise type(exc)(f"{source}: {exc}") from None
    except (
        pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, MemoryError
    ) as exc:
        raise KGFormatError(f"{source}: not a readable knowledge-graph file ({type(exc).__name__}: {exc})") from None
    return data


def _too_large(limits: KGLoadLimits) -> str:
    return (
        f"larger than {limits.max_bytes:,} bytes ({limits.max_bytes / 2**20:.3g} MB), the most a "
        "knowledge-graph file may be (HYPA_KG_MAX_FILE_MB)"
    )


def _out_of_time(limits: KGLoadLimits) -> KGLimitExceeded:
    return KGLimitExceeded(
        f"reading it took longer than {limits.max_seconds:g} s, the most a knowledge-graph load may take "
        "(HYPA_KG_LOAD_TIMEOUT_S)"
    )


def _check_opcodes(payload: bytes, deadline: float, limits: KGLoadLimits) -> None:
    """UnsafeKGFile at the first opcode that could build anything but plain data (see the module
    docstring); ValueError from pickletools for a stream that is not a pickle."""
    strings: list[str] = []  # the last strings pushed, to name a STACK_GLOBAL's module and name
    for count, (opcode, arg, _pos) in enumerate(pickletools.genops(payload)):
        if count % _CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise _out_of_time(limits)
        name = opcode.name
        if name in _PLAIN_OPCODES:
            if name in _STRING_OPCODES:
                strings = [*strings[-1:], str(arg)]  # the *UNICODE opcodes push a str
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


def _check_plain(data: Any, deadline: float, limits: KGLoadLimits, payload_size: int) -> None:
    """Every value is plain data, nothing is nested deeper than `limits.max_depth` or contains itself,
    and the data expanded as a tree (what any later pass walks: validation, graph building) has at
    most EXPANSION_PER_BYTE items per byte of the file. Each container is walked once, whatever
    refers to it, so the check is linear in the file; iterative, so depth cannot exhaust the stack."""
    budget = EXPANSION_PER_BYTE * payload_size + 1024
    sizes: dict[int, int] = {}  # id of a container walked -> its expanded size (all stay alive in `data`)
    on_path: set[int] = set()  # containers being walked: meeting one again is a cycle
    frames: list[list[Any]] = []  # [container, depth, iterator over its children, expanded size so far]

    def enter(value: Any, depth: int) -> int | None:
        """The expanded size of a leaf or of a container already walked; None after starting a walk."""
        kind = type(value)
        if kind not in _PLAIN:  # exact types: no subclasses with custom behaviour
            raise UnsafeKGFile(f"contains a {kind.__name__}, which is not plain data")
        if kind not in (dict, list, tuple) or not value:
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise KGLimitExceeded(f"a {kind.__name__} contains itself")
        if depth >= limits.max_depth:
            raise KGLimitExceeded(f"data nested deeper than {limits.max_depth} levels")
        on_path.add(key)
        children = itertools.chain.from_iterable(value.items()) if kind is dict else iter(value)
        frames.append([value, depth, children, 1])
        return None

    def add(frame: list[Any], size: int) -> None:
        frame[3] += size
        if frame[3] > budget:
            raise KGLimitExceeded(
                f"shared references expand it to more than {budget:,} items ({EXPANSION_PER_BYTE} per byte "
                "of the file): a few hundred bytes of lists that hold the same list twice can stand for "
                "billions of items, and a knowledge-graph file shares none"
            )

    enter(data, 0)
    steps = 0
    while frames:
        frame = frames[-1]
        child = next(frame[2], _END)
        if child is _END:
            frames.pop()
            on_path.discard(id(frame[0]))
            sizes[id(frame[0])] = frame[3]
            if frames:
                add(frames[-1], frame[3])
            continue
        steps += 1
        if steps % _CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise _out_of_time(limits)
        size = enter(child, frame[1] + 1)
        if size is not None:
            add(frame, size)


class KGStore:
    """`<kg_dir>/<collection>.kg.pkl` per collection (implements core.kg.build.KGStore)."""

    def __init__(self, directory: Path, limits: KGLoadLimits = DEFAULT_LIMITS) -> None:
        self.directory = Path(directory)
        self.limits = limits

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
            with path.open("rb") as f:
                payload = f.read(self.limits.max_bytes + 1)  # never more than the limit into memory
        except FileNotFoundError:
            return None
        if len(payload) > self.limits.max_bytes:
            raise KGLimitExceeded(f"{path}: {_too_large(self.limits)}")
        return load_payload(payload, str(path), self.limits)

    def delete(self, collection: str) -> None:
        self.path(collection).unlink(missing_ok=True)


def load_payload(payload: bytes, source: str, limits: KGLoadLimits = DEFAULT_LIMITS) -> KGData:
    plain = loads_plain(payload, source, limits)
    try:
        return KGData.from_plain(plain)
    except KGFormatError as exc:
        raise KGFormatError(f"{source}: {exc}") from None
