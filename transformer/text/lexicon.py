"""The sentences task's lexicon: English and German words with their forms (gender, number, case endings).

Each table is written as text, one entry per line or per ";", and read into dictionaries below. The
grammar (sentences.py) draws from these words and writes them out in both languages.
"""

from __future__ import annotations

import re

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
