"""The prompt files (`*.md`), shipped inside the package so an installed hypa finds them (core/llm/prompts.py)."""
