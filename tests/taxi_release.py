"""Rows in the shape of taxi's released ``datasets/edits-evaluation.json``, our own content."""


def taxi_rows():
    """Rows in the shape of taxi's released datasets/edits-evaluation.json (our own content):
    'category_membership' queries with '<answer>' slots, reverse answers '<subj>', a reverse
    query whose slot sits before the end, a non-unique 'index' column."""
    base = {
        "entity": "dog",
        "orig_entity": "cat",
        "token_type": "typical",
        "edit_type": "category membership",
        "edit": "Siamese -> dog",
        "subj": "Siamese",
        "answer_rev": "<subj>",
        "orig_answer_rev": "<subj>",
        "foil1": None,
        "foil2": None,
        "foil3": None,
        "superordinate_category": "animal",
    }
    return [
        {
            **base,
            "index": 0,
            "property": "category_membership",
            "query_fwd": "a <subj> is a kind of <answer>",
            "query_rev": "a <subj> is a kind of <answer>",
            "answer_changed": True,
            "fwd_choices": ["dog", "cat", "cow"],
            "rev_choices": ["Siamese", "Holstein", "Beagle"],
            "answer_fwd": "dog",
            "orig_answer_fwd": "cat",
        },
        {
            **base,
            "index": 1,
            "property": "makes_sound",
            "query_fwd": "a sound a <subj> makes is <answer>",
            "query_rev": "<answer> is a sound made by a <subj>",
            "answer_changed": True,
            "fwd_choices": ["bark", "meow", "moo"],
            "rev_choices": ["Siamese", "Holstein"],
            "answer_fwd": "bark",
            "orig_answer_fwd": "meow",
        },
        {
            **base,
            "index": 0,
            "edit": "Holstein -> dog",
            "subj": "Holstein",
            "orig_entity": "cow",
            "token_type": "rare",
            "property": "leg_count",
            "query_fwd": "<subj> have <answer>",
            "query_rev": "one animal that has <answer> is <subj>",
            "answer_changed": False,
            "fwd_choices": ["four legs", "two legs"],
            "rev_choices": ["Holstein", "Siamese"],
            "answer_fwd": "four legs",
            "orig_answer_fwd": "four legs",
        },
    ]


def write_taxi_release(directory, rows=None, describe: bool = True):
    """``directory/edits-evaluation.json`` in taxi's column-oriented shape (``rows``: by default
    :func:`taxi_rows`) and, with ``describe``, the ``release_manifest.json`` that says this
    small release is whole; returns the file's path."""
    from pathlib import Path

    import pandas as pd

    from workbench.editing.data import count_taxi
    from workbench.releases import describe as write_manifest

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "edits-evaluation.json"
    path.write_text(pd.DataFrame(taxi_rows() if rows is None else rows).to_json(orient="columns"))
    if describe:
        write_manifest("taxi", directory, count_taxi(path), source="tests/taxi_release.py")
    return path


#: Rows and edits per superordinate category of taxi's released file (5,560 rows, 976 edits).
PUBLISHED_GROUPS = {
    "animal": (1912, 224),
    "drink": (664, 120),
    "food": (688, 168),
    "instrument": (920, 120),
    "plant": (656, 224),
    "vehicle": (720, 120),
}


def published_size_rows():
    """5,560 rows of our own content with the released file's counts: rows and edits per
    superordinate category as released."""
    base = taxi_rows()[1]
    out = []
    for group, (n_rows, n_edits) in PUBLISHED_GROUPS.items():
        for i in range(n_rows):
            k = i % n_edits
            out.append(
                {
                    **base,
                    "index": len(out),
                    "edit": f"{group}{k} -> dog",
                    "subj": f"{group}{k}",
                    "superordinate_category": group,
                }
            )
    return out


