"""What part a chunk plays in its regulation: the rule itself, a definition, a worked example, or text
that explains the rules without being one (recitals, a statement of basis and purpose, a preamble).

A question "what must / who / how much / when" is answered by operative text; a recital or a notice's
commentary often says the same words at greater length and outranks the rule in similarity search.
Retrieval weighs roles (core/ranking.py) and the answer leads with operative text.

The role is decided at ingest from the unit's citation label and heading, which the chunker derives from
the document's own structure (core/ingest/chunker.py), and stored with the chunk. Chunks stored before
roles existed get the same answer from `role_of` at read time.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from core.types import Chunk

Role = Literal["operative", "definition", "example", "recital", "commentary", "front"]
ROLES: tuple[Role, ...] = ("operative", "definition", "example", "recital", "commentary", "front")

_RECITAL = re.compile(r"\bRecital \d+|\bpreamble\b", re.I)
_COMMENTARY = re.compile(r"Statement of Basis and Purpose|Notice of Adoption|Explanatory", re.I)
_EXAMPLE = re.compile(r"\bExample\b")
_DEFINITION = re.compile(r"^Definitions?\b", re.I)
# A provision: a section, an article, an annex (of any code or act).
_PROVISION = re.compile(r"§|\bArt\.|\bArticle\b|\bAnnex\b|\bSection\b", re.I)


def chunk_role(label: str, heading: str) -> Role:
    """The role of a unit with this citation label and heading."""
    if _RECITAL.search(label):
        return "recital"
    if _COMMENTARY.search(label) and "§" not in label.split("Notice of Adoption")[-1]:
        return "commentary"
    if _EXAMPLE.search(label) or _EXAMPLE.search(heading):
        return "example"
    if _DEFINITION.search(heading):
        return "definition"
    if _PROVISION.search(label):
        return "operative"
    return "front"


def role_of(chunk: "Chunk") -> Role:
    """The chunk's stored role, or (for chunks stored before roles existed) the one its label implies."""
    return chunk.role if chunk.role in ROLES else chunk_role(chunk.label, chunk.heading)
