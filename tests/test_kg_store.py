"""The knowledge-graph pickle store: round trip, atomic writes, and a loader that runs no code."""
from __future__ import annotations

import builtins
import os
import pickle

import pytest

from core.errors import KGFormatError, UnsafeKGFile
from core.kg.model import KGData
from core.kg.offline import OfflineExtractor
from hypa_testkit.toy import TOY_CHUNKS
from storage.kg_store import KGStore, load_payload, loads_plain


def _data() -> KGData:
    return OfflineExtractor().extract("toy", TOY_CHUNKS, {"toy-doc": "h1"})


def test_round_trip_keeps_every_triplet_and_entity(tmp_path):
    store = KGStore(tmp_path / "kg")
    data = _data()
    path = store.save(data)
    assert path == tmp_path / "kg" / "toy.kg.pkl"
    loaded = store.load("toy")
    assert loaded == data
    assert loaded.source_version == {"toy-doc": "h1"}
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]  # no temp file left


def test_missing_file_is_none_and_bad_names_are_refused(tmp_path):
    store = KGStore(tmp_path)
    assert store.load("toy") is None
    with pytest.raises(ValueError, match="invalid collection name"):
        store.path("../etc")


class _RunsShell:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Evaluates:
    def __reduce__(self):
        return (builtins.eval, ("__import__('os').getcwd()",))


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    store = KGStore(tmp_path)
    payload = pickle.dumps({"format": "hypa-kg", "version": 1, "x": _RunsShell(marker)})
    store.path("toy").write_bytes(payload)
    # The same bytes through the standard loader would create the marker: prove the payload is live.
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_RunsShell(probe)))
    assert probe.exists()
    with pytest.raises(UnsafeKGFile, match=r"refused to load (posix|os|nt)\.system.*only plain data"):
        store.load("toy")
    assert not marker.exists()


def test_eval_and_arbitrary_classes_are_refused():
    with pytest.raises(UnsafeKGFile, match="builtins.eval"):
        loads_plain(pickle.dumps(_Evaluates()))
    with pytest.raises(UnsafeKGFile, match="KGData"):
        loads_plain(pickle.dumps(_data()))  # even our own classes: only plain data is stored


def test_every_plain_type_loads_and_nothing_else():
    value = {"a": [1, 2.5, True, None, ("t", -3)], "b": {"nested": [{"x": "y"}]}}
    assert loads_plain(pickle.dumps(value, protocol=4)) == value
    for other in ({1, 2}, frozenset({"z"}), b"bytes"):  # no global needed, but not what KGData writes
        with pytest.raises(UnsafeKGFile, match="not plain data"):
            loads_plain(pickle.dumps({"k": other}, protocol=4))


