"""The WordNet reader on a partial or wrong download: one line naming the file, never a
traceback or a quietly different taxonomy (the database is Debian's ``wordnet-base``, copied
and then cut)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.taxonomy.wordnet import WordNet


@pytest.fixture()
def copy(tmp_path, wordnet) -> Path:
    for name in ("data.noun", "cntlist.rev"):
        shutil.copy(Path(wordnet) / name, tmp_path / name)
    return tmp_path


def _cut(path: Path, keep: float, mid_line: bool = False) -> None:
    data = path.read_bytes()
    end = int(len(data) * keep)
    end = end if mid_line else data.rindex(b"\n", 0, end) + 1
    path.write_bytes(data[:end] + (b"\n" if mid_line else b""))  # a line cut, then a newline


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda p: _cut(p, 0.5), r"data.noun is incomplete: its \d+ synsets point at \d+ it lacks"),
        (lambda p: _cut(p, 0.5, mid_line=True), r"data.noun, line \d+: not a WordNet data line"),
        (
            lambda p: p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n"),
            r"data.noun, line 1: not a WordNet data line \('version https",
        ),
        (lambda p: p.write_text(""), "data.noun holds no synset"),
        (
            lambda p: p.write_bytes(p.read_bytes()[:-3]),  # the last gloss cut
            "data.noun ends mid-line",
        ),
    ],
)
def test_a_damaged_data_file_is_named_in_one_line(copy, damage, said):
    damage(copy / "data.noun")
    with pytest.raises(WorkbenchError, match=said) as e:
        WordNet(copy)
    assert "\n" not in str(e.value)


def test_the_tag_counts_are_required_not_silently_dropped(copy, capsys):
    assert len(WordNet(copy)) == 82115
    (copy / "cntlist.rev").unlink()
    with pytest.raises(WorkbenchError, match="no cntlist.rev beside .*data.noun"):
        WordNet(copy)
    from workbench.cli import main

    out = copy / "unknown"
    assert main(["unknown", "build", "--wordnet-dir", str(copy), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no cntlist.rev") and "\n" not in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("version https://git-lfs.github.com/spec/v1\noid sha256:ab\n", "line 1: not a tag count"),
        ("", "holds no noun tag count"),
        ("river%2:38:00:: 1 4\n", "holds no noun tag count"),
    ],
)
def test_a_damaged_tag_count_file_is_named_too(copy, text, said):
    """Read as no counts at all, it built a different taxonomy without a word."""
    (copy / "cntlist.rev").write_text(text)
    with pytest.raises(WorkbenchError, match=f"cntlist.rev.*{said}"):
        WordNet(copy)