def food_rows():
    """Rows with the released file's two defects, in our own words: a property whose reverse
    template repeats the answer slot (and whose forward template, for one category, has no
    slot), as the release has before the authors' TSV fix; and a subject released with a
    trailing space ('Brie ', two edits). ``fixed_tsv()`` holds the corrected templates."""
    base = {
        "token_type": "rare",
        "edit_type": "category membership",
        "foil1": None,
        "foil2": None,
        "foil3": None,
        "superordinate_category": "food",
        "answer_rev": "<subj>",
        "orig_answer_rev": "<subj>",
        "answer_changed": True,
        "index": 0,
    }
    rows = []
    for subj, old, new in (
        ("Brie ", "cheese", "bread"),
        ("Brie ", "cheese", "fruit"),
        ("Gouda", "cheese", "bread"),
    ):
        edit = f"{subj} -> {new}"
        made = {"bread": "ground wheat", "fruit": "a flowering tree"}[new]
        fwd = "<subj> is made from" if new == "bread" else "<subj> is made from <answer>"
        rows.append(
            {
                **base,
                "entity": new,
                "orig_entity": old,
                "edit": edit,
                "subj": subj,
                "property": "category_membership",
                "query_fwd": "a <subj> is a kind of <answer>",
                "query_rev": "a <subj> is a kind of <answer>",
                "fwd_choices": [new, old],
                "rev_choices": [subj, "Baguette"],
                "answer_fwd": new,
                "orig_answer_fwd": old,
            }
        )
        rows.append(
            {
                **base,
                "entity": new,
                "orig_entity": old,
                "edit": edit,
                "subj": subj,
                "property": "made_from",
                "query_fwd": fwd,
                "query_rev": "<answer> is what makes <answer>",
                "fwd_choices": [made, "curdled milk"],
                "rev_choices": [subj, "Baguette"],
                "answer_fwd": made,
                "orig_answer_fwd": "curdled milk",
            }
        )
    return rows


def fixed_tsv():
    """The taxonomy TSV of the 'food' group with the corrected templates (our own words)."""
    head = "entity\tproperty\tquery_fwd\tquery_rev\tanswer_fwd\tanswer_rev\tfoil1\tfoil2\tfoil3\n"
    return head + "".join(
        f"{e}\tmade_from\t<subj> is made from <answer>\t<answer> is what makes <subj>\t{a}\t<subj>\t\t\t\n"
        for e, a in (
            ("bread", "ground wheat"),
            ("fruit", "a flowering tree"),
            ("cheese", "curdled milk"),
        )
    )


#: A stand-in for the clone's easyeditor/custom/custom.py (our own wording, the release's shape:
#: f-strings inside ``edit_and_evaluate``; a property edit's prefix comes after the category one).
CUSTOM_PY = """
def edit_and_evaluate(edits_df, eval_df, model, edit_method):
    for e in edits_df.itertuples():
        if e.edit_type == "category membership":
            if edit_method in ["ROME", "FT"]:
                rewrite = {'prompts': [f'Consider the {e.subj}, which belongs to'], 'target_new': [e.entity]}
            elif edit_method == "ICE":
                model.edit({"preprompt": f"Suppose {e.subj} were one {e.entity} {{really}}!\\n"})
        else:
            model.edit({"preprompt": f"Suppose {e.query_fwd} ...\\n\\n"})
"""

COMPUTE_V_PY = """
def compute_v(request, context_templates, tok, target_ids):
    rewriting_prompts, kl_prompts = [
        context.format(request["prompt"]) for context in context_templates
    ], ["{} means"]
    return rewriting_prompts + kl_prompts
"""

FT_YAML = (
    "alg_name: FT\nlayers: [21]\nnum_steps: 25\nlr: 5e-4\nweight_decay: 0\nnorm_constraint: false\n"
)
ROME_YAML = (
    "alg_name: ROME\nlayers: [5]\nv_num_grad_steps: 25\nv_lr: 5e-1\nv_weight_decay: 1e-3\n"
    "clamp_norm_factor: 4\nkl_factor: 0.0625\nmom2_adjustment: true\n"
    "context_template_length_params: [[5, 10], [10, 10]]\n"
)


def write_clone(root, rows=None, tsv=True, code=True):
    """A folder in the shape of a taxi clone: datasets/edits-evaluation.json (``rows``, default
    ``taxi_rows() + food_rows()``), taxonomy/{food,animal}-data.tsv (``tsv``), the two Python files the
    protocol text is read from and the editors' YAML settings (``code``). Returns ``root``."""
    rows = taxi_rows() + food_rows() if rows is None else rows
    write_taxi_release(root / "datasets", rows)  # with the manifest that says it is whole
    if tsv:
        (root / "taxonomy").mkdir(exist_ok=True)
        (root / "taxonomy" / "food-data.tsv").write_text(fixed_tsv())
        # every group of the edits has its TSV in a clone; this one corrects nothing here (a
        # row stopping before its last foils, as the clone's do)
        (root / "taxonomy" / "animal-data.tsv").write_text(
            fixed_tsv().splitlines(True)[0]
            + "cow\tsound\t<subj> says <answer>\t<answer> is what <subj> says\tmoo\t<subj>\tneigh\n"
        )
    if code:
        for rel, text in (
            ("easyeditor/custom/custom.py", CUSTOM_PY),
            ("easyeditor/models/rome/compute_v.py", COMPUTE_V_PY),
            ("hparams/FT/llama-7b.yaml", FT_YAML),
            ("hparams/ROME/llama-7b.yaml", ROME_YAML),
        ):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    return root
