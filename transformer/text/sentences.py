"""``sentences``: a small English -> German grammar, with the true alignment and dependency arcs.

A sentence is drawn as a tree, then written out in both languages at once, so every German word
knows the English word it translates and every English word its head. ``parse`` goes the other
way: from the English text alone it re-derives the tree, hence the German reference, the
alignment and the arcs (the source side is unambiguous by construction).

What the grammar covers (all third person, present tense, lowercase except German nouns, no
final full stop):

- noun phrases: a determiner (the, a/an, this/these, my, no), up to ``max_adjectives`` adjectives
  and a noun of one of three genders, singular or plural. German articles agree in gender,
  number and case; adjectives take the weak ending after der/dieser and the mixed ending after
  ein/mein/kein (``des großen Hundes`` is never needed: no genitive); dative plural nouns add -n.
- clauses: subject (nominative), a verb that agrees with it, an accusative object for transitive
  verbs, an optional prepositional phrase whose preposition fixes the case (mit, nach, außer +
  dative; für, ohne, durch, gegen, um + accusative; no contractions such as "vom" arise).
- subordinate clauses: "because/when/while/although" (weil, wenn, während, obwohl) after a
  clause, or before the main clause, which then inverts (``wenn die Katze singt, schläft der
  Hund``); "that" (dass) after the verbs of saying and thinking. German puts the verb of a
  subordinate clause last, after object and prepositional phrase.

Every German word translates exactly one English word, except the comma before a subordinate
clause, which English writes only when the clause comes first: a German comma aligns to the
English comma if there is one, else to the conjunction it announces.

Dependency arcs are ``(dependent, head, relation)`` with the relation names of Universal
Dependencies v2 (de Marneffe et al. 2021, "Universal Dependencies"; universaldependencies.org/u/dep),
heads being content words, on English word indices (``Structure.arcs``) and on German word indices
(``Structure.target_arcs``, the same tree written in German word order):

- ``det``: article -> its noun (``det:poss`` for my/mein);  ``amod``: adjective -> its noun;
- ``nsubj``: subject noun -> its verb;   ``obj``: object noun -> its verb;
- ``case``: preposition -> its noun;     ``obl``: that noun -> the verb it modifies;
- ``mark``: a subordinating conjunction (because, that, ...) -> the verb of its clause;
- ``advcl``: the verb of an adverbial clause (because/when/while/although) -> the main verb;
- ``ccomp``: the verb of a that-clause -> the verb of saying.

Commas carry no arc (UD ``punct`` is left out). Every English arc has its German twin between the
German words that translate its two words, so the two lists are parallel.

Verb + preposition pairings that English reads as one prepositional verb whose German counterpart
takes another preposition are never drawn, and ``parse`` refuses them (``UNIDIOMATIC``: "waits for"
is "wartet auf", not "wartet für").
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# --- the lexicon ------------------------------------------------------------------------

# English singular, English plural, gender, German singular, German plural
_NOUNS = """
dog dogs m Hund Hunde; man men m Mann Männer; teacher teachers m Lehrer Lehrer; friend friends m Freund Freunde
father fathers m Vater Väter; brother brothers m Bruder Brüder; king kings m König Könige; doctor doctors m Arzt Ärzte
cook cooks m Koch Köche; baker bakers m Bäcker Bäcker; bird birds m Vogel Vögel; table tables m Tisch Tische
chair chairs m Stuhl Stühle; tree trees m Baum Bäume; garden gardens m Garten Gärten; apple apples m Apfel Äpfel
ball balls m Ball Bälle; letter letters m Brief Briefe; hat hats m Hut Hüte; key keys m Schlüssel Schlüssel
train trains m Zug Züge; coat coats m Mantel Mäntel; spoon spoons m Löffel Löffel; wolf wolves m Wolf Wölfe
painter painters m Maler Maler; singer singers m Sänger Sänger; son sons m Sohn Söhne; uncle uncles m Onkel Onkel
pupil pupils m Schüler Schüler; stone stones m Stein Steine; river rivers m Fluss Flüsse; cake cakes m Kuchen Kuchen
cat cats f Katze Katzen; woman women f Frau Frauen; mother mothers f Mutter Mütter
sister sisters f Schwester Schwestern;
mouse mice f Maus Mäuse; cow cows f Kuh Kühe; flower flowers f Blume Blumen; door doors f Tür Türen
lamp lamps f Lampe Lampen; city cities f Stadt Städte; street streets f Straße Straßen; school schools f Schule Schulen
bottle bottles f Flasche Flaschen; cup cups f Tasse Tassen; bag bags f Tasche Taschen
queen queens f Königin Königinnen;
duck ducks f Ente Enten; bee bees f Biene Bienen; box boxes f Kiste Kisten; banana bananas f Banane Bananen
pear pears f Birne Birnen; aunt aunts f Tante Tanten; daughter daughters f Tochter Töchter
church churches f Kirche Kirchen; kitchen kitchens f Küche Küchen; clock clocks f Uhr Uhren
child children n Kind Kinder; girl girls n Mädchen Mädchen
horse horses n Pferd Pferde; book books n Buch Bücher; house houses n Haus Häuser; picture pictures n Bild Bilder
window windows n Fenster Fenster; song songs n Lied Lieder; bed beds n Bett Betten; egg eggs n Ei Eier
boat boats n Boot Boote; pig pigs n Schwein Schweine; glass glasses n Glas Gläser; shirt shirts n Hemd Hemden
bread breads n Brot Brote; car cars n Auto Autos; village villages n Dorf Dörfer; animal animals n Tier Tiere
room rooms n Zimmer Zimmer; dress dresses n Kleid Kleider; rabbit rabbits n Kaninchen Kaninchen
bicycle bicycles n Fahrrad Fahrräder
"""
_ADJECTIVES = """big:groß small:klein old:alt young:jung red:rot green:grün blue:blau black:schwarz white:weiß
new:neu good:gut happy:glücklich sad:traurig fast:schnell slow:langsam beautiful:schön loud:laut quiet:ruhig
clever:klug funny:lustig hungry:hungrig rich:reich poor:arm strong:stark brave:mutig lazy:faul friendly:freundlich
angry:wütend yellow:gelb brown:braun wild:wild heavy:schwer dirty:schmutzig warm:warm cold:kalt short:kurz
long:lang famous:berühmt strange:seltsam nice:nett"""
# English 3rd singular, English plural, German 3rd singular, German 3rd plural
_TRANSITIVE = """sees see sieht sehen; likes like mag mögen; has have hat haben; finds find findet finden
buys buy kauft kaufen; sells sell verkauft verkaufen; paints paint malt malen; visits visit besucht besuchen
hears hear hört hören; loves love liebt lieben; carries carry trägt tragen; holds hold hält halten
eats eat isst essen; reads read liest lesen; washes wash wäscht waschen; seeks seek sucht suchen
draws draw zeichnet zeichnen; brings bring bringt bringen; opens open öffnet öffnen; catches catch fängt fangen
builds build baut bauen; cleans clean putzt putzen; fetches fetch holt holen; throws throw wirft werfen
counts count zählt zählen; feeds feed füttert füttern; meets meet trifft treffen; needs need braucht brauchen
forgets forget vergisst vergessen; praises praise lobt loben; chases chase jagt jagen; kisses kiss küsst küssen
pushes push schiebt schieben; pulls pull zieht ziehen; bites bite beißt beißen; watches watch beobachtet beobachten
understands understand versteht verstehen; describes describe beschreibt beschreiben; greets greet grüßt grüßen
hides hide versteckt verstecken; wakes wake weckt wecken; teaches teach unterrichtet unterrichten
asks ask fragt fragen"""
_INTRANSITIVE = """sleeps sleep schläft schlafen; laughs laugh lacht lachen; sings sing singt singen
waits wait wartet warten; runs run läuft laufen; works work arbeitet arbeiten; plays play spielt spielen
dances dance tanzt tanzen; swims swim schwimmt schwimmen; cries cry weint weinen; smiles smile lächelt lächeln
dreams dream träumt träumen; falls fall fällt fallen"""
_SAYING = """knows know weiß wissen; says say sagt sagen; thinks think denkt denken; believes believe glaubt glauben
hopes hope hofft hoffen; notices notice bemerkt bemerken; fears fear fürchtet fürchten"""
# preposition: (German, case); case 1 = accusative, 2 = dative (indices into the case tables)
PREPOSITIONS = {"with": ("mit", 2), "after": ("nach", 2), "except": ("außer", 2), "for": ("für", 1),
                "without": ("ohne", 1), "through": ("durch", 1), "against": ("gegen", 1), "around": ("um", 1)}
ADVERBIAL_CONJUNCTIONS = {"because": "weil", "when": "wenn", "while": "während", "although": "obwohl"}
# Verb + preposition pairs left out: English reads them as a prepositional verb, German says it with another
# preposition (or verb), so the word-by-word German would be wrong. Never drawn; ``parse`` refuses them.
UNIDIOMATIC = {("waits", "for"): "wartet auf", ("cries", "for"): "weint um", ("asks", "for"): "bittet um",
               ("falls", "for"): "verliebt sich in"}
DETERMINERS = ("the", "a", "this", "my", "no")  # English lemmas; "a" is written "an" before a vowel

# Case tables: (nominative, accusative, dative) per gender m/f/n and plural p.
_DER = {"m": ("der", "den", "dem"), "f": ("die", "die", "der"), "n": ("das", "das", "dem"), "p": ("die", "die", "den")}
_DER_WORD_ENDINGS = {"m": ("er", "en", "em"), "f": ("e", "e", "er"), "n": ("es", "es", "em"), "p": ("e", "e", "en")}
_EIN_WORD_ENDINGS = {"m": ("", "en", "em"), "f": ("e", "e", "er"), "n": ("", "", "em"), "p": ("e", "e", "en")}
_WEAK = {"m": ("e", "en", "en"), "f": ("e", "e", "en"), "n": ("e", "e", "en"), "p": ("en", "en", "en")}
_MIXED = {"m": ("er", "en", "en"), "f": ("e", "e", "en"), "n": ("es", "es", "en"), "p": ("en", "en", "en")}
# English determiner -> (German stem, ending table, adjective table, English plural or None)
_DETERMINER_FORMS = {"the": (None, _DER, _WEAK, "the"), "this": ("dies", _DER_WORD_ENDINGS, _WEAK, "these"),
                     "a": ("ein", _EIN_WORD_ENDINGS, _MIXED, None), "my": ("mein", _EIN_WORD_ENDINGS, _MIXED, "my"),
                     "no": ("kein", _EIN_WORD_ENDINGS, _MIXED, "no")}


def _table(text: str, width: int) -> list[list[str]]:
    rows = [row.split() for row in re.split(r"[;\n]", text) if row.strip()]
    assert all(len(row) == width for row in rows), [row for row in rows if len(row) != width]
    return rows


NOUNS = {row[0]: tuple(row[1:]) for row in _table(_NOUNS, 5)}  # en sg -> (en pl, gender, de sg, de pl)
ADJECTIVES = dict(pair.split(":") for pair in _ADJECTIVES.split())
VERBS = {row[0]: (row[1], row[2], row[3], kind)  # en 3sg -> (en pl, de 3sg, de 3pl, kind)
         for kind, text in (("transitive", _TRANSITIVE), ("intransitive", _INTRANSITIVE), ("saying", _SAYING))
         for row in _table(text, 4)}
_PLURAL_NOUNS = {forms[0]: sg for sg, forms in NOUNS.items()}
_PLURAL_VERBS = {forms[0]: sg for sg, forms in VERBS.items()}
_DET_WORDS = {"the": ("the", None), "a": ("a", False), "an": ("a", False), "this": ("this", False),
              "these": ("this", True), "my": ("my", None), "no": ("no", None)}  # word -> (lemma, plural?)
WORD_PATTERN = re.compile(r"[^\W_]+|[^\w\s]")  # a word, or one punctuation mark (the comma)


# --- the trees --------------------------------------------------------------------------


@dataclass(frozen=True)
class NounPhrase:
    determiner: str  # a lemma from DETERMINERS
    adjectives: tuple[str, ...]  # English adjectives
    noun: str  # English singular
    plural: bool


@dataclass(frozen=True)
class Clause:
    subject: NounPhrase
    verb: str  # English 3rd singular, a key of VERBS
    object: NounPhrase | None = None  # for transitive verbs
    preposition: str | None = None  # a key of PREPOSITIONS ...
    prepositional_object: NounPhrase | None = None  # ... and the noun phrase it introduces
    conjunction: str | None = None  # "that" after a verb of saying, else an ADVERBIAL_CONJUNCTION ...
    subordinate: Clause | None = None  # ... and the clause it introduces


@dataclass(frozen=True)
class Sentence:
    main: Clause
    preposed_conjunction: str | None = None  # "when the cat sings, the dog sleeps"
    preposed: Clause | None = None


@dataclass(frozen=True)
class Structure:
    """A sentence pair with its truth: English words, German words, alignment and arcs."""

    source: str
    target: str
    src_words: tuple[str, ...]
    tgt_words: tuple[str, ...]
    alignment: tuple[tuple[int, ...], ...]  # per German word: the English word indices it translates
    arcs: tuple[tuple[int, int, str], ...]  # (dependent, head, relation) on English word indices
    target_arcs: tuple[tuple[int, int, str], ...] = ()  # the same relations on German word indices


# --- writing a tree out in both languages -----------------------------------------------


# A German word while the sentence is written: (text, the English index it translates, a serial number that
# names it in the German arcs until its position is known).
_De = tuple[str, int, int]


class _Writer:
    def __init__(self) -> None:
        self.en: list[str] = []
        self.arcs: list[tuple[int, int, str]] = []
        self.de_arcs: list[tuple[int, int, str]] = []  # on German serial numbers
        self.n_de = 0

    def word(self, text: str) -> int:
        self.en.append(text)
        return len(self.en) - 1

    def de(self, text: str, en_i: int) -> _De:
        self.n_de += 1
        return text, en_i, self.n_de - 1

    def arc(self, dep: tuple[int, _De], head: tuple[int, _De], relation: str) -> None:
        """One relation on both sides: (English index, German word) of the dependent and of the head."""
        self.arcs.append((dep[0], head[0], relation))
        self.de_arcs.append((dep[1][2], head[1][2], relation))

    def noun_phrase(self, np: NounPhrase, case: int) -> tuple[list[_De], tuple[int, _De]]:
        """Write the English NP; -> (its German words, the noun's (English index, German word))."""
        en_pl, gender, de_sg, de_pl = NOUNS[np.noun]
        stem, endings, adjective_endings, en_plural_det = _DETERMINER_FORMS[np.determiner]
        key = "p" if np.plural else gender
        en_det = en_plural_det if np.plural else np.determiner
        following = np.adjectives[0] if np.adjectives else np.noun
        if en_det == "a" and following[0] in "aeiou":
            en_det = "an"
        det_i = self.word(en_det)
        adj_is = [self.word(adj) for adj in np.adjectives]
        noun_i = self.word(en_pl if np.plural else np.noun)
        article = self.de(endings[key][case] if stem is None else stem + endings[key][case], det_i)
        adjectives = [self.de(ADJECTIVES[adj] + adjective_endings[key][case], i)
                      for adj, i in zip(np.adjectives, adj_is, strict=True)]
        noun = self.de(de_sg if not np.plural else de_pl + "n" if case == 2 and de_pl[-1] not in "ns" else de_pl,
                       noun_i)
        self.arc((det_i, article), (noun_i, noun), "det:poss" if np.determiner == "my" else "det")
        for i, adjective in zip(adj_is, adjectives, strict=True):
            self.arc((i, adjective), (noun_i, noun), "amod")
        return [article, *adjectives, noun], (noun_i, noun)

    def clause(self, c: Clause, order: str) -> tuple[list[_De], tuple[int, _De]]:
        """order: "main" (verb second), "inverted" (verb first) or "subordinate" (verb last).
        -> (the German words, the verb's (English index, German word))."""
        subject, subject_noun = self.noun_phrase(c.subject, 0)
        en_pl, de_sg, de_pl, _ = VERBS[c.verb]
        verb_i = self.word(en_pl if c.subject.plural else c.verb)
        verb = (verb_i, self.de(de_pl if c.subject.plural else de_sg, verb_i))
        self.arc(subject_noun, verb, "nsubj")
        middle: list[_De] = []
        if c.object is not None:
            obj, object_noun = self.noun_phrase(c.object, 1)
            self.arc(object_noun, verb, "obj")
            middle += obj
        if c.preposition is not None:
            prep_i = self.word(c.preposition)
            de_prep, case = PREPOSITIONS[c.preposition]
            preposition = self.de(de_prep, prep_i)
            np, noun = self.noun_phrase(c.prepositional_object, case)
            self.arc((prep_i, preposition), noun, "case")
            self.arc(noun, verb, "obl")
            middle += [preposition, *np]
        tail: list[_De] = []
        if c.subordinate is not None:
            conj_i = self.word(c.conjunction)
            de_conj = "dass" if c.conjunction == "that" else ADVERBIAL_CONJUNCTIONS[c.conjunction]
            conjunction = self.de(de_conj, conj_i)
            sub, sub_verb = self.clause(c.subordinate, "subordinate")
            self.arc((conj_i, conjunction), sub_verb, "mark")
            self.arc(sub_verb, verb, "ccomp" if c.conjunction == "that" else "advcl")
            tail = [self.de(",", conj_i), conjunction, *sub]
        if order == "main":
            return subject + [verb[1]] + middle + tail, verb
        if order == "inverted":
            return [verb[1]] + subject + middle + tail, verb
        return subject + middle + [verb[1]] + tail, verb

    def sentence(self, s: Sentence) -> list[_De]:
        if s.preposed is None:
            return self.clause(s.main, "main")[0]
        conj_i = self.word(s.preposed_conjunction)
        conjunction = self.de(ADVERBIAL_CONJUNCTIONS[s.preposed_conjunction], conj_i)
        preposed, preposed_verb = self.clause(s.preposed, "subordinate")
        comma_i = self.word(",")
        comma = self.de(",", comma_i)
        main, main_verb = self.clause(s.main, "inverted")
        self.arc((conj_i, conjunction), preposed_verb, "mark")
        self.arc(preposed_verb, main_verb, "advcl")
        return [conjunction, *preposed, comma, *main]


def _join(words: list[str]) -> str:
    return " ".join(words).replace(" ,", ",")


def render(sentence: Sentence) -> Structure:
    """Write a tree out: the English source, the German reference, the alignment and the arcs."""
    writer = _Writer()
    german = writer.sentence(sentence)
    position = {serial: k for k, (_, _, serial) in enumerate(german)}
    target_arcs = tuple((position[dep], position[head], rel) for dep, head, rel in writer.de_arcs)
    return Structure(_join(writer.en), _join([w for w, _, _ in german]), tuple(writer.en),
                     tuple(w for w, _, _ in german), tuple((i,) for _, i, _ in german), tuple(writer.arcs),
                     target_arcs)


# --- drawing a tree at random -----------------------------------------------------------


def random_sentence(rng: random.Random, max_clauses: int = 2, max_adjectives: int = 2) -> Sentence:
    """A random tree with at most ``max_clauses`` clauses and ``max_adjectives`` adjectives per noun."""
    budget = [max_clauses - 1]  # subordinate clauses still allowed

    def noun_phrase() -> NounPhrase:
        plural = rng.random() < 0.4
        determiner = rng.choice(("the", "the", "this", "my", "no") if plural else DETERMINERS)
        n_adj = min(rng.choice((0, 0, 0, 1, 1, 2)), max_adjectives)
        if n_adj == 2 and max_adjectives >= 3 and rng.random() < 1 / 3:  # drawn only then: the draws of
            n_adj = 3  # max_adjectives <= 2 (the shipped model's data) stay as they were
        return NounPhrase(determiner, tuple(rng.sample(sorted(ADJECTIVES), n_adj)), rng.choice(_NOUN_LIST), plural)

    def clause(may_extend: bool) -> Clause:
        kinds = ["transitive"] * 6 + ["intransitive"] * 3 + (["saying"] * 2 if may_extend and budget[0] else [])
        kind = rng.choice(kinds)
        verb = rng.choice(_VERBS_BY_KIND[kind])
        obj = noun_phrase() if kind == "transitive" else None
        prep = rng.choice(_PREPOSITIONS_FOR[verb]) if kind != "saying" and rng.random() < 0.3 else None
        conj = sub = None
        if kind == "saying" or (may_extend and budget[0] and rng.random() < 0.35):
            budget[0] -= 1
            conj = "that" if kind == "saying" else rng.choice(_CONJUNCTION_LIST)
        subject = noun_phrase()
        obj_np = obj
        prep_np = noun_phrase() if prep else None
        if conj:
            sub = clause(may_extend)
        return Clause(subject, verb, obj_np, prep, prep_np, conj, sub)

    if budget[0] and rng.random() < 0.15:
        budget[0] -= 1
        conj = rng.choice(_CONJUNCTION_LIST)
        preposed = clause(False)
        return Sentence(clause(True), conj, preposed)
    return Sentence(clause(True))


_NOUN_LIST = sorted(NOUNS)
_PREPOSITIONS_FOR = {verb: [p for p in sorted(PREPOSITIONS) if (verb, p) not in UNIDIOMATIC] for verb in VERBS}
_CONJUNCTION_LIST = sorted(ADVERBIAL_CONJUNCTIONS)
_VERBS_BY_KIND = {kind: sorted(v for v, forms in VERBS.items() if forms[3] == kind)
                  for kind in ("transitive", "intransitive", "saying")}


def sentence_pairs(rng: random.Random, n: int, max_clauses: int = 2, max_adjectives: int = 2) -> list[tuple[str, str]]:
    """n pairs with distinct sources (fewer only if the grammar runs out, which it does not in practice)."""
    if not (isinstance(max_clauses, int) and 1 <= max_clauses <= 6):
        raise ValueError(f"max_clauses must be an int in 1..6, got {max_clauses!r}")
    if not (isinstance(max_adjectives, int) and 0 <= max_adjectives <= 3):
        raise ValueError(f"max_adjectives must be an int in 0..3, got {max_adjectives!r}")
    pairs: dict[str, str] = {}
    for _ in range(20 * n + 1000):
        if len(pairs) == n:
            break
        structure = render(random_sentence(rng, max_clauses, max_adjectives))
        pairs.setdefault(structure.source, structure.target)
    return list(pairs.items())


# --- reading the English back -----------------------------------------------------------


def words(text: str) -> list[tuple[str, int, int]]:
    """The words (and commas) of a text with their (start, end) characters."""
    return [(m.group(), m.start(), m.end()) for m in WORD_PATTERN.finditer(text)]


def parse(src_text: str) -> Structure:
    """Re-derive the tree of an English source of this grammar: its German reference, alignment
    and arcs. Raises ValueError naming the word where the text leaves the grammar."""
    tokens = [w for w, _, _ in words(src_text)]
    reader = _Reader(tokens, src_text)
    sentence = reader.sentence()
    structure = render(sentence)
    if list(structure.src_words) != tokens:  # e.g. "a" where "an" is due
        raise ValueError(f"{src_text!r} is not written as the grammar writes it: expected {structure.source!r}")
    return structure


class _Reader:
    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens, self.text, self.at = tokens, text, 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def fail(self, expected: str) -> ValueError:
        found = repr(self.peek()) if self.peek() is not None else "the end"
        return ValueError(f"cannot parse {self.text!r}: expected {expected} at word {self.at}, found {found}")

    def take(self, allowed, expected: str) -> str:
        word = self.peek()
        if word is None or word not in allowed:
            raise self.fail(expected)
        self.at += 1
        return word

    def sentence(self) -> Sentence:
        if self.peek() in ADVERBIAL_CONJUNCTIONS:
            conj = self.take(ADVERBIAL_CONJUNCTIONS, "a conjunction")
            preposed = self.clause(False)
            self.take({","}, "a comma after the preposed clause")
            result = Sentence(self.clause(True), conj, preposed)
        else:
            result = Sentence(self.clause(True))
        if self.peek() is not None:
            raise self.fail("the end of the sentence")
        return result

    def noun_phrase(self) -> NounPhrase:
        lemma, plural = _DET_WORDS[self.take(_DET_WORDS, "a determiner (" + ", ".join(_DET_WORDS) + ")")]
        adjectives = []
        while self.peek() in ADJECTIVES:
            adjectives.append(self.take(ADJECTIVES, "an adjective"))
        word = self.take(NOUNS.keys() | _PLURAL_NOUNS.keys(), "a noun")
        is_plural = word in _PLURAL_NOUNS
        if plural is not None and plural != is_plural:
            raise ValueError(f"cannot parse {self.text!r}: the determiner does not agree with {word!r}")
        return NounPhrase(lemma, tuple(adjectives), _PLURAL_NOUNS.get(word, word), is_plural)

    def clause(self, may_extend: bool) -> Clause:
        subject = self.noun_phrase()
        forms = _PLURAL_VERBS if subject.plural else VERBS
        word = self.take(forms, f"a verb agreeing with a {'plural' if subject.plural else 'singular'} subject")
        verb = _PLURAL_VERBS.get(word, word) if subject.plural else word
        kind = VERBS[verb][3]
        obj = self.noun_phrase() if kind == "transitive" else None
        prep = prep_np = conj = sub = None
        if kind == "saying":
            if not may_extend:
                raise self.fail("no verb of saying in a preposed clause")
            conj = self.take({"that"}, "'that'")
            sub = self.clause(True)
        else:
            if self.peek() in PREPOSITIONS:
                if (verb, self.peek()) in UNIDIOMATIC:
                    raise ValueError(f"cannot parse {self.text!r}: the grammar does not pair {verb!r} with "
                                     f"{self.peek()!r} (German says {UNIDIOMATIC[verb, self.peek()]!r})")
                prep = self.take(PREPOSITIONS, "a preposition")
                prep_np = self.noun_phrase()
            if may_extend and self.peek() in ADVERBIAL_CONJUNCTIONS:
                conj = self.take(ADVERBIAL_CONJUNCTIONS, "a conjunction")
                sub = self.clause(True)
        return Clause(subject, verb, obj, prep, prep_np, conj, sub)
