"""Names of countries, US states and languages, for telling a place or a language typed in lower case
("do we need the notice in spanish?", "we also hire in illinois") from an ordinary word.

The extractive generator declines a question that asks about a name the loaded regulations never use;
a capitalised word shows it is a name, a lower-case one does not, unless it is one of these. Taken from
pycountry's ISO 3166 (countries, US subdivisions) and ISO 639-1 (languages) tables.
"""
from __future__ import annotations

from functools import lru_cache

# Names that are also everyday English words: never read as a place or a language.
_EVERYDAY = frozenset(
    "chad china guinea jersey jordan niger turkey georgia congo guernsey man malta panama peru "
    "avaric ewe herero ido interlingua kirghiz lao limburgan manx ndonga pali sango swati tonga twi "
    "volapük walloon washington".split()
)


@lru_cache(maxsize=1)
def place_and_language_names() -> frozenset[str]:
    """Lower-cased one-word names of countries, US states and languages."""
    import pycountry  # imported here: the table loads only when a question needs it

    names: set[str] = set()
    for country in pycountry.countries:
        names.add(getattr(country, "common_name", country.name))
        names.add(country.name)
    names.update(s.name for s in pycountry.subdivisions.get(country_code="US"))
    for language in pycountry.languages:
        if hasattr(language, "alpha_2"):
            names.update(part.strip() for part in language.name.split(";"))
    return frozenset(n.lower() for n in names if n.isalpha() and n.lower() not in _EVERYDAY)
