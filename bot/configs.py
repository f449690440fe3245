"""Each component's typed config, built from the one Settings.

bot/wiring.py (the composition root) builds the components with these, and `hypa serve` the chat
adapters (bot/serve_chat.py); core/, storage/ and adapters/ never see Settings. Imports of the LLM
modules and the chat platforms' libraries stay inside the functions: the anthropic SDK takes ~2 s to
import and is loaded only when ANTHROPIC_API_KEY is set.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from bot.http_app import HttpConfig
from bot.settings import Settings
from core.complexity import ClassifierConfig
from storage.kg_store import KGLoadLimits

if TYPE_CHECKING:
    from adapters.slack import SlackConfig
    from adapters.telegram import TelegramConfig
    from core.kg.llm import LLMExtractorConfig
    from core.llm.claude_generator import ClaudeGeneratorConfig
    from core.llm.client import ClientConfig
    from core.llm.rewriter import LLMRewriterConfig
    from storage.weaviate_index import WeaviateConfig


def llm_client_config(s: Settings, *, timeout_s: float | None = None, total_budget_s: float | None = None) -> ClientConfig:
    """The Claude client's connection, retries and circuit breaker (HYPA_LLM_*, HYPA_CIRCUIT_*);
    `timeout_s` / `total_budget_s` replace the per-attempt timeout and the total budget."""
    from core.llm.client import ClientConfig, RetryPolicy

    return ClientConfig(
        api_key=s.anthropic_api_key,
        base_url=s.anthropic_base_url or None,
        timeout_s=timeout_s if timeout_s is not None else s.llm_timeout_s,
        total_budget_s=total_budget_s if total_budget_s is not None else s.llm_total_budget_s,
        retry=RetryPolicy(
            max_retries=s.llm_max_retries,
            base_delay_s=s.llm_backoff_base_s,
            max_delay_s=s.llm_backoff_max_s,
            max_retry_after_s=s.llm_max_retry_after_s,
        ),
        circuit_failure_threshold=s.circuit_failure_threshold,
        circuit_reset_s=s.circuit_reset_s,
    )


def rewriter_client_config(s: Settings) -> ClientConfig:
    """The rewriter's client: HYPA_REWRITE_TIMEOUT_S / HYPA_REWRITE_TOTAL_BUDGET_S, else the LLM ones."""
    return llm_client_config(s, timeout_s=s.rewrite_timeout_s, total_budget_s=s.rewrite_total_budget_s)


def answer_config(s: Settings) -> ClaudeGeneratorConfig:
    from core.llm.claude_generator import ClaudeGeneratorConfig

    return ClaudeGeneratorConfig(
        model=s.answer_model,
        max_tokens=s.answer_max_tokens,
        temperature=s.llm_temperature,
        effort=s.answer_effort,
        history_turns=s.llm_history_turns,
    )


def rewriter_config(s: Settings) -> LLMRewriterConfig:
    from core.llm.rewriter import LLMRewriterConfig

    return LLMRewriterConfig(
        model=s.fast_model,
        max_tokens=s.rewrite_max_tokens,
        temperature=s.llm_temperature,
        effort=s.rewrite_effort or None,
        history_turns=s.llm_history_turns,
    )


def kg_extractor_config(s: Settings) -> LLMExtractorConfig:
    from core.kg.llm import LLMExtractorConfig

    return LLMExtractorConfig(model=s.fast_model, temperature=s.llm_temperature)


def kg_load_limits(s: Settings) -> KGLoadLimits:
    """HYPA_KG_MAX_FILE_MB, HYPA_KG_LOAD_TIMEOUT_S."""
    return KGLoadLimits(max_bytes=s.kg_max_file_mb * 1024 * 1024, max_seconds=s.kg_load_timeout_s)


def weaviate_config(s: Settings) -> WeaviateConfig:
    """WEAVIATE_URL, WEAVIATE_GRPC_PORT, WEAVIATE_API_KEY, HYPA_WEAVIATE_COLLECTION, HYPA_WEAVIATE_MULTI_TENANCY."""
    from storage.weaviate_index import WeaviateConfig  # weaviate-client only when chosen

    return WeaviateConfig(
        url=s.weaviate_url,
        grpc_port=s.weaviate_grpc_port,
        api_key=s.weaviate_api_key,
        class_name=s.weaviate_collection,
        multi_tenancy=s.weaviate_multi_tenancy,
    )


def classifier_config(s: Settings) -> ClassifierConfig:
    """Where the complexity classifiers live and what trains them (HYPA_CLASSIFIER_*)."""
    return ClassifierConfig(data_dir=s.data_dir, train_csv=s.classifier_train_csv, kind=s.classifier_kind)


# --- `hypa serve`: the HTTP listener and the chat platforms (bot/serve_chat.py) -----------------


def http_config(s: Settings) -> HttpConfig:
    """HYPA_HTTP_HOST, HYPA_HTTP_PORT, HYPA_LOG_LEVEL, HYPA_HTTP_MAX_BODY_BYTES."""
    return HttpConfig(host=s.http_host, port=s.http_port, log_level=s.log_level, max_body_bytes=s.http_max_body_bytes)


def slack_config(s: Settings) -> SlackConfig:
    """SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN (set: Socket Mode), SLACK_API_BASE_URL,
    HYPA_SLACK_COMMAND, HYPA_REVIEW_CHANNEL."""
    from adapters.slack import SlackConfig  # slack-bolt only for `hypa serve slack`

    return SlackConfig(
        bot_token=s.slack_bot_token,
        signing_secret=s.slack_signing_secret,
        app_token=s.slack_app_token,
        api_base_url=s.slack_api_base_url,
        command=s.slack_command,
        review_channel=s.review_channel,
    )


def telegram_config(s: Settings) -> TelegramConfig:
    """TELEGRAM_BOT_TOKEN, TELEGRAM_API_BASE_URL, TELEGRAM_WEBHOOK_URL (set: webhook mode),
    TELEGRAM_WEBHOOK_SECRET, HYPA_TELEGRAM_REVIEW_CHAT."""
    from adapters.telegram import TelegramConfig  # python-telegram-bot only for `hypa serve telegram`

    return TelegramConfig(
        token=s.telegram_bot_token.strip(),
        base_url=s.telegram_api_base_url,
        webhook_url=s.telegram_webhook_url,
        webhook_secret=s.telegram_webhook_secret.strip(),
        review_chat=s.telegram_review_chat.strip(),
    )
