"""Loading chunks.jsonl fast (orjson, direct construction) gives the same Chunks as the checked path."""
from __future__ import annotations

import json

from core.types import Chunk
from hypa_testkit.toy import TOY_CHUNKS
from storage.embedded import _read_chunks


def test_fast_path_builds_equal_hashable_chunks(tmp_path):
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in TOY_CHUNKS) + "\n", encoding="utf-8")
    loaded = _read_chunks(path)
    assert loaded == TOY_CHUNKS and all(type(c) is Chunk for c in loaded)
    assert {hash(c) for c in loaded} == {hash(c) for c in TOY_CHUNKS}
    assert loaded[0].page_start == 1 and isinstance(loaded[0].char_end, int)


def test_rows_with_other_fields_take_the_checked_path(tmp_path):
    path = tmp_path / "chunks.jsonl"
    row = {**TOY_CHUNKS[0].to_dict(), "added_in_a_later_format": True}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert _read_chunks(path) == [TOY_CHUNKS[0]]
