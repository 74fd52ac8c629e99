"""Paper-ready output: LaTeX summary tables (booktabs, ± intervals, best in bold, a caption
naming model, n and interval method) and figures that save to the same bytes at paper widths."""

import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from workbench.tables import latex_table, to_latex


def _select_rows(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for technique, p in (("zero_shot", 0.3), ("steering", 0.7)):
        for target in ("yago:River", "yago:Lake", "schema:Movie"):
            for relation in ("target", "descendant", "sibling", "unrelated"):
                for _ in range(5):
                    rows.append(
                        {
                            "model": "org/tiny_model",
                            "technique": technique,
                            "target": target,
                            "target_kind": "atomic",
                            "target_name": target.split(":")[1],
                            "target_level": 2,
                            "relation": relation,
                            "seed": 0,
                            "refused_phrase": bool(rng.random() < p),
                        }
                    )
    return pd.DataFrame(rows)


def test_latex_table_of_a_small_table_exactly():
    frame = pd.DataFrame(
        {
            "technique": ["zero_shot", "steering", "sft & co"],
            "abstention": [0.5, 0.75, 0.75],
            "abstention_ci": [0.1, 0.05, float("nan")],
            "specificity": [0.9, float("nan"), 0.25],
            "specificity_ci": [0.02, 0.1, 0.3],
        }
    )
    text = latex_table(
        frame,
        ["technique"],
        ["abstention", "specificity"],
        ci={"abstention": "abstention_ci", "specificity": "specificity_ci"},
        caption="Rates. Model: m; $n$ = 3",
        label="tab:rates",
    )
    assert (
        text
        == "\n".join(
            [
                r"\begin{table}[t]",
                r"\centering",
                r"\caption{Rates. Model: m; $n$ = 3}",
                r"\label{tab:rates}",
                r"\begin{tabular}{lrr}",
                r"\toprule",
                r"technique & abstention & specificity \\",
                r"\midrule",
                r"zero\_shot & 0.50 $\pm$ 0.10 & \textbf{0.90 $\pm$ 0.02} \\",
                r"steering & \textbf{0.75 $\pm$ 0.05} & -- \\",  # ties are all bold; missing is --
                r"sft \& co & \textbf{0.75} & 0.25 $\pm$ 0.30 \\",
                r"\bottomrule",
                r"\end{tabular}",
                r"\end{table}",
            ]
        )
        + "\n"
    )
    low = latex_table(frame, ["technique"], ["specificity"], best="min", percent=True, digits=0)
    assert r"sft \& co & \textbf{25} \\" in low and r"zero\_shot & 90 \\" in low


def _summaries():
    from workbench.editing.evaluate import edit_metrics
    from workbench.experiments.report import summary_table
    from workbench.scoring.metrics import select_table, technique_table
    from workbench.tables.select_compare import side_by_side, technique_summary
    from workbench.unknown import summarize_unknown

    rows = _select_rows()
    released = _select_rows(1).assign(model="Gemma-2-IT-2B")
    unknown = pd.DataFrame(
        {
            "task": ["NEC"] * 4 + ["RefuNQ"] * 4,
            "partition": ["answerable", "unanswerable"] * 4,
            "refused_phrase": [False, True, True, True, False, False, True, False],
            "refused_keyword": [False] * 8,
            "refused_unknownbench": [False, True] * 4,
            "correct": [None, None, None, None, True, None, False, None],
            "confidence": [3, 8, 5, None, 9, 2, 7, 1],
            "entropy": np.linspace(0.1, 0.8, 8),
            "perplexity": np.linspace(5, 12, 8),
            "prompt_preset": "workbench",
        }
    )
    scored = pd.DataFrame(
        {
            "editor": ["ft"] * 4 + ["rome"] * 4,
            "property": ["category", "sound", "legs", "sound"] * 2,
            "answer_changed": [True, True, False, True] * 2,
            "correct": [True, False, True, True, True, True, False, True],
            "chance": 0.25,
            "direction": "forward",
            "token_type": "typical",
            "group": "animal",
        }
    )
    return {
        "select": (select_table(rows), {}, "Student-t"),
        "technique": (technique_table(rows, n_boot=20), {}, "bootstrap"),
        "technique_select": (
            technique_summary(rows, "refused_phrase", aggregate="select"),
            {},
            "Student-t",
        ),
        "side_by_side": (side_by_side(rows, released, "refused_phrase"), {}, "Student-t"),
        "unknown": (
            pd.concat(
                [
                    summarize_unknown(unknown).assign(model="org/a"),
                    summarize_unknown(unknown.assign(refused_phrase=False)).assign(model="org/b"),
                ]
            ),
            {},
            "Wald",
        ),
        "editing": (edit_metrics(scored), {"model": "org/tiny_model"}, "Wald"),
        "concepts": (summary_table(rows), {}, "no intervals"),
    }


@pytest.mark.parametrize(
    "kind",
    ["select", "technique", "technique_select", "side_by_side", "unknown", "editing", "concepts"],
)
def test_every_summary_table_has_a_paper_ready_latex(kind):
    table, kwargs, method = _summaries()[kind]
    text = to_latex(table, label=f"tab:{kind.replace('_', '-')}", **kwargs)
    assert text.startswith(r"\begin{table}[t]") and text.rstrip().endswith(r"\end{table}")
    assert text.count(r"\toprule") == text.count(r"\bottomrule") == 1 and r"\midrule" in text
    assert (
        (r"$\pm$" in text) == (kind != "concepts")
        and r"\textbf{" in text
        and r"\label{tab:" in text
    )
    caption = re.search(r"\\caption\{(.*)\}\n", text).group(1)
    assert "Model" in caption and "$n$ = " in caption and method in caption
    assert "95" in caption or kind == "concepts"
    assert "org/tiny\\_model" in caption or "org/a" in caption
    assert "_" not in text.replace(r"\_", "")  # escaped
    assert text == to_latex(table, label=f"tab:{kind.replace('_', '-')}", **kwargs)  # same bytes


def test_unknown_bold_follows_the_partition():
    table, _, _ = _summaries()["unknown"]
    text = to_latex(table)
    # on unanswerable questions more refusal is better, on answerable ones less
    nec_unans = [ln for ln in text.splitlines() if ln.startswith("NEC & unanswerable")]
    nec_ans = [ln for ln in text.splitlines() if ln.startswith("NEC & answerable")]
    assert nec_unans[0].split(" & ")[3].startswith(r"\textbf{1.00")  # org/a refuses all
    assert nec_ans[1].split(" & ")[3].startswith(r"\textbf{0.00")  # org/b refuses none


def _booktabs() -> bool:
    if shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None:
        return False
    return bool(
        subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True).stdout.strip()
    )


