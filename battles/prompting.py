"""Prompt handling: validation, normalisation and hashing, and a small deterministic classifier.

Pure Python, no Django, no downloads. The classifier is a transparent heuristic (keyword and regex
scores, stopword counts, Unicode script counts), not a trained model: it is there so the
leaderboard can be cut by category and language reproducibly, and it will mislabel prompts that a
person would find easy. Its output for a given text never changes between runs or machines, which
matters more here than accuracy, because category and language are stored in the vote log.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "CATEGORIES",
    "LANGUAGES",
    "PROMPT_MAX_CHARS",
    "UNDETERMINED_LANGUAGE",
    "prompt_classify",
    "prompt_hash",
    "prompt_normalise",
    "prompt_validate",
]

PROMPT_MAX_CHARS = 8000

# Order is the tie-break order: on equal scores the earlier category wins. "other" is last and is
# chosen only when no other category scores at all.
CATEGORIES: tuple[str, ...] = ("coding", "math", "writing", "knowledge", "reasoning", "advice", "other")
LANGUAGES: tuple[str, ...] = ("en", "de", "fr", "es", "it", "pt", "nl", "zh", "ja", "ko", "ru", "ar")
UNDETERMINED_LANGUAGE = "und"  # ISO 639-2 code for "undetermined"


# ---------------------------------------------------------------------------------------------------
# Validation, normalisation, hashing


def prompt_validate(text: str) -> str:
    """Return ``text`` stripped of surrounding whitespace, or raise ``ValueError`` saying why not.

    Rejected: a non-string, text that is empty or only whitespace, text longer than
    ``PROMPT_MAX_CHARS`` characters (counted after stripping, in Unicode code points), and text
    containing a NUL character (PostgreSQL text columns cannot store it).
    """
    if not isinstance(text, str):
        raise ValueError(f"Prompt must be text, not {type(text).__name__}.")
    stripped = text.strip()
    if not stripped:
        raise ValueError("Prompt is empty; write a question or instruction for the models.")
    if len(stripped) > PROMPT_MAX_CHARS:
        raise ValueError(f"Prompt is too long: {len(stripped)} characters, the maximum is {PROMPT_MAX_CHARS}.")
    if "\x00" in stripped:
        raise ValueError("Prompt contains a NUL character, which cannot be stored.")
    return stripped


_WHITESPACE = re.compile(r"\s+")


def prompt_normalise(text: str) -> str:
    """The form of ``text`` used to recognise repeats: NFKC, case-folded, whitespace collapsed.

    Case folding can produce text that is no longer NFKC-normal (e.g. some Greek and ligature
    characters), so NFKC is applied again after it, which is what Unicode's NFKC_Casefold amounts
    to for practical purposes. Every run of Unicode whitespace becomes one space; ends are stripped.
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return _WHITESPACE.sub(" ", folded).strip()


