"""Tuning the embedding model on the regulations' own text (core/tuning.py, storage/embedder_tuning.py,
bot/embedding_tuning.py, `hypa index tune`, and `hypa index build` on a fresh index)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.settings import Settings
from bot.wiring import embedding_model, make_embedder
from core.tuning import tuning_pairs
from hypa_testkit.toy import make_chunk
from storage.embedder import Embedder
from storage.embedder_tuning import TUNING_RECORD, TuningSetup, is_tuned_model, tune_embedding_model

LONG = "Providers shall keep the logs of the system for a period of at least six months."


def toy_chunks(n: int = 40):
    """n provisions, each a heading with two sentences, every fifth a list lead-in with its item."""
    chunks = []
    for i in range(n):
        if i % 5 == 0:
            text = f"A deployer of widget type {i} shall, before first use:\n(a) register the widget number {i} with the office."
        else:
            text = f"Sellers of widget type {i} shall notify buyers of the risks. {LONG.replace('six', str(i))}"
        chunks.append(make_chunk(f"Toy Act Art. {i}", text, heading=f"Obligations for widgets of type {i}"))
    return chunks


def test_pairs_come_from_headings_list_lead_ins_and_questions():
    chunks = [
        make_chunk("Toy Act Art. 1", "Sellers shall notify buyers ten business days before a sale.",
                   heading="Notice to buyers"),
        make_chunk("Toy Act Art. 3", "Widgets, gadgets.", heading="Scope"),
        make_chunk("Toy Act Art. 2",
                   "A seller shall, before any sale, do all of the following:\n(a) register every widget it sells.", heading=""),
    ]
    pairs = tuning_pairs(chunks, [("When must buyers be told?", ["ten business days before a sale", " "])])
    assert ("Notice to buyers", "Sellers shall notify buyers ten business days before a sale.") in pairs
    assert not any(a == "Scope" for a, _ in pairs)  # its one sentence is too short to say anything
    assert ("A seller shall, before any sale, do all of the following:", "(a) register every widget it sells.") in pairs
    assert ("When must buyers be told?", "ten business days before a sale") in pairs
    assert not any(b.strip() == "" for _, b in pairs) and len(pairs) == len(set(pairs))


def test_a_tuned_model_is_a_complete_folder_that_embeds_differently(tmp_path):
    base = Embedder(None)
    pairs = tuning_pairs(toy_chunks())
    out = tmp_path / "tuned"
    seen = []
    record = tune_embedding_model(base.model_dir, pairs, out, setup=TuningSetup(batch_size=16),
                                  note="toy", progress=lambda done, total: seen.append((done, total)))
    assert is_tuned_model(out) and not (tmp_path / "tuned.partial").exists()
    assert seen[-1] == (record.batches, record.batches) and record.pairs == len(pairs) >= 32
    assert json.loads((out / TUNING_RECORD).read_text())["note"] == "toy"
    tuned = Embedder(out)
    text = ["Who must register a widget before first use?"]
    assert not np.allclose(tuned.embed_queries(text), base.embed_queries(text), atol=1e-4)
    assert tuned.model_id != base.model_id  # an index built with one refuses the other's queries
    # As fast as the package's model: the tuned folder (saved in sentence-transformers' newer format)
    # is exported to ONNX like it, with the same vectors.
    fast = Embedder(out, onnx_dir=tmp_path / "onnx")
    np.testing.assert_allclose(fast.embed_queries(text), tuned.embed_queries(text), atol=1e-4)
    assert fast.backend_used == "onnx"


def test_a_stopped_tuning_leaves_no_model(tmp_path):
    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune_embedding_model(Embedder(None).model_dir, tuning_pairs(toy_chunks()), tmp_path / "tuned",
                             setup=TuningSetup(batch_size=16), progress=stop)
    assert not is_tuned_model(tmp_path / "tuned") and not (tmp_path / "tuned.partial").exists()
    with pytest.raises(ValueError, match="too few"):
        tune_embedding_model(Embedder(None).model_dir, [("a", "b")], tmp_path / "tuned")


def test_the_tuned_model_is_used_when_present_unless_a_model_is_set(tmp_path, monkeypatch):
    from bot.wiring import Components

    settings = Settings(data_dir=tmp_path)
    assert embedding_model(settings) is None  # nothing tuned: the package's model
    assert Components(settings).sentence_vectors.directory == tmp_path / "sentence_vectors"
    tune_embedding_model(Embedder(None).model_dir, tuning_pairs(toy_chunks()), settings.tuned_model_dir,
                         setup=TuningSetup(batch_size=16))
    assert embedding_model(settings) == str(settings.tuned_model_dir)
    assert make_embedder(settings).model_dir == settings.tuned_model_dir
    # Sentence vectors are stored by text: each model keeps its own, never another's.
    assert Components(settings).sentence_vectors.directory.parent == tmp_path / "sentence_vectors"
    chosen = Settings(data_dir=tmp_path, embedding_model=str(Embedder(None).model_dir))
    assert embedding_model(chosen) == str(Embedder(None).model_dir)


def test_a_fresh_index_is_built_with_a_model_tuned_first_and_a_built_one_is_left_alone(tmp_path, monkeypatch):
    """`hypa index build` on a fresh index tunes first (here on toy chunks instead of the corpora, to
    keep the test short) and embeds with the tuned model; `hypa index tune` then refuses to make
    the built collection unsearchable, unless --force."""
    import bot.embedding_tuning as tuning

    monkeypatch.setattr(
        tuning, "corpus_chunks", lambda settings, count, download=True: (toy_chunks(), ["toy"], ["other: no file"])
    )
    monkeypatch.setattr(tuning, "training_questions", lambda: [])
    def small_batches(base, pairs, out, **kw):
        return tune_embedding_model(base, pairs, out, setup=TuningSetup(batch_size=16), **kw)

    monkeypatch.setattr(tuning, "tune_embedding_model", small_batches)
    env = {"HYPA_DATA_DIR": str(tmp_path), "HYPA_TUNE_EMBEDDINGS": "true"}
    built = CliRunner().invoke(app, ["index", "build", "ll144"], env=env)
    assert built.exit_code == 0, built.output
    assert "tuned embedding model written" in built.output and "not tuned on other: no file" in built.output
    settings = Settings(data_dir=tmp_path)
    assert is_tuned_model(settings.tuned_model_dir)
    asked = CliRunner().invoke(app, ["ask", "What is the penalty for a first violation?", "--json"], env=env)
    assert asked.exit_code == 0, asked.output  # the index and the questions share the tuned model
    again = CliRunner().invoke(app, ["index", "tune"], env=env)
    assert again.exit_code != 0 and "already holds ll144" in again.output


def _own_regulation(path):
    """A user's own rules: twenty sections, each a heading with two sentences."""
    sections = [
        f"## Section {i}. Duties of kiosk operators of class {i}.\n\n"
        f"(a) An operator of a class {i} kiosk shall inspect its card readers every morning before opening. "
        f"(b) An operator of a class {i} kiosk shall keep the inspection log for at least {i} months after the inspection.\n"
        for i in range(1, 21)
    ]
    path.write_text("# Kiosk Safety Rules\n\n" + "\n".join(sections), encoding="utf-8")
    return path


