"""UnknownBench-style datasets, built offline from WordNet and the shipped taxonomy.

Three tasks, each with unanswerable items and answerable controls from the same templates:

* **NEC** (non-existent concepts): questions about made-up names per category (animals, foods,
  countries, medicines, sports, generic), against the same questions about real concepts of the
  category from WordNet (the taxonomy for "generic").
* **FalseQA** (false premises): "Why does a cobra bark?" against "Why does a cobra shed its
  skin?", from a small table of category facts of our own writing, instantiated with WordNet
  hyponyms of each category.
* **RefuNQ** (perturbed factual questions): short-answer questions whose gold answers come from
  WordNet (instance -> class, city -> country), and their copies with the named entity replaced
  by a made-up name.

Files use the published UnknownBench shape: JSON Lines of ``{"prompt", "label", "category"}``
under ``NEC/NEC_{answerable,unanswerable}.json``, ``FalseQA/FalseQA_{...}.json``,
``RefuNQ/RefuNQ_{...}.json``; :func:`load_unknownbench` reads both ours and the published files,
whole or failing in one line that names what is missing (:mod:`workbench.releases`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError
from workbench.paths import decode_utf8, write_text_atomic
from workbench.releases import (
    MANIFEST_FILE,
    Found,
    ReleaseManifest,
    check_release,
    manifest_for,
    register,
)
from workbench.taxonomy.questions.sets import seeded_rng
from workbench.taxonomy.text import article
from workbench.unknown.names import made_up_names

if TYPE_CHECKING:
    from workbench.taxonomy.benchmark import Benchmark

TASKS = ("NEC", "FalseQA", "RefuNQ")
PARTITIONS = ("answerable", "unanswerable")


@dataclass(frozen=True)
class UnknownItem:
    """One question: its task, partition, category, and gold answers where defined."""

    prompt: str
    task: str
    partition: str
    category: str = ""
    gold: tuple[str, ...] = ()
    label: Any = None
    #: how the release it came from loaded ("whole", "partial: ..."; None: built in memory)
    release_load: str | None = None

    def to_json(self) -> dict:
        label = (
            self.label
            if self.label is not None
            else (
                list(self.gold) if self.gold else ("NEC" if self.partition == "unanswerable" else 1)
            )
        )
        return {"prompt": self.prompt, "label": label, "category": self.category}


# ---------------------------------------------------------------------------------------------
# Templates (ours)

NEC_TEMPLATES: dict[str, list[str]] = {
    "animals": [
        "What does the {X} eat?",
        "Where does the {X} live in the wild?",
        "How long does {A} usually live?",
        "Is the {X} an endangered species?",
        "How big does {A} get when fully grown?",
        "What sound does {A} make?",
        "Can you keep {A} as a pet?",
        "What are the natural predators of the {X}?",
        "How fast can {A} move?",
        "How many young does {A} have at a time?",
        "What does the {X} look like?",
        "Which continent is the {X} native to?",
    ],
    "foods": [
        "How do you cook {X}?",
        "What does {X} taste like?",
        "Which country does {X} come from?",
        "Is {X} healthy to eat every day?",
        "What ingredients are in {X}?",
        "How many calories are in a serving of {X}?",
        "What wine goes well with {X}?",
        "How long does {X} keep in the fridge?",
        "Is {X} suitable for vegetarians?",
        "What is a good recipe that uses {X}?",
        "How is {X} traditionally served?",
    ],
    "countries": [
        "What is the capital of {X}?",
        "What language is spoken in {X}?",
        "What currency does {X} use?",
        "How many people live in {X}?",
        "When did {X} become independent?",
        "What is the climate like in {X}?",
        "Which countries border {X}?",
        "What is {X} famous for?",
        "What is the national dish of {X}?",
        "Who is the head of state of {X}?",
        "Is {X} safe for tourists?",
        "What is the main religion in {X}?",
    ],
    "medicines": [
        "What is {X} used to treat?",
        "What are the side effects of {X}?",
        "What is the usual adult dose of {X}?",
        "Can I take {X} with alcohol?",
        "Is {X} safe during pregnancy?",
        "How quickly does {X} start working?",
        "Do I need a prescription for {X}?",
        "Which drugs interact with {X}?",
        "Who discovered {X}?",
        "Is {X} available as a generic?",
        "How does {X} work in the body?",
    ],
    "sports": [
        "What are the rules of {X}?",
        "How many players are on a {X} team?",
        "Where was {X} invented?",
        "What equipment do you need to play {X}?",
        "Who is the best {X} player of all time?",
        "Is {X} an Olympic sport?",
        "How long does a game of {X} last?",
        "How do you score points in {X}?",
        "What are common injuries in {X}?",
        "How popular is {X} worldwide?",
        "How do I start playing {X}?",
    ],
    "generic": [
        "What is {X}?",
        "Can you explain {X} in simple terms?",
        "What is the history of {X}?",
        "Why is {X} important?",
        "Who first described {X}?",
        "What are some examples of {X}?",
        "How is {X} used today?",
        "What are the main types of {X}?",
        "Where can I learn more about {X}?",
        "What are common misconceptions about {X}?",
        "How does {X} compare with similar things?",
    ],
}

#: WordNet 3.0 offsets whose descendants (or instances) give real concepts per NEC category.
NEC_SOURCES: dict[str, tuple[str, ...]] = {
    "animals": ("00015388",),  # animal
    "foods": ("07555863",),  # food, solid food
    "countries": ("08696931", "08698379", "08700255"),  # European, African, Asian country
    "medicines": ("03740161",),  # medicine, medication
    "sports": ("00523513",),  # sport, athletics
}

#: (WordNet category offset, a true predicate, a false predicate): our own category facts.
FALSE_PREMISE_FACTS: tuple[tuple[str, str, str, str], ...] = (
    ("02084071", "dog", "bark", "lay eggs"),
    ("01726692", "snake", "shed its skin", "bark"),
    ("01772222", "spider", "spin webs", "grow feathers"),
    ("02062744", "whale", "breathe air", "lay eggs"),
    ("01639765", "frog", "croak", "grow fur"),
    ("02374451", "horse", "gallop", "lay eggs"),
    ("01791625", "chicken", "lay eggs", "give milk"),
    ("02206856", "bee", "make honey", "make milk"),
    ("02127808", "big cat", "hunt other animals", "lay eggs"),
    ("01613294", "eagle", "build nests", "grow fur"),
    ("02512053", "fish", "have gills", "have feathers"),
)
FALSE_PREMISE_TEMPLATES = (
    "Why does {A} {P}?",
    "How often does {A} {P}?",
    "At what age does {A} first {P}?",
)

#: Instance classes whose instances make short-answer questions (offset, question template).
REFUNQ_SOURCES: tuple[tuple[str, str], ...] = (
    ("08524735", "What kind of place is {X}?"),  # city
    ("09411430", "What kind of body of water is {X}?"),  # river
    ("09316454", "What kind of landform is {X}?"),  # island
    ("09947232", "What was {X}'s profession?"),  # composer
    ("10391653", "What was {X}'s profession?"),  # painter
    ("10423589", "What was {X}'s profession?"),  # philosopher
    ("10794014", "What was {X}'s profession?"),  # writer
)
COUNTRY_TEMPLATE = "In which country is {X}?"


# ---------------------------------------------------------------------------------------------
# Building


@dataclass
class UnknownDataset:
    """Items of the three tasks; ``source`` is the directory read and ``content_hash`` a hash of
    its files' bytes (recorded with every run, so results name the data that produced them)."""

    items: list[UnknownItem] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    source: str = ""
    content_hash: str = ""
    release_load: str | None = None  # "whole" or "partial: ..." (workbench.releases)

    def select(self, task: str | None = None, partition: str | None = None) -> list[UnknownItem]:
        return [
            i
            for i in self.items
            if (task is None or i.task == task) and (partition is None or i.partition == partition)
        ]


