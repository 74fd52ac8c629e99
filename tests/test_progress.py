"""Progress bars in a real kernel: a closed bar leaves its last state as text, not a widget
that a restarted kernel or a reopened notebook can no longer find."""

import nbformat
from nbclient import NotebookClient

WIDGET = "application/vnd.jupyter.widget-view+json"


def test_a_closed_bar_leaves_text_in_the_saved_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from workbench.progress import tqdm\n"
            "for _ in tqdm(range(3), desc='cells'): pass\n"
            "bar = tqdm(total=4, desc='stopped'); bar.update(1); bar.close()\n"
            "for _ in tqdm(range(2), desc='quiet', leave=False): pass\n"
            "for _ in tqdm(range(2), desc='off', disable=True): pass\n"
        )
    ]
    NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    outputs = nb.cells[0].outputs
    assert not any(WIDGET in o.get("data", {}) for o in outputs), outputs
    texts = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    assert len(texts) == 3, outputs
    assert texts[0].startswith("cells: 100%") and "3/3" in texts[0]
    assert texts[1].startswith("stopped:  25%") and "1/4" in texts[1]  # cut short: kept
    assert texts[2] == ""  # leave=False: nothing left


def test_outside_a_notebook_it_is_tqdm(capsys):
    from tqdm.std import tqdm as std

    from workbench.progress import tqdm

    bar = tqdm(range(2), desc="plain")
    assert isinstance(bar, std)
    list(bar)
    assert "plain: 100%" in capsys.readouterr().err