def test_the_users_own_files_are_tuned_on_and_an_unreadable_one_is_named(tmp_path):
    import bot.embedding_tuning as tuning

    rules = _own_regulation(tmp_path / "kiosk-rules.md")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    chunks, read, skipped = tuning.document_chunks([tmp_path], Settings(data_dir=tmp_path / "d"), lambda t: len(t.split()))
    assert read == [rules.name] and len(chunks) >= 5
    assert len(skipped) == 1 and skipped[0].startswith("broken.pdf: ")
    assert len(tuning_pairs(chunks)) >= 20  # headings with their sentences: enough to tune on
    # A file over the ingest limit is not read for tuning either.
    small = Settings(data_dir=tmp_path / "d", ingest_max_file_mb=0.001)
    _, read, skipped = tuning.document_chunks([rules], small, lambda t: len(t.split()))
    assert read == [] and "HYPA_INGEST_MAX_FILE_MB" in skipped[0]


def test_ingest_into_a_fresh_index_tunes_on_the_files_it_ingests(tmp_path, monkeypatch):
    """`hypa ingest` as the first command tunes on the user's files (no corpus is on disk, and none is
    downloaded for an ingest), then embeds them with the tuned model; the next ingest does not tune."""
    import bot.embedding_tuning as tuning

    def no_corpus(settings, count, download=True):
        assert download is False  # an ingest never downloads the manifest corpora to tune on
        return [], [], ["ll144: not on disk"]

    monkeypatch.setattr(tuning, "corpus_chunks", no_corpus)
    monkeypatch.setattr(tuning, "training_questions", lambda: [])

    def small_batches(base, pairs, out, **kw):
        return tune_embedding_model(base, pairs, out, setup=TuningSetup(batch_size=16), **kw)

    monkeypatch.setattr(tuning, "tune_embedding_model", small_batches)
    env = {"HYPA_DATA_DIR": str(tmp_path / "data"), "HYPA_TUNE_EMBEDDINGS": "true"}
    rules = _own_regulation(tmp_path / "kiosk-rules.md")
    ingested = CliRunner().invoke(app, ["ingest", str(rules), "-c", "kiosks"], env=env)
    assert ingested.exit_code == 0, ingested.output
    assert "tuned embedding model written" in ingested.output and "kiosk-rules.md" in ingested.output
    assert is_tuned_model(Settings(data_dir=tmp_path / "data").tuned_model_dir)
    asked = CliRunner().invoke(app, ["ask", "How long must the kiosk inspection log be kept?", "-c", "kiosks", "--json"], env=env)
    assert asked.exit_code == 0, asked.output
    again = CliRunner().invoke(app, ["ingest", str(_own_regulation(tmp_path / "more.md")), "-c", "kiosks"], env=env)
    assert again.exit_code == 0 and "Tuning" not in again.output


