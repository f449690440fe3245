"""The LLM triplet extractor, through the real anthropic SDK against the local fake Messages API."""
from __future__ import annotations

import json
import os
import re

import pytest

from core.errors import MalformedResponseError
from core.kg.llm import (
    ExtractionCache,
    LLMExtractor,
    parse_triplets,
)
from core.kg.offline import OfflineExtractor
from hypa_testkit.fakes.anthropic_client import make_client
from hypa_testkit.fakes.anthropic_server import message, overloaded, reply
from hypa_testkit.toy import TOY_CHUNKS

pytestmark = pytest.mark.timeout(30)


def triplets_reply(*items):
    return reply(
        message(json.dumps({"triplets": [dict(zip(("subject", "predicate", "object", "object_is_entity"), i)) for i in items]}))
    )


def _extractor(fake, tmp_path):
    return LLMExtractor(make_client(fake), OfflineExtractor(), ExtractionCache(tmp_path / "llm_triplets.json"))


def test_llm_triplets_are_added_with_provenance_and_cached(fake, tmp_path):
    fake.enqueue(
        triplets_reply(("widget audit", "means", "an impartial evaluation", False)),
        triplets_reply(
            ("seller", "must", "notify each buyer ten business days before a sale", False), ("seller", "made up", "x", False)
        ),
        triplets_reply(("seller", "refers to", "section 1-101", True)),
    )
    extractor = _extractor(fake, tmp_path)
    data = extractor.extract("toy", TOY_CHUNKS, {"toy-doc": "h"})
    assert data.extractor == "offline+llm:claude-haiku-5-5"
    facts = {(t.subject, t.predicate, t.object, t.label) for t in data.triplets}
    assert ("seller", "must", "notify each buyer ten business days before a sale", "Toy Code § 1-102(a)") in facts
    assert ("seller", "refers to", "§ 1-101", "Toy Code § 1-103") in facts
    assert not any(t.predicate == "made up" for t in data.triplets)  # only the prompt's predicates
    offline = OfflineExtractor().extract("toy", TOY_CHUNKS, {"toy-doc": "h"})
    assert set(offline.triplets) <= set(data.triplets)  # structure from the offline extractor stays
    # the request: system prompt from prompts/, chunk text as JSON data inside <input>
    body = fake.requests[0].body
    assert body["model"] == "claude-haiku-5-5"
    assert body["system"][0]["text"].startswith("You extract facts") and body["system"][0]["cache_control"]
    payload = re.search(r"<input>\n(.*)\n</input>", body["messages"][0]["content"][0]["text"], re.DOTALL).group(1)
    assert json.loads(payload)["text"] == TOY_CHUNKS[0].text
    # re-ingest: everything from the cache, no call
    again = _extractor(fake, tmp_path).extract("toy", TOY_CHUNKS, {"toy-doc": "h"})
    assert len(fake.requests) == 3 and set(again.triplets) == set(data.triplets)


def test_a_failed_chunk_keeps_offline_facts_and_is_retried_next_time(fake, tmp_path):
    fake.enqueue(message_reply := triplets_reply(), overloaded(), overloaded(), overloaded(), triplets_reply())
    extractor = _extractor(fake, tmp_path)
    data = extractor.extract("toy", TOY_CHUNKS, {})
    assert extractor.failures == 1
    assert data.triplets  # offline facts are all there
    fake.enqueue(triplets_reply(("seller", "must", "keep records", False)))
    retry = _extractor(fake, tmp_path)
    retry.extract("toy", TOY_CHUNKS, {})
    assert retry.calls == 1  # only the chunk that failed is asked again
    del message_reply


def test_parse_triplets_accepts_fences_and_rejects_junk():
    rows = parse_triplets(
        '```json\n{"triplets": [{"subject": "A", "predicate": "Must", "object": "b"}, 3, {"subject": ""}]}\n```'
    )
    assert rows == [["A", "must", "b", False]]
    with pytest.raises(MalformedResponseError):
        parse_triplets("no json here")
    with pytest.raises(MalformedResponseError):
        parse_triplets('{"facts": []}')


def test_settings_wiring(tmp_path):
    from bot.settings import Settings
    from bot.wiring import Components

    settings = Settings(anthropic_api_key="k", fast_model="claude-haiku-4-5", data_dir=tmp_path, kg_extractor="llm")
    extractor = Components(settings).triplet_extractor()
    assert extractor.cache.path == tmp_path / "kg" / "llm_triplets.json"
    assert extractor.config.model == "claude-haiku-4-5" and isinstance(extractor.base, OfflineExtractor)


def test_cache_save_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    cache = ExtractionCache(tmp_path / "llm_triplets.json")
    cache.put("k", [["a", "means", "b", False]])

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    # Fails once the temporary file has been created and written (when it is flushed to disk).
    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError):
        cache.save()
    assert list(tmp_path.iterdir()) == []
