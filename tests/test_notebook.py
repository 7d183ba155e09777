"""The learners' notebook runs top to bottom on the toy corpus, and carries no stale outputs."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import needs

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "bert_from_scratch.ipynb"


def test_the_committed_notebook_has_no_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    assert all(
        not cell.get("outputs") and not cell.get("execution_count") for cell in cells if cell["cell_type"] == "code"
    )


def test_the_notebook_runs_top_to_bottom():
    nbclient = needs("nbclient")
    nbformat = needs("nbformat")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # 60 s for the whole notebook on a quiet 2-core machine; a cell hit 120 s with the machine oversubscribed.
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    tables = [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert (
        len(images) >= 5 and len(tables) >= 3
    )  # heatmaps, curves, bars, attention; parameter, metric and answer tables
    text = "".join(o.get("text", "") for o in outputs)
    assert "transformers:" in text and "bertforge:" in text