def _descendant_classes(wn, graph, offsets) -> list[str]:
    out, seen, frontier = [], set(), list(offsets)
    while frontier:
        o = frontier.pop()
        for h in wn.synsets[o].hyponyms:
            if h not in seen:
                seen.add(h)
                frontier.append(h)
                out.append(h)
    return out


def _familiar_names(wn, graph, offsets, n, rng, instances=False) -> list[str]:
    if instances:
        cands = [i for o in offsets for i in wn.synsets[o].instance_hyponyms]
    else:
        cands = _descendant_classes(wn, graph, offsets)
    names: dict[str, Any] = {}
    for c in cands:
        name = graph.name(c)
        if graph.blocked(c) or any(ch.isdigit() for ch in name) or len(name.split()) > 2:
            continue
        if not instances and name[:1].isupper():
            continue
        fam = wn.familiarity(c)
        if instances or fam > 0:
            names.setdefault(name, fam)
    ranked = sorted(names, key=lambda k: (-names[k], k))[: max(n * 3, n)]
    rng.shuffle(ranked)
    return sorted(ranked[:n])


def build_unknown_dataset(
    per_category: int = 20,
    n_false_premise: int = 60,
    n_refunq: int = 60,
    seed: int = 0,
    wordnet_dir: str | os.PathLike | None = None,
    bench: Benchmark | None = None,
) -> UnknownDataset:
    """Build all three tasks with both partitions (deterministic for fixed arguments)."""
    from workbench.taxonomy.wordnet import WordNet, WordNetGraph

    wn = WordNet(wordnet_dir)
    graph = WordNetGraph(wn)
    if bench is None:
        from workbench.taxonomy import load_benchmark

        bench = load_benchmark()
    vocabulary = (
        wn.vocabulary()
        | {c.name.lower() for c in bench.atomic}
        | {w for c in bench.atomic for w in c.name.lower().split()}
    )
    items: list[UnknownItem] = []

    # NEC ------------------------------------------------------------------------------------
    for category, templates in NEC_TEMPLATES.items():
        rng = seeded_rng(seed, "nec:" + category)
        if category == "generic":
            pool = sorted({c.phrase for c in bench.atomic if c.kind == "class" and c.parent})
            real = sorted(rng.sample(pool, per_category))
        else:
            real = _familiar_names(
                wn,
                graph,
                NEC_SOURCES[category],
                per_category,
                rng,
                instances=category == "countries",
            )
        fake = made_up_names(per_category, category, vocabulary, seed)
        for partition, names in (("answerable", real), ("unanswerable", fake)):
            for k, name in enumerate(names):
                t = templates[k % len(templates)]
                items.append(
                    UnknownItem(
                        t.format(X=name, A=article(name)),
                        "NEC",
                        partition,
                        category,
                        label=1 if partition == "answerable" else "NEC",
                    )
                )

    # FalseQA ----------------------------------------------------------------------------------
    rng = seeded_rng(seed, "falseqa")
    pairs = []
    for offset, _, true_p, false_p in FALSE_PREMISE_FACTS:
        subjects = _familiar_names(wn, graph, (offset,), 8, rng) or [graph.name(offset)]
        for s in subjects:
            pairs.append((s, true_p, false_p))
    rng.shuffle(pairs)
    for k, (subject, true_p, false_p) in enumerate(pairs[:n_false_premise]):
        t = FALSE_PREMISE_TEMPLATES[k % len(FALSE_PREMISE_TEMPLATES)]
        items.append(
            UnknownItem(
                t.format(A=article(subject), P=true_p), "FalseQA", "answerable", "animals", label=0
            )
        )
        items.append(
            UnknownItem(
                t.format(A=article(subject), P=false_p),
                "FalseQA",
                "unanswerable",
                "animals",
                label=1,
            )
        )

    # RefuNQ ----------------------------------------------------------------------------------
    rng = seeded_rng(seed, "refunq")
    questions = []
    for offset, template in REFUNQ_SOURCES:
        for inst in wn.synsets[offset].instance_hyponyms:
            syn = wn.synsets[inst]
            name = graph.name(inst)
            answers = sorted(
                {
                    g.replace("_", " ").lower()
                    for h in syn.instance_hypernyms
                    for g in wn.synsets[h].lemmas
                }
            )
            if any(g in name.lower() for g in answers):  # the answer must not be in the question
                continue
            questions.append(
                (template, name, tuple(answers), "people" if "profession" in template else "places")
            )
            countries = sorted(
                {
                    g.replace("_", " ").lower()
                    for h in syn.part_holonyms
                    for g in wn.synsets[h].lemmas
                }
            )
            if countries and "place" in template:
                questions.append((COUNTRY_TEMPLATE, name, tuple(countries), "places"))
    questions = sorted(set(questions))
    rng.shuffle(questions)
    questions = questions[:n_refunq]
    fake_people = made_up_names(n_refunq, "people", vocabulary, seed + 1)
    fake_places = made_up_names(n_refunq, "countries", vocabulary, seed + 2)
    for k, (template, name, gold, cat) in enumerate(questions):
        items.append(UnknownItem(template.format(X=name), "RefuNQ", "answerable", cat, gold=gold))
        made_up = (fake_people if cat == "people" else fake_places)[k]
        items.append(
            UnknownItem(template.format(X=made_up), "RefuNQ", "unanswerable", cat, label="NEC")
        )

    from workbench.taxonomy.wordnet import LICENSE_NOTICE

    manifest = {
        "source": "WordNet 3.0 and the shipped taxonomy; templates and facts of our own writing",
        "license": LICENSE_NOTICE,
        "seed": seed,
        "per_category": per_category,
        "n_false_premise": n_false_premise,
        "n_refunq": n_refunq,
        "counts": {
            f"{t}/{p}": sum(i.task == t and i.partition == p for i in items)
            for t in TASKS
            for p in PARTITIONS
        },
    }
    return UnknownDataset(items, manifest)