def test_an_ingest_with_nothing_to_tune_on_goes_on_with_the_package_model(tmp_path, monkeypatch):
    import bot.embedding_tuning as tuning

    monkeypatch.setattr(tuning, "corpus_chunks", lambda settings, count, download=True: ([], [], []))
    env = {"HYPA_DATA_DIR": str(tmp_path / "data"), "HYPA_TUNE_EMBEDDINGS": "true"}
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    result = CliRunner().invoke(app, ["ingest", str(broken), "-c", "mine"], env=env)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "not tuned" in result.output and "broken.pdf" in result.output
    assert not is_tuned_model(Settings(data_dir=tmp_path / "data").tuned_model_dir)


def test_index_tune_names_a_missing_file_to_include(tmp_path):
    env = {"HYPA_DATA_DIR": str(tmp_path / "data")}
    result = CliRunner().invoke(app, ["index", "tune", "--include", str(tmp_path / "nope.md")], env=env)
    assert result.exit_code != 0 and "no such file or folder to tune on" in result.output and "nope.md" in result.output


@pytest.mark.parametrize("command", [["index", "build", "ll144"], ["ingest", "RULES", "-c", "mine"], ["index", "tune"]])
def test_an_unreachable_index_is_one_line_before_any_tuning(tmp_path, command):
    """Whether the index is fresh is asked of the index: a Weaviate that is down is said so, with
    the setting to check, instead of a traceback."""
    rules = _own_regulation(tmp_path / "rules.md")
    env = {
        "HYPA_DATA_DIR": str(tmp_path / "data"), "HYPA_TUNE_EMBEDDINGS": "true",
        "HYPA_INDEX": "weaviate", "WEAVIATE_URL": "http://127.0.0.1:9",
    }
    result = CliRunner().invoke(app, [str(rules) if c == "RULES" else c for c in command], env=env)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "Cannot reach Weaviate" in result.output and "HYPA_INDEX=weaviate" in result.output
    assert "Traceback" not in result.output and "Tuning" not in result.output
