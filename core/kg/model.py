"""The knowledge graph's data: typed triplets with provenance, entities, and their plain-data form.

A `Triplet` is (subject, predicate, object) plus the chunk id and citation label it came from.
Subjects are entity keys (core/kg/normalize.entity_key); an object is an entity key when
`object_is_entity`, otherwise literal text (a definition, an obligation, a deadline, an amount).

`KGData.to_plain()` gives only tuples, lists, dicts, str, int, float, bool and None: that is all
storage/kg_store.py writes and all its loader accepts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from core.errors import KGFormatError

EntityKind = Literal["term", "entity", "provision", "document"]
FORMAT = "hypa-kg"
FORMAT_VERSION = 1

# Predicates (what the offline extractor writes; the LLM extractor maps its types onto these).
MEANS = "means"
EXCLUDES = "does not include"
DEFINED_BY = "defined by"
ALIAS_OF = "also called"
MUST = "must"
MUST_NOT = "must not"
MAY = "may"
LIABLE = "is liable for"
CONDITION = "condition"
DEADLINE = "deadline"
PENALTY = "penalty"
AMOUNT = "amount"
REFERS_TO = "refers to"
PART_OF = "part of"
USES_TERM = "uses term"
DEFINED_IN = "defined in"
TITLED = "titled"
# Edges that connect the graph but say little on their own: walked, never shown as facts.
STRUCTURAL = frozenset({PART_OF, USES_TERM, DEFINED_IN})


@dataclass(frozen=True)
class Triplet:
    subject: str
    predicate: str
    object: str
    chunk_id: str
    label: str
    object_is_entity: bool = False

    def to_plain(self) -> tuple:
        return (self.subject, self.predicate, self.object, self.chunk_id, self.label, self.object_is_entity)

    @classmethod
    def from_plain(cls, row: Any) -> Triplet:
        if not isinstance(row, (tuple, list)) or len(row) != 6:
            raise KGFormatError(f"a triplet must be a 6-tuple, got {type(row).__name__} of length {_len(row)}")
        s, p, o, cid, label, is_entity = row
        if not all(isinstance(v, str) for v in (s, p, o, cid, label)) or not isinstance(is_entity, bool):
            raise KGFormatError(f"triplet fields have wrong types: {row!r:.200}")
        return cls(s, p, o, cid, label, is_entity)


@dataclass
class Definition:
    text: str
    label: str
    chunk_id: str


@dataclass
class Entity:
    key: str
    name: str  # display name, as first written
    kind: EntityKind
    aliases: list[str] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)

    def to_plain(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "aliases": list(self.aliases),
            "definitions": [(d.text, d.label, d.chunk_id) for d in self.definitions],
        }

    @classmethod
    def from_plain(cls, key: str, row: Any) -> Entity:
        if not isinstance(row, dict):
            raise KGFormatError(f"entity {key!r} must be a dict, got {type(row).__name__}")
        try:
            definitions = [Definition(str(t), str(lab), str(cid)) for t, lab, cid in row.get("definitions", [])]
            return cls(
                key=key,
                name=str(row["name"]),
                kind=row["kind"],
                aliases=[str(a) for a in row.get("aliases", [])],
                definitions=definitions,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise KGFormatError(f"entity {key!r} is malformed: {exc}") from None


@dataclass
class KGData:
    """Everything stored for one collection's graph."""

    collection: str
    extractor: str  # "offline", or "offline+llm:<model>"
    source_version: dict[str, str]  # the index's {doc_id: content_hash} the graph was built from
    entities: dict[str, Entity]
    triplets: list[Triplet]

    def to_plain(self) -> dict:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "collection": self.collection,
            "extractor": self.extractor,
            "source_version": dict(self.source_version),
            "entities": {k: e.to_plain() for k, e in self.entities.items()},
            "triplets": [t.to_plain() for t in self.triplets],
        }

    @classmethod
    def from_plain(cls, data: Any) -> KGData:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise KGFormatError("not a hypa knowledge-graph file (no 'format': 'hypa-kg' key)")
        if data.get("version") != FORMAT_VERSION:
            raise KGFormatError(
                f"knowledge-graph format version {data.get('version')!r} is not supported "
                f"(expected {FORMAT_VERSION}); rebuild it with `hypa kg build`"
            )
        entities = data.get("entities")
        triplets = data.get("triplets")
        version = data.get("source_version")
        if not isinstance(entities, dict) or not isinstance(triplets, list) or not isinstance(version, dict):
            raise KGFormatError("knowledge-graph file lacks entities (dict), triplets (list) or source_version (dict)")
        return cls(
            collection=str(data.get("collection", "")),
            extractor=str(data.get("extractor", "")),
            source_version={str(k): str(v) for k, v in version.items()},
            entities={str(k): Entity.from_plain(str(k), v) for k, v in entities.items()},
            triplets=[Triplet.from_plain(t) for t in triplets],
        )


def _len(value: Any) -> int | str:
    try:
        return len(value)
    except TypeError:
        return "n/a"