# ---------------------------------------------------------------------------------------------
# Files in the published shape


def save_unknown_dataset(ds: UnknownDataset, directory: str | os.PathLike) -> Path:
    d = Path(directory)
    files = {}
    for task in TASKS:
        for part in PARTITIONS:
            p = d / task / f"{task}_{part}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            text = "".join(
                json.dumps(i.to_json(), ensure_ascii=False) + "\n" for i in ds.select(task, part)
            )
            write_text_atomic(p, text)
            files[f"{task}/{p.name}"] = hashlib.sha256(text.encode()).hexdigest()
    manifest = {
        **ds.manifest,
        "files": files,
        "content_hash": hashlib.sha256(
            "".join(files[k] for k in sorted(files)).encode()
        ).hexdigest(),
    }
    (d / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    ds.manifest = manifest
    return d


def _partition(task: str, filename: str, label: Any) -> str:
    if "unanswerable" in filename:
        return "unanswerable"
    if "answerable" in filename:
        return "answerable"
    if label == "NEC" or label == 1 or label is True:
        return "unanswerable"
    return "answerable"


def _label_problem(task: str, partition: str, label: Any) -> str | None:
    """Why ``label`` is not a label of this task and partition (None when it is): RefuNQ's
    answerable questions carry their gold answers as a non-empty list of strings; the others a
    0/1 flag (a boolean) or "NEC"."""
    if task == "RefuNQ" and partition == "answerable":
        if not isinstance(label, list):
            return (
                f"gold answers must be a list of strings, got {type(label).__name__} {label!r:.60}"
            )
        if not label or not all(isinstance(g, str) for g in label):
            return f"gold answers must be a non-empty list of strings, got {label!r:.60}"
        return None
    if isinstance(label, bool) or (label in (0, 1, "NEC") and not isinstance(label, float)):
        return None
    return f'label must be 0, 1 or "NEC", got {type(label).__name__} {label!r:.60}'


def _manifest_json(path: Path) -> dict:
    """A ``manifest.json`` this module wrote, or one line naming the file when it is damaged."""
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise WorkbenchError(
            f"{path}: not a manifest the workbench wrote ({str(e).splitlines()[0][:80]}): "
            "rebuild the set, or remove the file to check the folder against the release"
        ) from None
    if not isinstance(raw, dict):
        raise WorkbenchError(f"{path}: not a manifest the workbench wrote (not a JSON object)")
    return raw


def _own_manifest(d: Path):
    """The manifest of a data set this module built (``manifest.json`` with ``counts``)."""
    path = d / "manifest.json"
    if not path.is_file():
        return None
    counts = _manifest_json(path).get("counts")
    if not isinstance(counts, dict):
        return None
    bad = [k for k, v in counts.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad:
        raise WorkbenchError(
            f"{path}: count of {bad[0]!r} is {counts[bad[0]]!r}, not a number of items"
        )
    files = {
        f"{k.split('/')[0]}/{k.split('/')[0]}_{k.split('/')[1]}.json": {"items": v}
        for k, v in counts.items()
        if "/" in k
    }
    return ReleaseManifest("unknownbench", "built by workbench.unknown", files, origin=str(path))


def _read_unknownbench(d: Path):
    """(items, counts per file, digest) of the ``{task}/{task}_*.json`` files under ``d``;
    a malformed line or label is an error naming the file and line."""
    items, found = [], {}
    digest = hashlib.sha256()
    for task in TASKS:
        for p in sorted((d / task).glob(f"{task}_*.json")):
            raw = p.read_bytes()
            digest.update(f"{task}/{p.name}:".encode() + hashlib.sha256(raw).digest())
            n_items = 0
            text = decode_utf8(raw, p, "a damaged download?")
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    prompt, label = row["prompt"], row["label"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise WorkbenchError(f"{p}, line {n}: malformed item ({e})") from None
                partition = _partition(task, p.name, label)
                problem = _label_problem(task, partition, label) or (
                    None
                    if isinstance(prompt, str) and prompt.strip()
                    else f"prompt must be a non-empty string, got {prompt!r:.60}"
                )
                if problem:
                    raise WorkbenchError(f"{p}, line {n}: malformed item: {problem}")
                gold = tuple(label) if isinstance(label, list) else ()
                items.append(
                    UnknownItem(prompt, task, partition, row.get("category", ""), gold, label)
                )
                n_items += 1
            found[f"{task}/{p.name}"] = Found(n_items)
    return items, found, digest.hexdigest()


def find_unknownbench(directory: str | os.PathLike) -> Path:
    """The folder holding ``NEC/``, ``FalseQA/`` and ``RefuNQ/``: ``directory`` itself or its
    ``data/`` (so a clone of genglinliu/UnknownBench works as well as its data folder)."""
    d = Path(directory)
    for cand in (d, d / "data"):
        if any((cand / task).is_dir() for task in TASKS):
            return cand
    raise WorkbenchError(
        f"no UnknownBench data under {d} (looked for {', '.join(t + '/' for t in TASKS)} in {d} "
        f"and {d / 'data'})"
    )


def count_unknownbench(directory: str | os.PathLike) -> dict:
    """What each file under ``directory`` holds (for :mod:`workbench.releases`)."""
    return _read_unknownbench(Path(directory))[1]


def _locate_unknownbench(root: str | os.PathLike) -> tuple[Path, dict]:
    d = find_unknownbench(root)
    return d, count_unknownbench(d)


#: genglinliu/UnknownBench data/ (readme.md there lists the same six counts): 13,319 items.
UNKNOWNBENCH_RELEASE = register(
    "unknownbench",
    "github.com/genglinliu/UnknownBench @ 7283e42, data/",
    {
        "NEC/NEC_answerable.json": {"items": 2072},
        "NEC/NEC_unanswerable.json": {"items": 2078},
        "FalseQA/FalseQA_answerable.json": {"items": 2365},
        "FalseQA/FalseQA_unanswerable.json": {"items": 2365},
        "RefuNQ/RefuNQ_answerable.json": {"items": 2266},
        "RefuNQ/RefuNQ_unanswerable.json": {"items": 2173},
    },
    locate=_locate_unknownbench,
)


def load_unknownbench(directory: str | os.PathLike, allow_partial: bool = False) -> UnknownDataset:
    """Read ``NEC/``, ``FalseQA/`` and ``RefuNQ/`` JSON Lines files (ours or the published ones).

    The load is whole or an error naming what is missing: the files and item counts are
    checked against the published release's (:data:`UNKNOWNBENCH_RELEASE`), the
    ``manifest.json`` of a data set built here, or the folder's ``release_manifest.json``.
    ``allow_partial=True`` loads what is there; every item (and so every row of
    :func:`~workbench.unknown.evaluate_unknown`) records which in ``release_load``. A malformed
    item (a gold answer given as a string instead of a list, say) is an error naming the file
    and line."""
    from dataclasses import replace

    d = Path(directory)
    if not d.is_dir():
        raise WorkbenchError(f"no UnknownBench directory at {d}")
    if not any((d / task).is_dir() for task in TASKS) and (d / "data").is_dir():
        d = find_unknownbench(d)  # a clone of the repository: its data/
    items, found, digest = _read_unknownbench(d)
    if not items and not allow_partial:
        raise WorkbenchError(f"{d} holds no NEC/, FalseQA/ or RefuNQ/ files")
    manifest = None if (d / MANIFEST_FILE).is_file() else _own_manifest(d)
    record = check_release(
        "unknownbench", d, found, allow_partial, manifest or manifest_for("unknownbench", d)
    )
    items = [replace(i, release_load=record) for i in items]
    manifest_path = d / "manifest.json"
    own = _manifest_json(manifest_path) if manifest_path.is_file() else {}
    return UnknownDataset(items, own, str(d.resolve()), digest, record)
