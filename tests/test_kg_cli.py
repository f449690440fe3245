"""`hypa kg stats|show` on a stored graph, and a clean error (no traceback, nothing run) for a bad file."""
from __future__ import annotations

import os
import pickle

from typer.testing import CliRunner

from bot.cli import app
from core.kg.offline import OfflineExtractor
from hypa_testkit.toy import TOY_CHUNKS
from storage.kg_store import KGStore


def _env(tmp_path):
    return {"HYPA_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}


def test_stats_and_show(tmp_path):
    KGStore(tmp_path / "kg").save(OfflineExtractor().extract("toy", TOY_CHUNKS, {"toy-doc": "h"}))
    stats = CliRunner().invoke(app, ["kg", "stats", "--collection", "toy"], env=_env(tmp_path))
    assert stats.exit_code == 0, stats.output
    assert "means" in stats.output and "term" in stats.output
    show = CliRunner().invoke(app, ["kg", "show", "Widget Audits", "--collection", "toy"], env=_env(tmp_path))
    assert show.exit_code == 0, show.output
    assert "an impartial evaluation" in show.output and "Toy Code § 1-101" in show.output
    missing = CliRunner().invoke(app, ["kg", "show", "gizmo", "--collection", "toy"], env=_env(tmp_path))
    assert missing.exit_code == 1 and "no entity 'gizmo'" in missing.output


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_unsafe_file_gives_a_clear_error(tmp_path):
    (tmp_path / "kg").mkdir()
    (tmp_path / "kg" / "toy.kg.pkl").write_bytes(pickle.dumps(_Evil(tmp_path / "ran")))
    result = CliRunner().invoke(app, ["kg", "stats", "--collection", "toy"], env=_env(tmp_path))
    assert result.exit_code == 1
    assert "refused to load" in result.output and "hypa kg build" in result.output
    assert not (tmp_path / "ran").exists()
    none = CliRunner().invoke(app, ["kg", "stats", "--collection", "other"], env=_env(tmp_path))
    assert none.exit_code == 1 and "no knowledge graph for 'other'" in none.output


def test_ingest_then_build_with_the_cli(tmp_path, monkeypatch):
    from bot.wiring import Components
    from tests.test_kg_retrieval import _WordEmbedder

    monkeypatch.setattr(Components, "embedder", property(lambda self: _WordEmbedder()))  # no model load
    doc = tmp_path / "rules.md"
    doc.write_text(
        "# Rules\n\n## § 2-201 Definitions\n\n“Gizmo” means a small widget.\n\n## § 2-202 Sales\n\n"
        "A seller of a gizmo shall keep records for at least 3 years, as defined by § 2-201.\n",
        encoding="utf-8",
    )
    env = _env(tmp_path / "data")
    ingest = CliRunner().invoke(app, ["ingest", str(doc), "--collection", "rules"], env=env)
    assert ingest.exit_code == 0, ingest.output
    assert (tmp_path / "data" / "kg" / "rules.kg.pkl").is_file()  # `hypa ingest` updates the graph once at the end
    built = CliRunner().invoke(app, ["kg", "build", "--collection", "rules"], env=env)
    assert built.exit_code == 0, built.output
    assert "triplets (offline)" in built.output
    show = CliRunner().invoke(app, ["kg", "show", "gizmos", "--collection", "rules"], env=env)
    assert "a small widget" in show.output and "§ 2-201" in show.output
    missing = CliRunner().invoke(app, ["kg", "build", "--collection", "nope"], env=env)
    assert missing.exit_code == 1 and "not in the index" in missing.output


def test_unreadable_file_and_bad_collection_name_give_clear_errors(tmp_path):
    (tmp_path / "kg" / "toy.kg.pkl").mkdir(parents=True)  # a directory where the file should be
    unreadable = CliRunner().invoke(app, ["kg", "stats", "--collection", "toy"], env=_env(tmp_path))
    assert unreadable.exit_code == 1 and "cannot read the knowledge graph of 'toy'" in unreadable.output
    assert unreadable.exception is None or isinstance(unreadable.exception, SystemExit)
    bad = CliRunner().invoke(app, ["kg", "show", "x", "--collection", "../etc"], env=_env(tmp_path))
    assert bad.exit_code == 1 and "invalid collection name" in bad.output
    assert bad.exception is None or isinstance(bad.exception, SystemExit)


def test_build_that_cannot_save_gives_a_clear_error(tmp_path, monkeypatch):
    from bot.wiring import Components
    from tests.test_kg_retrieval import _WordEmbedder

    monkeypatch.setattr(Components, "embedder", property(lambda self: _WordEmbedder()))
    doc = tmp_path / "rules.md"
    doc.write_text("# Rules\n\n## § 2-201 Definitions\n\n“Gizmo” means a small widget.\n", encoding="utf-8")
    env = {**_env(tmp_path / "data"), "HYPA_KG_EXTRACTOR": "none"}  # ingest without building the graph
    assert CliRunner().invoke(app, ["ingest", str(doc), "--collection", "rules"], env=env).exit_code == 0
    (tmp_path / "data" / "kg" / "rules.kg.pkl").mkdir(parents=True)  # os.replace onto a directory fails
    built = CliRunner().invoke(app, ["kg", "build", "--collection", "rules"], env=_env(tmp_path / "data"))
    assert built.exit_code == 1 and "cannot save the knowledge graph of 'rules'" in built.output
    assert not [p for p in (tmp_path / "data" / "kg").iterdir() if p.name.startswith(".tmp-")]


def test_kg_stats_refuses_a_shared_reference_bomb_in_one_line(tmp_path):
    """40 levels of 'the previous level, twice' (254 bytes): `hypa kg stats` used to spin forever."""
    import subprocess
    import sys

    level: list = []
    for _ in range(40):
        level = [level, level]
    (tmp_path / "kg").mkdir()
    (tmp_path / "kg" / "toy.kg.pkl").write_bytes(pickle.dumps(level, protocol=4))
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "kg", "stats", "--collection", "toy"],
        env={**os.environ, **_env(tmp_path)}, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "toy.kg.pkl" in proc.stderr and "hypa kg build --collection toy" in proc.stderr
    assert "shared references expand it" in proc.stderr or "nested deeper" in proc.stderr
