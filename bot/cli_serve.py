"""`hypa serve slack|telegram`: run a chat bot (plus /healthz, /readyz, /metrics on HYPA_HTTP_PORT)."""
from __future__ import annotations

import typer

serve_app = typer.Typer(help="Run the bot on a chat platform.", no_args_is_help=True)
