"""A ClaudeClient pointed at the fake Anthropic server, with short timeouts and backoffs for tests."""
from __future__ import annotations

from core.llm.client import ClaudeClient, ClientConfig, RetryPolicy
from hypa_testkit.fakes.anthropic_server import FakeAnthropic


def make_client(fake: FakeAnthropic, **overrides) -> ClaudeClient:
    retry = overrides.pop("retry", RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05, max_retry_after_s=2.0))
    config = ClientConfig(
        api_key="test-key",
        base_url=fake.base_url,
        timeout_s=overrides.pop("timeout_s", 2.0),
        total_budget_s=overrides.pop("total_budget_s", 5.0),
        retry=retry,
        circuit_failure_threshold=overrides.pop("circuit_failure_threshold", 5),
        circuit_reset_s=overrides.pop("circuit_reset_s", 30.0),
    )
    return ClaudeClient(config, **overrides)
