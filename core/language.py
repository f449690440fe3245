"""Which language a question is written in, for the one decision the offline engine needs: English or not.

The offline engine matches the question's words against English legal text; a question in Spanish,
German or French shares none of them, and answering "the law does not address this" would be false.
So a question that is confidently not English is answered with a request to ask in English (with an
API key, the LLM rewriter translates it for search and Claude answers in the asker's language).

py3langid (a maintained numpy port of langid.py, model shipped in the package) names the language.
Its guesses on a few words are unreliable ("Art. 99 fines?" reads as Danish), so a question is called
non-English only when it has several words, the model is confident, and it has almost none of the
English function words every English sentence carries.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

ENGLISH = "en"
# Languages a user of an EU or NYC compliance bot is likely to write in; restricting the model to
# them removes confusions with unrelated languages on short texts.
CANDIDATES = (
    "en", "es", "de", "fr", "it", "nl", "pt", "pl", "sv", "da", "ro", "cs", "fi", "el", "hu", "bg", "sk", "sl", "hr",
    "lt", "lv", "et",
)
NAMES = {
    "es": "Spanish", "de": "German", "fr": "French", "it": "Italian", "nl": "Dutch", "pt": "Portuguese",
    "pl": "Polish", "sv": "Swedish", "da": "Danish", "ro": "Romanian", "cs": "Czech", "fi": "Finnish",
    "el": "Greek", "hu": "Hungarian", "bg": "Bulgarian", "sk": "Slovak", "sl": "Slovenian", "hr": "Croatian",
    "lt": "Lithuanian", "lv": "Latvian", "et": "Estonian",
}
# Words English sentences carry and the candidate languages do not use (so not "a", "in", "is",
# "to", "at", "for", "of", "do", "die", "was", which are also Spanish, Dutch, Polish, Danish, German ...).
_ENGLISH_FUNCTION_WORDS = frozenset(
    """the are were been does did has had could should would shall must might our us my you your they
    their them its this that these those what which who whom whose when where why how if and but not
    with from by about into than then there any some each every it be can""".split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@dataclass(frozen=True)
class LanguageGuess:
    code: str  # ISO 639-1, "en" when English or undecided
    confidence: float

    @property
    def english(self) -> bool:
        return self.code == ENGLISH

    @property
    def name(self) -> str:
        return "English" if self.english else NAMES.get(self.code, self.code)


class LanguageDetector:
    """Thread-safe; loads the model (~0.5 s) on first use."""

    def __init__(self, min_words: int = 4, min_confidence: float = 0.9, max_english_share: float = 0.1) -> None:
        self.min_words = min_words
        self.min_confidence = min_confidence
        self.max_english_share = max_english_share
        self._identifier = None
        self._lock = threading.Lock()

    def detect(self, text: str) -> LanguageGuess:
        words = [w.lower() for w in _WORD.findall(text)]
        if len(words) < self.min_words:
            return LanguageGuess(ENGLISH, 0.0)
        english_share = sum(w in _ENGLISH_FUNCTION_WORDS for w in words) / len(words)
        if english_share > self.max_english_share:
            return LanguageGuess(ENGLISH, 1.0 - english_share)
        code, confidence = self._model().classify(text)
        if code == ENGLISH or confidence < self.min_confidence:
            return LanguageGuess(ENGLISH, float(confidence))
        return LanguageGuess(str(code), float(confidence))

    def warm_up(self) -> None:
        """Load the model now rather than on the first question that needs it."""
        self._model()

    def _model(self):  # -> py3langid.langid.LanguageIdentifier
        with self._lock:
            if self._identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                identifier.set_languages(list(CANDIDATES))
                self._identifier = identifier
            return self._identifier