def prompt_hash(text: str) -> str:
    """SHA-256 hex digest (64 characters) of the UTF-8 bytes of ``prompt_normalise(text)``."""
    return hashlib.sha256(prompt_normalise(text).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------------
# Category


def _rules(weight: int, patterns: Iterable[str]) -> list[tuple[int, re.Pattern[str]]]:
    return [(weight, re.compile(p, re.IGNORECASE)) for p in patterns]


# Each matching pattern adds its weight once (not once per occurrence), so a long prompt that
# repeats one word does not outweigh a prompt with several different signals.
_CATEGORY_RULES: dict[str, list[tuple[int, re.Pattern[str]]]] = {
    "coding": _rules(
        3,
        [
            r"```",
            r"\b(?:python|javascript|typescript|java|c\+\+|c#|golang|rust|kotlin|swift|php|ruby|sql|"
            r"bash|powershell|html|css|react|django|flask|numpy|pandas|regex|regexp|json|yaml|"
            r"dockerfile|kubernetes|git)\b",
            r"\b(?:def|class|import|return|function|const|var|let|public|static|void)\s+\w+",
            r"\b(?:stack\s?trace|traceback|segfault|compiler?|compile|runtime\s+error|syntax\s+error|"
            r"exception|null\s?pointer|debug|refactor|unit\s+tests?)\b",
            r"\b(?:write|implement|fix|optimi[sz]e)\s+(?:a|an|the|this|my)?\s*(?:\w+\s+)?"
            r"(?:function|script|program|class|method|query|algorithm|api|endpoint|code)\b",
        ],
    )
    + _rules(
        2,
        [
            r"\b(?:code|coding|programming|program|algorithm|api|bug|library|framework|database|"
            r"variable|array|loop|recursion|linked\s+list|hash\s?map|big-?o)\b",
            r"[{};]\s*$|==|!=|=>|->|\w+\(\)",
        ],
    ),
    "math": _rules(
        3,
        [
            r"\b(?:solve|simplify|integrate|differentiate|factori[sz]e)\b",
            r"\b(?:equation|integral|derivative|matrix|eigen\w*|theorem|lemma|polynomial|logarithm|"
            r"probability|combinatorics|calculus|algebra|geometry|trigonometry|prime\s+numbers?|"
            r"modulo|vector\s+space)\b",
            r"\\(?:frac|int|sum|sqrt|cdot|lim)\b|\$[^$]+\$",
            r"\d\s*[-+*/^×÷]\s*\d|\b[xyn]\s*\^\s*\d|\b\d+\s*[xy]\b",
        ],
    )
    + _rules(
        2,
        [
            r"\b(?:calculate|compute|prove|proof|how\s+much\s+is|what\s+is\s+\d)\b",
            r"\b(?:percent(?:age)?|average|mean|median|variance|fraction|ratio|sum\s+of|product\s+of)\b",
        ],
    ),
    "writing": _rules(
        3,
        [
            r"\b(?:write|compose|draft|pen)\s+(?:me\s+)?(?:a|an|the|some|my)?\s*(?:\w+\s+){0,2}"
            r"(?:poem|story|essay|email|e-mail|letter|song|lyrics|haiku|limerick|sonnet|speech|"
            r"blog\s+post|article|tweet|post|slogan|toast|eulogy|script|screenplay|dialogue|review|"
            r"cover\s+letter|bio|biography|description|caption|joke|summary|report|newsletter)\b",
            r"\b(?:poem|haiku|limerick|sonnet|short\s+story|fan\s?fiction|novel|rhyme|lyrics|"
            r"cover\s+letter)\b",
            r"\b(?:rewrite|rephrase|paraphrase|proofread|reword|summari[sz]e|translate|edit\s+this|"
            r"make\s+(?:it|this)\s+(?:sound|more|less))\b",
        ],
    )
    + _rules(1, [r"\b(?:write|tone|formal|informal|creative|catchy|paragraph|sentence)\b"]),
    "knowledge": _rules(
        2,
        [
            r"^\s*(?:what|who|when|where|which)\s+(?:is|are|was|were|did|does|do)\b",
            r"\b(?:explain|describe|define|definition\s+of|what\s+does\s+\S+\s+mean|history\s+of|"
            r"tell\s+me\s+about|difference\s+between|how\s+does|how\s+do\s+\w+\s+work|why\s+(?:is|are|do|"
            r"does|did))\b",
            r"\b(?:capital\s+of|population\s+of|invented|discovered|founded|born|century|war|president|"
            r"king|queen|country|planet|species|element|molecule|economy|philosophy|religion)\b",
        ],
    ),
    "reasoning": _rules(
        3,
        [
            r"\b(?:riddle|puzzle|brain\s?teaser|logic(?:al)?\s+(?:problem|question|puzzle)|syllogism|"
            r"paradox|deduce|infer|lateral\s+thinking)\b",
            r"\b(?:step\s+by\s+step|think\s+carefully|trick\s+question)\b",
            r"\b(?:which\s+is\s+(?:heavier|faster|bigger|larger|older|taller)|who\s+is\s+(?:lying|telling"
            r"\s+the\s+truth)|how\s+many\s+\w+\s+(?:does|do|are|will)\b.*\bif\b)",
        ],
    )
    + _rules(
        2,
        [
            r"\bif\b.{1,80}\bthen\b",
            r"\b(?:sister|brother|siblings|knights?\s+and\s+knaves|liar|truth-?teller|older\s+than|"
            r"younger\s+than|taller\s+than)\b",
        ],
    ),
    "advice": _rules(
        3,
        [
            r"\b(?:should\s+i|do\s+you\s+(?:think|recommend)|would\s+you\s+recommend|"
            r"what\s+would\s+you\s+do|help\s+me\s+(?:decide|choose)|advice|advise|tips?\s+(?:for|on|to))\b",
            r"\b(?:how\s+(?:can|do|should)\s+i\s+(?:improve|deal|cope|handle|get|stop|start|learn|"
            r"become|find|make|prepare|save|lose|manage|convince|tell|ask))\b",
        ],
    )
    + _rules(
        2,
        [
            r"\b(?:my\s+(?:boss|wife|husband|partner|girlfriend|boyfriend|friend|mom|mum|dad|mother|"
            r"father|kids?|son|daughter|manager|colleague|coworker|landlord|career|job|health|"
            r"relationship)|best\s+way\s+to|recommend|suggestions?|is\s+it\s+(?:ok|okay|worth|"
            r"a\s+good\s+idea))\b",
        ],
    ),
}


def _category(text: str) -> str:
    best_name, best_score = "other", 0
    for name in CATEGORIES[:-1]:
        score = sum(weight for weight, pattern in _CATEGORY_RULES[name] if pattern.search(text))
        if score > best_score:  # strict: ties keep the earlier category
            best_name, best_score = name, score
    return best_name


# ---------------------------------------------------------------------------------------------------
# Language

# Short function-word lists. Words shared between languages count for each of them and so mostly
# cancel out; the distinctive ones decide.
_STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "a the and of to in is are was were be that this it for on with as at by from have has "
        "what which who how why when where you your i my me we our they their not do does can "
        "could would should will an or but if about there some any",
        "de": "der die das und ist sind war nicht ein eine einen einem einer mit von zu den dem des "
        "auf für ich du sie wir ihr es wie was warum wer wo bitte auch oder aber wenn dass kann "
        "können mein meine dein deine im am zum zur über nach bei noch schon sehr",
        "fr": "le la les et est sont un une des du de pour pas que qui quoi ce cette ces dans sur avec "
        "je tu il elle nous vous ils elles mon ma mes ton ta votre vos au aux ne plus mais ou où "
        "comment pourquoi quel quelle être avoir fait très",
        "es": "a el la los las y es son un una unos unas de del en que qué por para con no se su sus "
        "mi mis tu yo él ella nosotros ellos como cómo pero muy está están hay cuál cuándo "
        "dónde porque también al lo le",
        "it": "a il lo la gli le e è sono un uno una di del della dei delle che chi per non con su mi "
        "ti ci si io tu lui lei noi voi loro come perché ma anche molto questo questa quello "
        "qual quale nel nella al alla sei",
        "pt": "o a os as e é são um uma uns umas de do da dos das que por para com não em no na nos "
        "nas se eu você ele ela nós eles meu minha seu sua como mas muito está estão também "
        "porque qual quando onde isso isto",
        "nl": "de het een en is zijn was niet van voor op met te dat die dit wat wie hoe waarom waar "
        "ik jij je u hij zij wij we ze mijn jouw uw ook maar of als kan kunnen heb heeft er "
        "naar bij nog al om",
    }.items()
}