@pytest.mark.skipif(
    not _booktabs(),
    reason="no pdflatex with booktabs (Debian: texlive-latex-recommended; "
    "scripts/system_deps.sh installs it)",
)
def test_latex_tables_compile(tmp_path):
    body = "\n".join(to_latex(t, **kw) for t, kw, _ in _summaries().values())
    (tmp_path / "t.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n"
        "\\begin{document}\n" + body + "\\end{document}\n"
    )
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert (tmp_path / "t.pdf").stat().st_size > 1000


# -- figures ----------------------------------------------------------------------------------
def _figures(out):
    from workbench.plots import new_figure, save_figure
    from workbench.plots.select import plot_technique_metrics
    from workbench.scoring.metrics import technique_table

    table = technique_table(_select_rows(), n_boot=20)
    paths = save_figure(plot_technique_metrics(table, "atomic concepts", 20), "techniques", out)
    paths += save_figure(plot_technique_metrics(table), "techniques_column", out, width="column")
    fig = new_figure("page", 2.0)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0.2, 0.5, 0.4], label="steering")
    ax.set_title("Rates — α")
    ax.legend()
    return paths + save_figure(fig, "line", out)


def test_exporting_the_same_figures_twice_leaves_git_status_clean(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    paths = _figures(tmp_path / "figures")
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "figures"], check=True)
    assert _figures(tmp_path / "figures") == paths
    status = subprocess.run(
        git + ["status", "--porcelain"], capture_output=True, text=True, check=True
    )
    assert status.stdout == ""
    from PIL import Image

    for p in paths:
        raw = p.read_bytes()
        if p.suffix == ".pdf":
            assert b"CreationDate" not in raw and b"ModDate" not in raw
        else:
            info = Image.open(p).info  # matplotlib's software line only: no date or time
            assert set(info) <= {"Software", "dpi"} and "Creation Time" not in info, info


def test_paper_width_presets(tmp_path):
    from PIL import Image

    from workbench.errors import ConfigError
    from workbench.plots import FIGURE_WIDTHS, new_figure, save_figure

    assert FIGURE_WIDTHS == {"column": 3.25, "page": 6.75}
    for width, points in (("column", 234), ("page", 486), (5, 360)):
        fig = new_figure(6, 3)
        fig.add_subplot().plot([1, 2], [2, 1])
        pdf, png = save_figure(fig, f"w{width}", tmp_path, dpi=100, width=width)
        box = re.search(rb"MediaBox \[ 0 0 ([\d.]+) ([\d.]+) \]", pdf.read_bytes())
        assert float(box.group(1)) == points and float(box.group(2)) == points / 2  # aspect kept
        assert Image.open(png).size[0] == round(points / 72 * 100)
    with pytest.raises(ConfigError, match="unknown figure width 'wide'"):
        new_figure("wide", 2)
