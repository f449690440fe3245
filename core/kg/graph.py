"""KGData -> networkx MultiDiGraph: entities are nodes, each triplet an edge (literal objects become leaf nodes).

Node attributes: `name`, `kind` ("term" | "entity" | "provision" | "document" | "value"), and for
terms `aliases` and `definitions`. Edge attributes: `predicate`, `chunk_id`, `label`, `fact` (the
index of the triplet in KGData.triplets).
"""
from __future__ import annotations

import networkx as nx

from core.kg.model import KGData

VALUE_PREFIX = "value:"


def build_graph(data: KGData) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph(collection=data.collection, extractor=data.extractor)
    for key, entity in data.entities.items():
        graph.add_node(
            key,
            name=entity.name,
            kind=entity.kind,
            aliases=list(entity.aliases),
            definitions=[(d.text, d.label, d.chunk_id) for d in entity.definitions],
        )
    values: dict[str, str] = {}
    for i, t in enumerate(data.triplets):
        if t.subject not in graph:
            graph.add_node(t.subject, name=t.subject, kind="entity", aliases=[], definitions=[])
        if t.object_is_entity:
            target = t.object
            if target not in graph:
                graph.add_node(target, name=target, kind="entity", aliases=[], definitions=[])
        else:
            if t.object in values:
                target = values[t.object]
            else:
                target = f"{VALUE_PREFIX}{len(values)}"
                values[t.object] = target
                graph.add_node(target, name=t.object, kind="value")
        graph.add_edge(t.subject, target, predicate=t.predicate, chunk_id=t.chunk_id, label=t.label, fact=i)
    return graph


def describe(graph: nx.MultiDiGraph, key: str) -> dict:
    """What `hypa kg show` prints for one node: attributes, outgoing and incoming facts."""
    node = graph.nodes[key]
    out = [
        (d["predicate"], graph.nodes[v].get("name", v), d["label"])
        for _, v, d in graph.out_edges(key, data=True)
    ]
    incoming = [
        (graph.nodes[u].get("name", u), d["predicate"], d["label"])
        for u, _, d in graph.in_edges(key, data=True)
    ]
    # Overlapping chunks (and a law printed twice) state the same fact more than once: list it once.
    return {"key": key, **dict(node), "out": list(dict.fromkeys(out)), "in": list(dict.fromkeys(incoming))}
