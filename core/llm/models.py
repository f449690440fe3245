"""The Claude models hypa uses by default, named once (HYPA_ANSWER_MODEL and HYPA_FAST_MODEL
override them): a strong model writes answers, a fast one rewrites questions and extracts triplets."""

# Chosen from the model ids the installed SDK lists (anthropic/types/model_param.py): the current
# Sonnet for answers, the current Haiku for rewriting and extraction.

DEFAULT_ANSWER_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"
