"""`hypa kg build|stats|show`: the knowledge graph of triplets extracted from the regulations."""
from __future__ import annotations

import typer

kg_app = typer.Typer(help="Build and inspect the knowledge graph.", no_args_is_help=True)
