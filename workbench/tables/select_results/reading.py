"""Reading one results file: the gzipped JSON checked (a Git LFS pointer, a truncated or
corrupt gzip, invalid JSON, an unexpected shape) and its nested records walked in file
order."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from workbench.tables.select_results.release import LFS_REASON, SelectResultsError
from workbench.taxonomy.select_format.protocol import is_lfs_pointer


def read_results(path: Path, raw: bytes | None = None) -> dict:
    """A results file's nested dict; :class:`SelectResultsError` names why it cannot be read
    (a Git LFS pointer, a truncated or corrupt gzip, invalid JSON, an unexpected shape)."""
    raw = path.read_bytes() if raw is None else raw
    if is_lfs_pointer(raw):
        raise SelectResultsError(LFS_REASON)
    try:
        text = gzip.decompress(raw)
    except EOFError:
        raise SelectResultsError("truncated gzip (the download stopped early)") from None
    except (gzip.BadGzipFile, zlib.error, OSError) as e:
        raise SelectResultsError(f"not a readable gzip file ({e})") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SelectResultsError(f"invalid JSON ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SelectResultsError("not SELECT's {seed: {concept: {id: record}}} nesting")
    return data


def _iter_records(partition: str, data: dict):
    """(seed, relation, concept key, instance id, record) in file order."""
    for seed, per_seed in data.items():
        if partition == "compositions":
            for relation, per_rel in per_seed.items():
                if not isinstance(per_rel, dict):
                    raise SelectResultsError(f"seed {seed}: relation {relation!r} is not an object")
                for key, recs in per_rel.items():
                    if not isinstance(recs, dict):
                        raise SelectResultsError(
                            f"seed {seed}: {relation!r}/{key!r} is not an object"
                        )
                    yield seed, relation, key, recs
        else:
            for key, recs in per_seed.items():
                if not isinstance(recs, dict):
                    raise SelectResultsError(f"seed {seed}: concept {key!r} is not an object")
                yield seed, None, key, recs
