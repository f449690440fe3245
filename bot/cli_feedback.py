"""`hypa feedback report|export`: what people asked and how they rated the answers."""
from __future__ import annotations

import typer

feedback_app = typer.Typer(help="Review 👍/👎 feedback: reports and exports for test cases.", no_args_is_help=True)