def test_truncated_and_wrong_shape_files_fail_clearly(tmp_path):
    payload = pickle.dumps(_data().to_plain())
    with pytest.raises(KGFormatError, match="not a readable knowledge-graph file"):
        load_payload(payload[: len(payload) // 2], "cut.pkl")
    with pytest.raises(KGFormatError, match="not a hypa knowledge-graph file"):
        load_payload(pickle.dumps({"hello": "world"}), "other.pkl")
    plain = _data().to_plain()
    plain["triplets"] = [("only", "three", "fields")]
    with pytest.raises(KGFormatError, match="6-tuple"):
        load_payload(pickle.dumps(plain), "bad.pkl")
    plain = _data().to_plain()
    plain["version"] = 99
    with pytest.raises(KGFormatError, match="rebuild it with `hypa kg build`"):
        load_payload(pickle.dumps(plain), "new.pkl")


_CALLED: list[str] = []


def _record_call(*args):
    _CALLED.append("called")
    return "called"


def test_extension_codes_are_refused_even_when_copyreg_has_them_cached():
    """EXT opcodes are served from copyreg's process-wide cache without calling find_class once any
    unpickler in the process resolved the code: only the opcode scan stops them."""
    import copyreg

    code = 0xBEEF
    copyreg.add_extension(__name__, "_record_call", code)
    try:
        ext2 = b"\x80\x02\x83" + code.to_bytes(2, "little")
        assert pickle.loads(ext2 + b".") is _record_call  # the ordinary loader fills the cache
        _CALLED.clear()
        with pytest.raises(UnsafeKGFile, match=f"refused extension code {code}"):
            loads_plain(ext2 + b")R.", "tampered.kg.pkl")  # EXT2 then call it with ()
        assert _CALLED == []
    finally:
        copyreg.remove_extension(__name__, "_record_call", code)


@pytest.mark.parametrize(
    "payload, refused",
    [
        (b"(S'touch x'\nios\nsystem\n.", r"Python 2 string"),  # INST (after a protocol-0 string)
        (b"(Vtouch x\nios\nsystem\n.", r"refused to load os\.system"),  # INST
        (b"(cos\nsystem\nVx\no.", r"refused to load os\.system"),  # OBJ
        (b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x8c\x01x\x85R.", r"refused to load os\.system"),  # STACK_GLOBAL
        (b"\x80\x02}(tR.", r"opcode REDUCE"),  # REDUCE with no global: still refused
        (b"\x80\x02]}b.", r"opcode BUILD"),
        (b"\x80\x02cbuiltins\nobject\n)\x81.", r"refused to load builtins\.object"),  # NEWOBJ
        (b"\x80\x02K\x01Q.", r"persistent reference"),  # BINPERSID
        (b"P1\n.", r"persistent reference"),  # PERSID
        (b"\x80\x02\x82\x05.", r"extension code 5"),  # EXT1, not even registered
        (b"\x80\x05\x97.", r"out-of-band buffer"),
    ],
)
def test_crafted_opcodes_are_refused_before_anything_is_built(payload, refused):
    with pytest.raises(UnsafeKGFile, match=refused):
        loads_plain(payload, "crafted.kg.pkl")


def test_lengths_that_do_not_fit_the_file_are_format_errors_not_crashes():
    import struct

    for payload in (
        b"\x80\x04\x8e" + struct.pack("<Q", 2**40) + b"x.",  # BINBYTES8 of 1 TiB: MemoryError before
        b"\x80\x04\x8d" + struct.pack("<Q", 2**62) + b"x.",  # BINUNICODE8
        b"",
    ):
        with pytest.raises((KGFormatError, UnsafeKGFile)):
            loads_plain(payload, "huge.kg.pkl")


def test_ingest_rebuilds_a_corrupt_stored_graph_instead_of_failing(tmp_path):
    """`hypa ingest` after the graph file was damaged: the graph is rebuilt, the ingest succeeds."""
    from bot.settings import Settings
    from bot.wiring import Components
    from storage.embedded import EmbeddedIndex
    from storage.embedder import HashingEmbedder

    doc = tmp_path / "toy.md"
    doc.write_text("# Toy\n\n§ 1-101 Definitions. The term “widget” means a small device.\n", encoding="utf-8")
    components = Components(Settings(data_dir=tmp_path / "data"))
    components.__dict__["index"] = EmbeddedIndex(tmp_path / "data" / "index", embedder=HashingEmbedder())

    class WordCountingEmbedder(HashingEmbedder):  # model-free; ingest also counts tokens
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    components.__dict__["embedder"] = WordCountingEmbedder()  # cached_property slots: no model load
    assert components.ingest(doc, "toy").status == "added"
    graph_file = next((tmp_path / "data" / "kg").glob("toy*"))
    graph_file.write_bytes(b"not a pickle at all")
    doc.write_text(doc.read_text(encoding="utf-8") + "\n§ 1-102 Notice. A seller shall notify each buyer.\n", encoding="utf-8")
    assert components.ingest(doc, "toy").status == "replaced"
    assert components.kg_store.load("toy").source_version == components.index.documents("toy")


def test_warm_up_loads_the_graph_for_graph_configs_only(tmp_path):
    from bot.settings import Settings
    from bot.wiring import Components
    from storage.embedded import EmbeddedIndex
    from storage.embedder import HashingEmbedder

    class WordCountingEmbedder(HashingEmbedder):
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    doc = tmp_path / "toy.md"
    doc.write_text("# Toy\n\n§ 1-101 Definitions. The term “widget” means a small device.\n", encoding="utf-8")
    loaded = {}
    for config in ("fixed-k7", "fixed-k7-kg"):
        components = Components(Settings(data_dir=tmp_path / "data", retrieval_config=config))
        components.__dict__["index"] = EmbeddedIndex(tmp_path / "data" / "index", embedder=HashingEmbedder())
        components.__dict__["embedder"] = WordCountingEmbedder()
        components.ingest(doc, "toy")
        components.warm_up("toy")
        loaded[config] = bool(components.knowledge_graph._by_collection)
    assert loaded == {"fixed-k7": False, "fixed-k7-kg": True}


def test_served_collections_include_every_workspace_collection_and_missing_ones_are_named(tmp_path):
    from bot.settings import Settings
    from bot.wiring import Components
    from storage.embedded import EmbeddedIndex
    from storage.embedder import HashingEmbedder

    settings = Settings(data_dir=tmp_path, collection="toy", workspace_collections={"T1": "ws-T1", "T2": "toy"})
    components = Components(settings)
    components.__dict__["index"] = index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder())
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    assert components.served_collections() == ["toy", "ws-T1"]
    assert components.missing_collections() == ["ws-T1"]


# --- bounded loads: shared references, size, depth, time (issue 13, item 3) ----------------------


def _doubling_bomb(levels: int = 40) -> bytes:
    """Each level a list holding the previous level twice: pickle's memo writes it in ~6 bytes a
    level, but anything that walks it visits 2**levels items. Plain-data opcodes only."""
    level: list = []
    for _ in range(levels):
        level = [level, level]
    return pickle.dumps(level, protocol=4)


def _finishes(call, timeout: float = 10.0):
    """call() in a daemon thread: its exception or result, or AssertionError if it is still running
    after `timeout` (an unbounded loader spins forever; the test must fail, not hang)."""
    import threading

    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), f"still running after {timeout} s"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def test_a_259_byte_shared_reference_bomb_is_refused_at_once():
    import pickletools

    from core.errors import KGLimitExceeded

    payload = _doubling_bomb(40)
    assert len(payload) < 300
    assert {op.name for op, _, _ in pickletools.genops(payload)} <= {
        "PROTO", "FRAME", "EMPTY_LIST", "MEMOIZE", "BINGET", "APPENDS", "MARK", "STOP"
    }  # nothing the opcode check refuses: the walk itself must be bounded
    with pytest.raises(KGLimitExceeded, match="bomb.kg.pkl: .*(shared references expand it|nested deeper)"):
        _finishes(lambda: loads_plain(payload, "bomb.kg.pkl"))
    # Shallow enough for the depth bound (8,191 items from 86 bytes): the expansion bound stops it.
    with pytest.raises(KGLimitExceeded, match=r"shared references expand it to more than 1,\d{3} items"):
        _finishes(lambda: loads_plain(_doubling_bomb(12)))


def test_a_bomb_inside_a_real_graph_file_is_refused_by_the_store(tmp_path):
    from core.errors import KGLimitExceeded

    plain = _data().to_plain()
    plain["triplets"].append(pickle.loads(_doubling_bomb(40)))  # in a field the shape check reads last
    store = KGStore(tmp_path)
    store.path("toy").write_bytes(pickle.dumps(plain, protocol=4))
    with pytest.raises(KGLimitExceeded, match=r"toy\.kg\.pkl: .*(shared references expand it|nested deeper)"):
        _finishes(lambda: store.load("toy"))
    assert isinstance(KGLimitExceeded("x"), UnsafeKGFile)  # callers refuse and rebuild it like any unsafe file


def test_modest_sharing_loads_and_a_list_that_contains_itself_does_not():
    """pickle's memo shares equal strings, () is a singleton, and `tuple(t)` returns t itself: a few
    shared references expand little and load; a cycle would expand forever."""
    from core.errors import KGLimitExceeded

    name = "shared entity name"
    row = ("a", "b", "c", "d", "e", False)
    value = {"a": [name, name, (), ()], "b": {"k": name, "e": ()}, "c": [[], []], "t": [row, row, tuple(row)]}
    assert loads_plain(pickle.dumps(value, protocol=4)) == value
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(KGLimitExceeded, match="a list contains itself"):
        loads_plain(pickle.dumps({"x": cycle}, protocol=4))


def test_size_depth_and_time_bounds_name_their_setting(tmp_path):
    from core.errors import KGLimitExceeded
    from storage.kg_store import KGLoadLimits

    store = KGStore(tmp_path, KGLoadLimits(max_bytes=1000))
    data = _data()
    path = KGStore(tmp_path).save(data)
    assert path.stat().st_size > 1000
    with pytest.raises(KGLimitExceeded, match=r"larger than 1,000 bytes .*HYPA_KG_MAX_FILE_MB"):
        store.load("toy")

    # 10,000 empty lists on the stack, then 9,999 APPENDs: each into the one below it. Deeper than
    # the interpreter's recursion limit (pickle.dumps cannot even write it): no RecursionError either.
    nested = b"\x80\x02" + b"]" * 10_000 + b"a" * 9_999 + b"."
    with pytest.raises(KGLimitExceeded, match="nested deeper than 16 levels"):
        loads_plain(nested)

    many = pickle.dumps({"format": "x", "rows": [str(i) for i in range(20_000)]}, protocol=4)
    with pytest.raises(KGLimitExceeded, match=r"longer than 1e-06 s.*HYPA_KG_LOAD_TIMEOUT_S"):
        loads_plain(many, "slow.kg.pkl", KGLoadLimits(max_seconds=1e-6))
    assert loads_plain(many)["rows"][-1] == "19999"  # the default bounds are far above it


def test_a_graph_config_answers_when_the_stored_graph_is_a_bomb(tmp_path):
    """The running bot's path: the graph retriever refuses the file, rebuilds it from the index."""
    from core.kg.build import KnowledgeGraphs
    from storage.embedded import EmbeddedIndex
    from storage.embedder import HashingEmbedder

    index = EmbeddedIndex(tmp_path / "index", embedder=HashingEmbedder(32))
    index.replace_document("toy", "toy-doc", "h1", TOY_CHUNKS)
    store = KGStore(tmp_path / "kg")
    store.directory.mkdir()
    store.path("toy").write_bytes(_doubling_bomb(40))
    graphs = KnowledgeGraphs(index, store, OfflineExtractor)
    retriever = _finishes(lambda: graphs("toy"))
    assert retriever is not None
    assert store.load("toy").source_version == {"toy-doc": "h1"}  # rebuilt and saved over the bomb