# Letters that are strong evidence for one language among the Latin-script ones.
_DISTINCTIVE_CHARS: dict[str, str] = {
    "de": "ßäöü",
    "fr": "çèêëîïôœûù",
    "es": "ñ¿¡áíóú",
    "it": "ìò",
    "pt": "ãõâ",
    "nl": "ĳ",
}

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


def _script(char: str) -> str | None:
    code = ord(char)
    if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0xFF66 <= code <= 0xFF9F:
        return "kana"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF:
        return "han"
    if 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "hangul"
    if 0x0400 <= code <= 0x052F:
        return "cyrillic"
    if 0x0600 <= code <= 0x06FF or 0x0750 <= code <= 0x077F or 0xFB50 <= code <= 0xFDFF or 0xFE70 <= code <= 0xFEFF:
        return "arabic"
    if char.isalpha() and (code < 0x0250 or 0x1E00 <= code <= 0x1EFF):
        return "latin"
    return None


def _language(text: str) -> str:
    scripts: dict[str, int] = {}
    for char in text:
        script = _script(char)
        if script is not None:
            scripts[script] = scripts.get(script, 0) + 1
    # A CJK character carries about as much as a short word, a Latin letter a fifth of one.
    cjk = scripts.get("han", 0) + scripts.get("kana", 0)
    weighted = {
        "cjk": 3 * cjk,
        "hangul": 3 * scripts.get("hangul", 0),
        "cyrillic": scripts.get("cyrillic", 0),
        "arabic": scripts.get("arabic", 0),
        "latin": scripts.get("latin", 0),
    }
    total = sum(weighted.values())
    if total == 0:
        return UNDETERMINED_LANGUAGE
    dominant = max(weighted, key=lambda key: (weighted[key], key == "latin"))
    if weighted[dominant] * 2 < total:  # no script has half of the text
        return UNDETERMINED_LANGUAGE
    if dominant == "cjk":
        # Japanese mixes kana into kanji; Chinese has none.
        return "ja" if scripts.get("kana", 0) * 10 >= cjk else "zh"
    if dominant != "latin":
        return {"hangul": "ko", "cyrillic": "ru", "arabic": "ar"}[dominant]
    return _latin_language(text)


