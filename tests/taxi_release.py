"""Rows in the shape of taxi's released ``datasets/edits-evaluation.json``, our own content."""


def taxi_rows():
    """Rows in the shape of taxi's released datasets/edits-evaluation.json (our own content):
    'category_membership' queries with '<answer>' slots, reverse answers '<subj>', a reverse
    query whose slot sits before the end, a non-unique 'index' column."""
    base = {"entity": "dog", "orig_entity": "cat", "token_type": "typical", "edit_type": "category membership",
            "edit": "Siamese -> dog", "subj": "Siamese", "answer_rev": "<subj>", "orig_answer_rev": "<subj>",
            "foil1": None, "foil2": None, "foil3": None, "superordinate_category": "animal"}
    return [
        {**base, "index": 0, "property": "category_membership", "query_fwd": "a <subj> is a kind of <answer>",
         "query_rev": "a <subj> is a kind of <answer>", "answer_changed": True,
         "fwd_choices": ["dog", "cat", "cow"], "rev_choices": ["Siamese", "Holstein", "Beagle"],
         "answer_fwd": "dog", "orig_answer_fwd": "cat"},
        {**base, "index": 1, "property": "makes_sound", "query_fwd": "a sound a <subj> makes is <answer>",
         "query_rev": "<answer> is a sound made by a <subj>", "answer_changed": True,
         "fwd_choices": ["bark", "meow", "moo"], "rev_choices": ["Siamese", "Holstein"],
         "answer_fwd": "bark", "orig_answer_fwd": "meow"},
        {**base, "index": 0, "edit": "Holstein -> dog", "subj": "Holstein", "orig_entity": "cow",
         "token_type": "rare", "property": "leg_count", "query_fwd": "<subj> have <answer>",
         "query_rev": "one animal that has <answer> is <subj>", "answer_changed": False,
         "fwd_choices": ["four legs", "two legs"], "rev_choices": ["Holstein", "Siamese"],
         "answer_fwd": "four legs", "orig_answer_fwd": "four legs"},
    ]
