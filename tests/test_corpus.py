"""Corpus manifest and fetching: mirror copy, hash verification, download from a local HTTP server."""
from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from bot.corpus import CorpusError, Manifest, fetch_corpus, load_manifest


def _manifest(sha: str, url: str) -> Manifest:
    return Manifest.model_validate(
        {
            "corpora": {
                "toy": {
                    "title": "Toy regulation",
                    "collection": "toy",
                    "files": [
                        {
                            "name": "toy.txt",
                            "mirror_path": "toy/toy.txt",
                            "sha256": sha,
                            "description": "a toy",
                            "publisher": "nobody",
                            "url": url,
                            "source_page": url,
                        }
                    ],
                }
            }
        }
    )


CONTENT = b"Section 1. Scope. This toy regulation applies to toys.\n"
SHA = hashlib.sha256(CONTENT).hexdigest()


def test_shipped_manifest_names_sources_and_hashes():
    manifest = load_manifest()
    assert {"ll144", "eu-ai-act"} <= set(manifest.corpora)
    assert [f.name for f in manifest.get("ll144").files] == ["LL144_rules.pdf", "LL144_Definitions.pdf"]
    for corpus in manifest.corpora.values():
        for f in corpus.files:
            assert f.url.startswith("https://") and len(f.sha256) == 64


def test_unknown_corpus_lists_known_ones():
    with pytest.raises(CorpusError, match="known corpora: eu-ai-act, ll144"):
        load_manifest().get("gdpr")


def test_fetch_copies_from_mirror_and_then_uses_cache(tmp_path: Path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "toy.txt").write_bytes(CONTENT)
    manifest = _manifest(SHA, "http://127.0.0.1:9/unused")
    first = fetch_corpus("toy", tmp_path / "out", mirror, manifest, allow_download=False)
    assert first[0].origin == "mirror" and first[0].path.read_bytes() == CONTENT
    again = fetch_corpus("toy", tmp_path / "out", mirror, manifest, allow_download=False)
    assert again[0].origin == "cached"


def test_fetch_refuses_mirror_file_with_wrong_hash(tmp_path: Path):
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "toy.txt").write_bytes(b"tampered")
    with pytest.raises(CorpusError, match="expected " + SHA):
        fetch_corpus("toy", tmp_path / "out", mirror, _manifest(SHA, "http://x/"), allow_download=False)
    assert not (tmp_path / "out" / "toy" / "toy.txt").exists()


@pytest.fixture()
def file_server(tmp_path: Path):
    served = tmp_path / "served"
    served.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(served), **kw)

        def log_message(self, *a):  # keep test output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_fetch_downloads_and_verifies(tmp_path: Path, file_server):
    served, base = file_server
    (served / "toy.txt").write_bytes(CONTENT)
    got = fetch_corpus("toy", tmp_path / "out", None, _manifest(SHA, f"{base}/toy.txt"))
    assert got[0].origin == "download" and got[0].path.read_bytes() == CONTENT


def test_download_with_wrong_hash_is_refused_and_not_kept(tmp_path: Path, file_server):
    served, base = file_server
    (served / "toy.txt").write_bytes(b"re-issued by the publisher")
    with pytest.raises(CorpusError, match="re-issued"):
        fetch_corpus("toy", tmp_path / "out", None, _manifest(SHA, f"{base}/toy.txt"))
    assert list((tmp_path / "out" / "toy").iterdir()) == []


def test_dead_download_url_gives_clear_error(tmp_path: Path, file_server):
    _, base = file_server
    with pytest.raises(CorpusError, match="HTTP 404"):
        fetch_corpus("toy", tmp_path / "out", None, _manifest(SHA, f"{base}/missing.txt"))
