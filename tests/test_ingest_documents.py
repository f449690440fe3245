"""`hypa ingest` keeps every document, says what it does, and has limits (issue 13, item 7).

Through the real CLI (typer's CliRunner) on both index backends: the embedded index, and the real
weaviate-client against the fake Weaviate (hypa_testkit/fakes/weaviate_server.py). The embedding model is
replaced by a model-free one, so what is tested is ingestion, not embeddings.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bot.cli
from bot.cli import app
from bot.wiring import Components
from hypa_testkit.fakes.weaviate_server import FakeWeaviate
from storage.embedder import HashingEmbedder


class WordCountingEmbedder(HashingEmbedder):  # model-free; ingest also counts tokens
    def count_tokens(self, text: str) -> int:
        return len(text.split())


def rules(path: Path, subject: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# Rules about {subject}\n\n## Section 1. Scope.\n\n(a) Every {subject} must be registered before "
        f"any sale to a buyer.\n\n## Section 2. Labels.\n\n(a) A seller shall label each {subject}.\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(params=["embedded", "weaviate"])
def hypa(request, tmp_path, monkeypatch):
    """Runs `hypa ARGS...` against a fresh data directory on the backend of the parameter."""
    # COLUMNS: wide enough that table cells (paths) are not folded over several lines.
    env = {"HYPA_DATA_DIR": str(tmp_path / "data"), "HYPA_CORPUS_MIRROR": "", "HYPA_INDEX": request.param,
           "COLUMNS": "250"}
    fake = None
    if request.param == "weaviate":
        fake = FakeWeaviate().__enter__()
        env.update(WEAVIATE_URL=fake.url, WEAVIATE_GRPC_PORT=str(fake.grpc_port))
    built: list[Components] = []

    def components(settings, **overrides):
        made = Components(settings, overrides={k: v for k, v in overrides.items() if v is not None})
        made.__dict__["embedder"] = WordCountingEmbedder()  # the cached_property slot: no model load
        built.append(made)
        return made

    monkeypatch.setattr(bot.cli, "_components", components)

    def run(*args: str):
        result = CliRunner().invoke(app, list(args), env=env)
        assert "Traceback" not in result.output, result.output
        return result

    run.backend = request.param
    run.data_dir = tmp_path / "data"
    run.components = built
    yield run
    for made in built:
        if "index" in made.__dict__ and hasattr(made.index, "close"):
            made.index.close()
    if fake is not None:
        fake.__exit__(None, None, None)


def one_line(output: str) -> str:
    return " ".join(output.split())


def listed(hypa, collection: str) -> dict[str, list[str]]:
    """`hypa index documents` as {document: [chunks, sha256, ingested at, source, link]} (table rows)."""
    result = hypa("index", "documents", collection)
    assert result.exit_code == 0, result.output
    rows = {}
    for line in result.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) >= 5 and cells[1].isdigit():
            rows[cells[0]] = cells[1:]
    return rows


# --- a) nothing is lost -----------------------------------------------------------------------------


def test_two_files_with_the_same_name_are_both_kept(hypa, tmp_path):
    a = rules(tmp_path / "a" / "rules.md", "widget")
    b = rules(tmp_path / "b" / "rules.md", "gadget")
    first = hypa("ingest", str(a), "-c", "X")
    second = hypa("ingest", str(b), "-c", "X")
    assert first.exit_code == second.exit_code == 0, second.output
    assert "replaced" not in second.output  # was: "replaced rules.md", and a/rules.md was gone
    assert "added rules.md as 'b-rules'" in one_line(second.output)
    assert f"'rules' is another file: {a.resolve()}" in one_line(second.output)
    documents = listed(hypa, "X")
    assert set(documents) == {"rules", "b-rules"}
    ask = hypa("ask", "What must every widget be before any sale?", "-c", "X", "--json")
    assert "widget" in json.loads(ask.stdout)["answer"]
    ask = hypa("ask", "What must every gadget be before any sale?", "-c", "X", "--json")
    assert "gadget" in json.loads(ask.stdout)["answer"]


def test_the_same_file_again_updates_its_own_document_and_says_replaced(hypa, tmp_path):
    a = rules(tmp_path / "a" / "rules.md", "widget")
    b = rules(tmp_path / "b" / "rules.md", "gadget")
    hypa("ingest", str(a), "-c", "X")
    hypa("ingest", str(b), "-c", "X")
    assert "unchanged rules.md as 'b-rules'" in one_line(hypa("ingest", str(b), "-c", "X").output)
    rules(b, "doohickey")
    again = hypa("ingest", str(b), "-c", "X")
    assert "replaced rules.md as 'b-rules'" in one_line(again.output)
    documents = listed(hypa, "X")
    assert set(documents) == {"rules", "b-rules"}
    assert documents["rules"][3].replace(" ", "") == str(a.resolve()).replace(" ", "")


def test_documents_lists_hash_chunks_time_and_source(hypa, tmp_path):
    import hashlib

    a = rules(tmp_path / "a" / "rules.md", "widget")
    hypa("ingest", str(a), "-c", "X")
    [(doc_id, (chunks, sha, ingested_at, source, link))] = listed(hypa, "X").items()
    assert link == "-"  # no --source-url, no manifest entry: citations do not link
    assert doc_id == "rules" and int(chunks) >= 1
    assert sha == hashlib.sha256(a.read_bytes()).hexdigest()[:12]
    assert ingested_at[:2] == "20" and source.replace(" ", "").endswith("a/rules.md")
    unknown = hypa("index", "documents", "nope")
    assert unknown.exit_code == 1 and "not in the index" in one_line(unknown.output)


def test_remove_takes_one_document_out_and_names_unknown_ones(hypa, tmp_path):
    hypa("ingest", str(rules(tmp_path / "a" / "rules.md", "widget")), "-c", "X")
    hypa("ingest", str(rules(tmp_path / "b" / "rules.md", "gadget")), "-c", "X")
    wrong = hypa("index", "remove", "X", "rules", "nope")
    assert wrong.exit_code == 1 and "no document 'nope' in 'X'" in one_line(wrong.output)
    assert set(listed(hypa, "X")) == {"rules", "b-rules"}  # nothing removed when one id is wrong
    removed = hypa("index", "remove", "X", "rules")
    assert removed.exit_code == 0 and "removed 'rules'" in one_line(removed.output)
    assert set(listed(hypa, "X")) == {"b-rules"}
    ask = hypa("ask", "What must every widget be before any sale?", "-c", "X", "--json")
    assert "widget" not in json.loads(ask.stdout)["answer"]


def test_as_puts_a_file_under_an_explicit_id_and_says_what_it_replaced(hypa, tmp_path):
    a = rules(tmp_path / "a" / "rules.md", "widget")
    new = rules(tmp_path / "new" / "rules-2027.md", "gadget")
    hypa("ingest", str(a), "-c", "X")
    replaced = hypa("ingest", str(new), "-c", "X", "--as", "rules")
    assert replaced.exit_code == 0
    assert "replaced rules-2027.md as 'rules'" in one_line(replaced.output)
    assert f"'rules' was {a.resolve()}" in one_line(replaced.output)
    assert set(listed(hypa, "X")) == {"rules"}
    bad = hypa("ingest", str(new), "-c", "X", "--as", "no spaces/please")
    assert bad.exit_code == 1 and "document id" in bad.output


def test_the_manifest_corpora_keep_their_document_ids(tmp_path, monkeypatch):
    """`hypa index build` passes the ids the manifest files always had (ll144-rules, euaiact), whatever
    else the collection holds: the knowledge graph, evaluations and stored answers refer to them."""
    from bot.corpus import FetchedFile

    calls = []

    class Recording:
        settings = type("S", (), {"corpus_dir": tmp_path, "corpus_mirror": None})()

    def fake_ingest(components, paths, collection, *, doc_ids=None):
        calls.append((collection, doc_ids))
        return 0

    files = [FetchedFile(tmp_path / "LL144_rules.pdf", "mirror"), FetchedFile(tmp_path / "LL144_Definitions.pdf", "mirror")]
    monkeypatch.setattr("bot.corpus.fetch_corpus", lambda *a, **k: files)
    monkeypatch.setattr(bot.cli, "_ingest", fake_ingest)
    bot.cli._build_corpus_index(Recording(), "ll144")
    assert calls == [("ll144", {files[0].path: "ll144-rules", files[1].path: "ll144-definitions"})]


@pytest.mark.parametrize(
    "holder, expected",
    [
        (None, ("rules", "")),  # a new name
        (("other", "/elsewhere/rules.md"), ("b-rules", "'rules' is another file")),
        (("same", "/elsewhere/rules.md"), ("rules", "same content")),
        (("other", "/gone/rules.md"), ("rules", "moved from /gone/rules.md")),
        (("other", ""), ("rules", "")),  # ingested before sources were recorded
    ],
)
def test_document_key_rules(tmp_path, holder, expected):
    from core.index import DocumentInfo
    from core.ingestion import document_key

    path = rules(tmp_path / "b" / "rules.md", "gadget")
    holder = DocumentInfo("rules", holder[0], 1, source=holder[1]) if holder else None
    existing = [holder] if holder else []
    key = document_key(path, "same", existing, file_exists=lambda source: source != "/gone/rules.md")
    assert key.doc_id == expected[0] and expected[1] in key.note
    if holder is not None and not holder.source:
        assert "did not record its file" in key.note_if_replaced


# --- b) limits, progress, clean-up ---------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_in_one_line_and_leaves_nothing(hypa, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("Section 1. Scope. " + "word " * 300_000, encoding="utf-8")  # 1.5 MB
    result = CliRunner().invoke(app, ["ingest", str(big), "-c", "Y"], env={
        "HYPA_DATA_DIR": str(hypa.data_dir), "HYPA_INGEST_MAX_FILE_MB": "1", "HYPA_INDEX": hypa.backend,
        **({} if hypa.backend == "embedded" else {"WEAVIATE_URL": "http://127.0.0.1:9"}),
    })
    assert result.exit_code == 1
    failed = [line for line in result.output.splitlines() if "big.txt" in line]
    assert len(failed) == 1 and "1.5 MB, over the 1 MB limit (HYPA_INGEST_MAX_FILE_MB)" in failed[0]
    assert not (hypa.data_dir / "index" / "Y").exists()


def test_progress_names_each_stage_with_its_size(hypa, tmp_path):
    doc = rules(tmp_path / "a" / "rules.md", "widget")
    result = hypa("ingest", str(doc), "-c", "X")
    stages = [line for line in result.output.splitlines() if line.startswith("rules.md: ")]
    assert [s.split(":")[1].split("(")[0].strip() for s in stages] == [
        "reading", "chunking", "embedding chunks", "embedding sentences"]
    assert any("embedding chunks (" in s for s in stages)


def test_an_interrupted_first_ingest_leaves_no_collection_folder(hypa, tmp_path, monkeypatch):
    """Ctrl-C while embedding: exit 130 with one line saying what is left, and no `.lock`-only folder."""
    doc = rules(tmp_path / "a" / "rules.md", "widget")

    def interrupted(self, texts, show_progress=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(WordCountingEmbedder, "embed_passages", interrupted)
    result = hypa("ingest", str(doc), "-c", "Z")
    assert result.exit_code == 130
    assert "stopped after 0 of 1 file(s); rules.md was not ingested: the index is as it was before it" in one_line(result.output)
    assert not (hypa.data_dir / "index" / "Z").exists()
    assert "Z" not in hypa("index", "list").output


# --- c) skipped files are named -----------------------------------------------------------------------


def test_a_directory_ingest_names_the_files_it_skips(hypa, tmp_path):
    folder = tmp_path / "docs"
    rules(folder / "rules.md", "widget")
    (folder / "memo.docx").write_bytes(b"PK\x03\x04 word")
    (folder / "scan.jpg").write_bytes(b"\xff\xd8\xff")
    (folder / "LICENSE").write_text("MIT", encoding="utf-8")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref", encoding="utf-8")
    result = hypa("ingest", str(folder), "-c", "X")
    assert result.exit_code == 0
    said = one_line(result.output)
    assert "skipped 3 file(s) of a type hypa cannot read" in said
    assert "LICENSE, memo.docx, scan.jpg" in said
    assert "1 hidden file(s)" in said
    assert set(listed(hypa, "X")) == {"rules"}


def test_select_files_sorts_supported_from_skipped(tmp_path):
    from core.ingestion import FileSelection, select_files

    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("a.md", "sub/b.PDF", "c.docx", "sub/noext", ".hidden.md"):
        (tmp_path / "d" / name).write_text("x", encoding="utf-8")
    single = tmp_path / "single.docx"
    single.write_text("x", encoding="utf-8")
    selection = select_files([tmp_path / "d", single])
    d = tmp_path / "d"
    assert selection == FileSelection([d / "a.md", d / "sub" / "b.PDF", single], [d / "c.docx", d / "sub" / "noext"], 1)


# --- d) a corrupt PDF: one line -----------------------------------------------------------------------


def test_a_corrupt_pdf_is_one_line_without_pypdfs_own(hypa, tmp_path):
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" + b"x" * 2000)
    result = hypa("ingest", str(corrupt), "-c", "X")
    assert result.exit_code == 1
    # Everything but the progress (bar, or one line per stage when the output is not a terminal):
    said = [line for line in result.output.splitlines()
            if line.strip() and "━" not in line and not line.startswith("corrupt.pdf: reading")]
    assert len(said) == 1, said
    assert said[0].startswith(f"failed {corrupt}: corrupt.pdf: cannot read the PDF")
    assert "EOF marker not found" in said[0]  # pypdf's own finding, inside hypa's line


def test_a_corrupt_pdf_prints_one_line_in_a_real_process(tmp_path):
    """Outside pytest no logging handler is configured, so Python itself printed pypdf's warning
    ("EOF marker not found") on a line of its own before hypa's error."""
    import os
    import subprocess
    import sys

    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" + b"x" * 2000)
    env = {**os.environ, "HYPA_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "250"}
    proc = subprocess.run([sys.executable, "-m", "bot", "ingest", str(corrupt), "-c", "X"], env=env,
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    said = [line for line in proc.stderr.splitlines()
            if line.strip() and "━" not in line and not line.startswith("corrupt.pdf: reading")]
    assert len(said) == 1 and said[0].startswith(f"failed {corrupt}"), said


# --- links to the official text (hypa ingest --source-url) -----------------------------------------


def cited_urls(hypa, question: str) -> list[tuple[str, str]]:
    """(label, url) of each citation of `hypa ask --json`."""
    result = hypa("ask", question, "-c", "X", "--json")
    assert result.exit_code == 0, result.output
    citations = json.loads(result.stdout)["citations"]
    assert citations, result.stdout
    return [(c["label"], c["url"]) for c in citations]


def test_source_url_links_the_citations_of_a_document_and_is_kept_changed_or_removed(hypa, tmp_path):
    from core.links import label_values

    a = rules(tmp_path / "a" / "rules.md", "widget")
    added = hypa("ingest", str(a), "-c", "X", "--source-url", "https://example.com/rules#section-{section}")
    assert added.exit_code == 0 and "links to https://example.com/rules#section-{section}" in one_line(added.output)
    assert listed(hypa, "X")["rules"][4] == "https://example.com/rules#section-{section}"
    for label, url in cited_urls(hypa, "What must every widget be before any sale?"):
        assert url == f"https://example.com/rules#section-{label_values(label)['section']}", label

    # The same file again: without --source-url it keeps its link; with another, only the record changes.
    assert "unchanged rules.md" in one_line(hypa("ingest", str(a), "-c", "X").output)
    assert listed(hypa, "X")["rules"][4] == "https://example.com/rules#section-{section}"
    relinked = hypa("ingest", str(a), "-c", "X", "--source-url", "https://example.com/rules.pdf")
    assert "unchanged rules.md as 'rules' (links to https://example.com/rules.pdf)" in one_line(relinked.output)
    assert {url for _, url in cited_urls(hypa, "What must every widget be before any sale?")} == {"https://example.com/rules.pdf"}
    # A changed file keeps the link too; "" removes it.
    rules(a, "doohickey")
    assert "replaced rules.md" in one_line(hypa("ingest", str(a), "-c", "X").output)
    assert listed(hypa, "X")["rules"][4] == "https://example.com/rules.pdf"
    removed = hypa("ingest", str(a), "-c", "X", "--source-url", "")
    assert "link removed" in one_line(removed.output)
    assert {url for _, url in cited_urls(hypa, "What must every doohickey be before any sale?")} == {""}


def test_a_bad_source_url_is_one_line_and_ingests_nothing(hypa, tmp_path):
    a = rules(tmp_path / "a" / "rules.md", "widget")
    bad = hypa("ingest", str(a), "-c", "X", "--source-url", "https://example.com/#{chapter}")
    assert bad.exit_code == 1 and "unknown placeholder {chapter}" in one_line(bad.output)
    bad = hypa("ingest", str(a), "-c", "X", "--source-url", "example.com/rules")
    assert bad.exit_code == 1 and "not an http(s) address" in one_line(bad.output)
    two = hypa("ingest", str(a), str(rules(tmp_path / "b" / "rules.md", "gadget")), "-c", "X",
               "--source-url", "https://example.com/")
    assert two.exit_code == 1 and "--source-url takes exactly one file" in one_line(two.output)
    assert hypa("index", "documents", "X").exit_code == 1  # the collection was never created


def test_manifest_documents_link_from_the_manifest_without_re_ingesting(hypa):
    """An index built before links existed (no source_url recorded) links by bot/corpora.toml."""
    from hypa_testkit.toy import make_chunk

    hypa("index", "list")  # builds Components once
    components = hypa.components[-1]
    chunks = [
        make_chunk("6 RCNY § 5-301(b)", "(b) Where an AEDT is used to screen candidates, a bias audit must "
                   "calculate the selection rate for each category.", collection="ll144", doc_id="ll144-rules"),
        make_chunk("Admin. Code § 20-871(a)", "(a) It shall be unlawful for an employer to use an automated "
                   "employment decision tool unless it has been the subject of a bias audit.",
                   collection="ll144", doc_id="ll144-rules"),
    ]
    components.index.replace_document("ll144", "ll144-rules", "h1", chunks)
    result = hypa("ask", "Is it unlawful to use an automated employment decision tool without a bias audit?",
                  "-c", "ll144", "--json")
    urls = {c["label"]: c["url"] for c in json.loads(result.stdout)["citations"]}
    assert urls.get("Admin. Code § 20-871(a)") == "https://codelibrary.amlegal.com/codes/newyorkcity/latest/NYCadmin/0-0-0-1"
    assert set(urls.values()) <= {
        "https://codelibrary.amlegal.com/codes/newyorkcity/latest/NYCadmin/0-0-0-1",
        "https://rules.cityofnewyork.us/rule/automated-employment-decision-tools-updated/",
    }
    assert "(bot/corpora.toml)" in one_line(hypa("index", "documents", "ll144").output)
