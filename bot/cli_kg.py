"""`hypa kg build|stats|show`: the knowledge graph of triplets extracted from the regulations."""
from __future__ import annotations

from collections import Counter

import typer
from rich.table import Table

from bot.cli_common import command_group, err, fail, load_settings, out

kg_app = command_group(help="Build and inspect the knowledge graph.", no_args_is_help=True)

COLLECTION_HELP = "Collection [default: HYPA_COLLECTION]."


def _components():
    from bot.wiring import Components

    return Components(load_settings())


def _load(components, collection: str):
    """(KGData, graph) of a collection, or a clear error."""
    from core.errors import KGFormatError, UnsafeKGFile
    from core.kg.graph import build_graph

    try:
        data = components.kg_store.load(collection)
    except (UnsafeKGFile, KGFormatError) as exc:
        fail(f"{exc}\nRebuild it with `hypa kg build --collection {collection}`.")
    except ValueError as exc:  # a collection name that cannot be a file name
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read the knowledge graph of '{collection}': {exc}")
    if data is None:
        fail(f"no knowledge graph for '{collection}' yet; run `hypa kg build --collection {collection}`")
    return data, build_graph(data)


@kg_app.command("build")
def kg_build(
    collection: str | None = typer.Option(None, "--collection", "-c", help=COLLECTION_HELP),
) -> None:
    """Extract the collection's triplets from the index (offline, or with Claude when
    HYPA_KG_EXTRACTOR=llm and ANTHROPIC_API_KEY are set) and save them."""
    from core.kg.build import build_collection

    components = _components()
    collection = collection or components.settings.collection
    if components.settings.kg_extractor == "llm" and not components.settings.anthropic_api_key:
        err.print("[yellow]HYPA_KG_EXTRACTOR=llm needs ANTHROPIC_API_KEY; using the offline extractor[/]")
    if collection not in components.index.collections():
        fail(f"collection '{collection}' is not in the index; ingest it first (`hypa ingest FILES --collection {collection}`)")
    extractor = components.triplet_extractor()
    try:
        data = build_collection(components.index, components.kg_store, collection, extractor)
    except OSError as exc:
        fail(f"cannot save the knowledge graph of '{collection}': {exc}")
    out.print(
        f"[green]built[/] {components.kg_store.path(collection)}: {len(data.entities)} entities, "
        f"{len(data.triplets)} triplets ({data.extractor})"
    )


@kg_app.command("stats")
def kg_stats(
    collection: str | None = typer.Option(None, "--collection", "-c", help=COLLECTION_HELP),
) -> None:
    """Counts of entities by kind and triplets by predicate."""
    components = _components()
    collection = collection or components.settings.collection
    data, graph = _load(components, collection)
    out.print(
        f"'{collection}': {graph.number_of_nodes()} nodes, {graph.number_of_edges()} edges "
        f"(extractor {data.extractor}, {len(data.source_version)} documents)"
    )
    table = Table("entity kind", "count")
    for kind, n in Counter(e.kind for e in data.entities.values()).most_common():
        table.add_row(kind, str(n))
    out.print(table)
    table = Table("predicate", "triplets")
    for predicate, n in Counter(t.predicate for t in data.triplets).most_common():
        table.add_row(predicate, str(n))
    out.print(table)


@kg_app.command("show")
def kg_show(
    entity: str = typer.Argument(..., help="An entity name, abbreviation or provision (e.g. AEDT, '§ 5-301')."),
    collection: str | None = typer.Option(None, "--collection", "-c", help=COLLECTION_HELP),
    limit: int = typer.Option(40, "--limit", min=1, help="Facts to list in each direction."),
) -> None:
    """An entity's definitions and the facts around it, with their citation labels."""
    from core.kg.graph import describe
    from core.kg.normalize import entity_key
    from core.kg.provisions import find_references

    components = _components()
    collection = collection or components.settings.collection
    data, graph = _load(components, collection)
    key = _resolve(entity, data, graph, entity_key, find_references)
    if key is None:
        from rapidfuzz import process

        names = {k: graph.nodes[k].get("name", k) for k in graph.nodes if graph.nodes[k].get("kind") != "value"}
        close = process.extract(entity, names, limit=5)
        hint = ", ".join(repr(names[k]) for _, _, k in close)
        fail(f"no entity {entity!r} in '{collection}'" + (f"; closest: {hint}" if hint else ""))
    info = describe(graph, key)
    out.print(f"[bold]{info.get('name', key)}[/] ({info.get('kind')}, key {key!r})")
    if info.get("aliases"):
        out.print("also called: " + ", ".join(info["aliases"]))
    shown: set[tuple[str, str]] = set()
    for text, label, _ in info.get("definitions", []):
        if (text, label) not in shown:  # the law as enacted and as codified say the same thing
            shown.add((text, label))
            out.print(f"[cyan]definition[/] [{label}]: {text}")
    table = Table("predicate", "object", "source")
    for predicate, obj, label in info["out"][:limit]:
        table.add_row(predicate, obj, label)
    if info["out"]:
        out.print(table)
    table = Table("subject", "predicate", "source")
    for subject, predicate, label in info["in"][:limit]:
        table.add_row(subject, predicate, label)
    if info["in"]:
        out.print(table)


def _resolve(name, data, graph, entity_key, find_references):
    if name in graph and graph.nodes[name].get("kind") != "value":
        return name
    key = entity_key(name)
    if key in graph:
        return key
    for entity in data.entities.values():
        if any(entity_key(a) == key for a in entity.aliases):
            return entity.key
    for ref in find_references(name):
        if ref.key in graph:
            return ref.key
    return None
