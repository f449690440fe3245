"""LLM stages (Claude via the `anthropic` SDK): cited answers, with failure handling and a fallback.

Modules: `client` (retries, circuit breaker, FallbackGenerator), `claude_generator` (cited answers),
`prompts` (versioned prompt files), `cost` (price table). See docs/LLM.md.
"""
