"""The corpus manifest (bot/corpora.toml) and `hypa corpus fetch`: get official files, verify sha256."""
from __future__ import annotations

import hashlib
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import BaseModel, Field, field_validator

from core.errors import LinkPatternError
from core.ingestion import doc_id_for
from core.links import DocumentLinks, LinkRule, check_pattern

MANIFEST_PATH = Path(__file__).with_name("corpora.toml")


class CorpusError(Exception):
    """A corpus could not be provided; the message says what to do."""


class LinkPattern(BaseModel):
    """Where citations of a file point (core/links.py): a URL pattern, for labels containing a text."""

    url: str
    label_contains: str = ""

    @field_validator("url")
    @classmethod
    def _usable(cls, url: str) -> str:
        try:
            return check_pattern(url)
        except LinkPatternError as exc:
            raise ValueError(str(exc)) from None


class CorpusFile(BaseModel):
    name: str
    mirror_path: str
    sha256: str
    description: str
    publisher: str
    url: str
    source_page: str
    # Link rules for its citations, tried in order; the file's document id is its name's (doc_id_for).
    links: list[LinkPattern] = Field(default_factory=list)

    @property
    def doc_id(self) -> str:
        return doc_id_for(Path(self.name))

    def document_links(self) -> DocumentLinks | None:
        if not self.links:
            return None
        return DocumentLinks(tuple(LinkRule(p.url, p.label_contains) for p in self.links))


class Corpus(BaseModel):
    title: str
    collection: str
    files: list[CorpusFile]
    # Word-piece budget for the provisions an answer from this collection reads (the default config);
    # None = HYPA_MAX_CONTEXT_TOKENS. A large act whose provisions are short needs more of them.
    context_tokens: int | None = Field(default=None, ge=1)
    # Users' words for what the law names otherwise (core/glossary.py): a TOML file, relative to
    # this manifest.
    glossary: str | None = None

    # Questions whose answering provisions are known (core/precedents.py): a JSON Lines file,
    # relative to this manifest.
    precedents: str | None = None

    def glossary_path(self, manifest_path: Path = MANIFEST_PATH) -> Path | None:
        return None if not self.glossary else manifest_path.parent / self.glossary

    def precedents_path(self, manifest_path: Path = MANIFEST_PATH) -> Path | None:
        return None if not self.precedents else manifest_path.parent / self.precedents


class Manifest(BaseModel):
    corpora: dict[str, Corpus]

    def get(self, name: str) -> Corpus:
        try:
            return self.corpora[name]
        except KeyError:
            known = ", ".join(sorted(self.corpora))
            raise CorpusError(f"unknown corpus {name!r}; known corpora: {known}") from None


def load_manifest(path: Path = MANIFEST_PATH) -> Manifest:
    with path.open("rb") as fh:
        return Manifest.model_validate(tomllib.load(fh))


def manifest_links(manifest: Manifest) -> dict[str, dict[str, DocumentLinks]]:
    """{collection: {doc_id: links}} of the manifest files that have link rules. Derived when an
    answer is made (not stored in the index), so an index built before links existed has them too."""
    out: dict[str, dict[str, DocumentLinks]] = {}
    for corpus in manifest.corpora.values():
        for f in corpus.files:
            links = f.document_links()
            if links is not None:
                out.setdefault(corpus.collection, {})[f.doc_id] = links
    return out


def sha256_of(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@dataclass(frozen=True)
class FetchedFile:
    path: Path
    origin: str  # "cached", "mirror" or "download"


def fetch_corpus(
    name: str,
    dest_root: Path,
    mirror: Path | None,
    manifest: Manifest | None = None,
    *,
    allow_download: bool = True,
    timeout_s: float = 60.0,
) -> list[FetchedFile]:
    """Place every file of corpus `name` under dest_root/name/, verified against the manifest hash.

    Order: an already verified local copy, then the mirror directory, then the official URL.
    """
    corpus = (manifest or load_manifest()).get(name)
    dest_dir = dest_root / name
    dest_dir.mkdir(parents=True, exist_ok=True)
    return [
        _fetch_file(f, dest_dir / f.name, mirror, allow_download=allow_download, timeout_s=timeout_s)
        for f in corpus.files
    ]


def _fetch_file(
    f: CorpusFile, dest: Path, mirror: Path | None, *, allow_download: bool, timeout_s: float
) -> FetchedFile:
    if dest.exists() and sha256_of(dest) == f.sha256:
        return FetchedFile(dest, "cached")
    problems: list[str] = []
    if mirror is not None:
        source = mirror / f.mirror_path
        if source.is_file():
            actual = sha256_of(source)
            if actual == f.sha256:
                _atomic_copy(source, dest)
                return FetchedFile(dest, "mirror")
            problems.append(f"mirror copy {source} has sha256 {actual}, expected {f.sha256}")
        else:
            problems.append(f"not in mirror {mirror}")
    if allow_download:
        try:
            _download(f.url, dest, f.sha256, timeout_s)
            return FetchedFile(dest, "download")
        except CorpusError as exc:
            problems.append(str(exc))
    raise CorpusError(
        f"could not get {f.name} ({f.description}): " + "; ".join(problems)
        + f". Download it from {f.source_page} and place it at <HYPA_CORPUS_MIRROR>/{f.mirror_path}."
    )


def _atomic_copy(source: Path, dest: Path) -> None:
    tmp = dest.with_suffix(dest.suffix + ".part")
    shutil.copyfile(source, tmp)
    tmp.replace(dest)


def _download(url: str, dest: Path, expected_sha256: str, timeout_s: float) -> None:
    tmp = dest.with_suffix(dest.suffix + ".part")
    digest = hashlib.sha256()
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=timeout_s) as resp:
            if resp.status_code != 200:
                raise CorpusError(f"download from {url} answered HTTP {resp.status_code}")
            with tmp.open("wb") as out:
                for block in resp.iter_bytes():
                    digest.update(block)
                    out.write(block)
    except httpx.HTTPError as exc:
        tmp.unlink(missing_ok=True)
        raise CorpusError(f"download from {url} failed: {exc.__class__.__name__}: {exc}") from exc
    if digest.hexdigest() != expected_sha256:
        tmp.unlink(missing_ok=True)
        raise CorpusError(
            f"download from {url} has sha256 {digest.hexdigest()}, expected {expected_sha256} "
            "(the publisher may have re-issued the file, or the URL serves a web page)"
        )
    tmp.replace(dest)
