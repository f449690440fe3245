"""Test doubles shared across tests (e.g. a fake Anthropic API server)."""
