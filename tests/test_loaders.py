"""load_document: text extraction, page offsets, normalisation and clear errors."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from core.errors import DocumentError
from core.ingest.loaders import _rejoin_hyphenated, load_document, normalize_text

CORPUS = Path(os.environ.get("HYPA_CORPUS_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus"))
RULES = CORPUS / "ll144" / "LL144_rules.pdf"
BILL = CORPUS / "ll144" / "LL144_Definitions.pdf"


def _need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"corpus file {path} not found (set HYPA_CORPUS_MIRROR to the shared corpus folder)")
    return path


# --- the LL144 PDFs ----------------------------------------------------------------------------


@pytest.mark.corpus
def test_rules_pdf_pages_and_offsets():
    doc = load_document(_need(RULES))
    assert doc.page_count == 11
    assert doc.page_starts[0] == 0 and doc.page_starts == sorted(doc.page_starts)
    assert doc.title  # "Subchapter 25: Automated Employment Decision Tools"
    assert doc.content_hash == hashlib.sha256(RULES.read_bytes()).hexdigest()
    assert doc.page_at(doc.text.index("§ 20-870")) == 1
    assert doc.page_at(doc.text.index("§ 5-301 Bias Audit")) == 6
    assert doc.page_at(len(doc.text) - 1) == 11
    # Private-use bullets are mapped to a real bullet, page numbers are gone.
    assert "\uf0b7" not in doc.text and "• Define terms;" in doc.text
    assert not any(line.strip().isdigit() for line in doc.text[doc.page_starts[1] :].split("\n")[:2])
    # A number split at a line end after its hyphen is re-joined.
    assert "6 RCNY § 5-249." in doc.text


@pytest.mark.corpus
def test_bill_pdf_drops_running_headers_and_repeated_lines():
    doc = load_document(_need(BILL))
    assert doc.page_count == 4
    assert "powered by Legistar" not in doc.text
    assert "File #: Int 1894-2020" not in doc.text
    # Legistar repeats the last line of each page at the top of the next one.
    assert doc.text.count("audit shall include but not be limited to the testing") == 1
    assert "Legislation Text" in doc.title


# --- errors --------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(DocumentError, match="not found"):
        load_document(tmp_path / "nope.pdf")


def test_unsupported_extension(tmp_path):
    path = tmp_path / "rules.docx"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(DocumentError, match="unsupported file type '.docx'"):
        load_document(path)


def test_corrupt_pdf(tmp_path):
    path = tmp_path / "broken.pdf"
    path.write_bytes(os.urandom(2048))
    with pytest.raises(DocumentError, match="broken.pdf: not a valid PDF"):
        load_document(path)


def test_truncated_pdf_is_a_document_error(tmp_path):
    path = tmp_path / "truncated.pdf"
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nendobj\n" + os.urandom(300))
    with pytest.raises(DocumentError, match="truncated.pdf"):
        load_document(path)


def _blank_pdf(path: Path, password: str | None = None) -> Path:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    if password:
        writer.encrypt(user_password=password, algorithm="RC4-128")
    with path.open("wb") as fh:
        writer.write(fh)
    return path


def test_scanned_pdf_without_text(tmp_path):
    with pytest.raises(DocumentError, match="no extractable text.*scanned"):
        load_document(_blank_pdf(tmp_path / "scan.pdf"))


def test_password_protected_pdf(tmp_path):
    with pytest.raises(DocumentError, match="password-protected"):
        load_document(_blank_pdf(tmp_path / "locked.pdf", password="secret"))


@pytest.mark.parametrize("content", [b"", b"   \n\n\t  "])
def test_empty_text_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match="empty"):
        load_document(path)


def test_text_without_letters(tmp_path):
    path = tmp_path / "dots.md"
    path.write_text("...\n---\n***\n")
    with pytest.raises(DocumentError, match="no extractable text"):
        load_document(path)


def test_binary_with_text_suffix(tmp_path):
    path = tmp_path / "blob.txt"
    path.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(DocumentError, match="binary"):
        load_document(path)


# --- formats and normalisation --------------------------------------------------------------------


def test_plain_text_normalisation_and_form_feed_pages(tmp_path):
    path = tmp_path / "rule.txt"
    path.write_text("Noise Rule\n\n\n\nThe ﬁnal\u00a0rule   applies\u200b.\r\n\x0cSecond page text here.", encoding="utf-8")
    doc = load_document(path)
    assert doc.title == "Noise Rule"
    assert "The final rule applies." in doc.text
    assert "\n\n\n" not in doc.text
    assert doc.page_count == 2
    assert doc.page_at(doc.text.index("Second page")) == 2
    assert doc.text[doc.page_starts[1] :].startswith("Second page")


def test_cp1252_text_is_decoded(tmp_path):
    path = tmp_path / "legacy.txt"
    path.write_bytes("Section 1. Caf\u00e9 rules \u2013 apply to every caf\u00e9.".encode("cp1252"))
    assert "Café rules – apply" in load_document(path).text


def test_markdown_title_and_headings(tmp_path):
    path = tmp_path / "reg.md"
    path.write_text("Intro line\n\n# Widget Regulation\n\n## Section 1. Scope\n\nText.\n\n```\n# not a heading\n```\n")
    doc = load_document(path)
    assert doc.title == "Widget Regulation"
    assert [h.title for h in doc.headings] == ["Widget Regulation", "Section 1. Scope"]
    for h in doc.headings:
        assert doc.text[h.start : h.end].lstrip("# ") == h.title


def test_html_keeps_block_structure(tmp_path):
    path = tmp_path / "reg.html"
    path.write_text(
        "<html><head><title>Gadget Act</title><script>var x = 1;</script></head><body>"
        "<h1>Gadget <em>Act</em></h1><p>First&nbsp;paragraph.</p><p>Second<br>line.</p>"
        "<ul><li>(a) one item</li><li>(b) another item</li></ul><h2>Article 2 – Duties</h2><p>Body.</p>"
        "</body></html>"
    )
    doc = load_document(path)
    assert doc.title == "Gadget Act"
    assert "var x" not in doc.text
    lines = doc.text.split("\n")
    for expected in ("Gadget Act", "First paragraph.", "Second", "line.", "(a) one item", "(b) another item"):
        assert expected in lines
    assert [h.title for h in doc.headings] == ["Gadget Act", "Article 2 – Duties"]
    assert all(doc.text[h.start : h.end] == h.title for h in doc.headings)


def test_hyphenation_decided_by_document_vocabulary():
    pages = ["the regu-\nlation and decision-\nmaking, see regulation and decision-making; § 5-\n249 applies"]
    assert _rejoin_hyphenated(pages) == [
        "the regulation and decision-making, see regulation and decision-making; § 5-249 applies"
    ]


def test_normalize_text_collapses_whitespace():
    assert normalize_text("  a \t b  \n\n\n\n c\ufb01 \u00a0") == "a b\n\ncfi"