def _latin_language(text: str) -> str:
    words = [w.replace("’", "'") for w in _WORD.findall(text.casefold())]
    scores = {lang: 0.0 for lang in _STOPWORDS}
    for word in words:
        for lang, stopwords in _STOPWORDS.items():
            if word in stopwords:
                scores[lang] += 1
    lowered = text.casefold()
    for lang, chars in _DISTINCTIVE_CHARS.items():
        scores[lang] += 0.5 * sum(lowered.count(c) for c in chars)
    # French and Italian elisions (l'homme, c'est, dell'anno) and English contractions.
    scores["fr"] += sum(1 for w in words if re.match(r"(?:l|d|j|c|qu|n|s|m|t)'", w))
    scores["it"] += sum(1 for w in words if re.match(r"(?:dell|nell|sull|all|dall|un)'", w))
    scores["en"] += sum(1 for w in words if re.search(r"'(?:s|t|re|ve|ll|d|m)$", w))
    ranked = sorted(scores.items(), key=lambda item: (-item[1], LANGUAGES.index(item[0])))
    (best, best_score), (_, second_score) = ranked[0], ranked[1]
    if best_score < 2 or best_score <= second_score:
        return UNDETERMINED_LANGUAGE
    return best


def prompt_classify(text: str) -> tuple[str, str]:
    """Return ``(category, language)`` for a prompt: a deterministic heuristic, not a model.

    Category: each category in ``CATEGORIES`` has weighted keyword/regex rules; a category's score
    is the sum of the weights of its rules that match anywhere in the text (case-insensitive). The
    highest score wins; ties go to the category listed first in ``CATEGORIES``; no match at all
    gives ``"other"``. The rules are English, so prompts in other languages mostly land in
    "other" unless they contain code, formulas or English technical words.

    Language: an ISO 639-1 code from ``LANGUAGES`` or ``"und"``. First the Unicode script of the
    letters: if Han/kana (weighted x3), Hangul (x3), Cyrillic or Arabic letters make up at least
    half, the answer is ja (any kana, at least a tenth of the CJK characters) or zh, ko, ru, ar.
    So every Cyrillic-script language reads as ru and Persian/Urdu read as ar. For Latin script,
    counts of built-in stopwords (plus small bonuses for distinctive letters and elisions) for en,
    de, fr, es, it, pt, nl; the best needs at least 2 points and a strict lead, else "und" (short
    or mixed prompts, code without prose, other Latin-script languages).
    """
    return _category(text), _language(text)
