"""The imported rows' columns (the experiment runner's first, then the import's own, SELECT's
stored flags among them) and their pyarrow schema, the same for every chunk."""

from __future__ import annotations

#: SELECT's stored refusal flags -> columns.
SELECT_FLAGS = {
    "phrase": "select_flag_phrase",
    "keyword": "select_flag_keyword",
    "phr+kw": "select_flag_phr_kw",
    "heuristic": "select_flag_heuristic",
}

INT_COLUMNS = ("target_level", "seed", "question_index", "sample", "n_tokens")
FLOAT_COLUMNS = ("cell_seconds", "logprob")
BOOL_COLUMNS = ("phrase_partial", "gate_fired", "joined", *SELECT_FLAGS.values())
#: Column order: the runner's columns first, then the import's own.
LEADING = (
    "run",
    "model",
    "model_id",
    "revision",
    "technique",
    "technique_nature",
    "technique_params",
    "target",
    "target_name",
    "target_kind",
    "target_level",
    "target_root",
    "seed",
    "config_hash",
    "versions",
    "cell_seconds",
    "question_concept",
    "relation",
    "question_index",
    "question",
    "sample",
    "response",
    "n_tokens",
    "finish_reason",
    "logprob",
)
TRAILING = (
    "phrase_partial",
    "phrase_kind",
    "phrase_match",
    "gate_fired",
    "eval_type",
    "partition",
    "select_technique",
    "select_model",
    "select_relation",
    "select_concept",
    "instance_id",
    "joined",
    "response_complete",
    *SELECT_FLAGS.values(),
    "source_file",
    "source_sha256",
)
#: Every other column holds text.
STRING_COLUMNS = tuple(
    c for c in (*LEADING, *TRAILING) if c not in {*INT_COLUMNS, *FLOAT_COLUMNS, *BOOL_COLUMNS}
)


def schema(detector_names: list[str]):
    """The pyarrow schema of imported rows (every chunk has exactly this one)."""
    import pyarrow as pa

    def typ(c: str):
        if c in INT_COLUMNS:
            return pa.int64()
        if c in FLOAT_COLUMNS:
            return pa.float64()
        if c in BOOL_COLUMNS or c.startswith("refused_"):
            return pa.bool_()
        return pa.string()

    cols = [*LEADING, *(f"refused_{n}" for n in detector_names), *TRAILING]
    return pa.schema([(c, typ(c)) for c in cols])
