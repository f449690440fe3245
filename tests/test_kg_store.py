"""The knowledge-graph pickle store: round trip, atomic writes, and a loader that runs no code."""
from __future__ import annotations

import builtins
import os
import pickle

import pytest

from core.kg.model import KGData, KGFormatError
from core.kg.offline import OfflineExtractor
from storage.kg_store import KGStore, UnsafeKGFile, load_payload, loads_plain
from tests.helpers import TOY_CHUNKS


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
