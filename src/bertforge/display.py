"""Results that show themselves: plain dicts and lists that Jupyter renders as tables.

`Record` (a dict) and `Table` (a list of dicts) behave exactly like what they
subclass, so JSON and tests see plain data; in a notebook their `_repr_markdown_`
draws a table. `markdown_table` is also what the sweep and score reports use.
"""

from __future__ import annotations

from typing import Any


def cell(value: Any) -> str:
    """A value as a table cell: 4 significant digits, thousands separators for big numbers, – for nothing."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A GitHub markdown table of `columns` (numbers right-aligned)."""
    numeric = [all(isinstance(r.get(c), (int, float)) or r.get(c) is None for r in rows) for c in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


class Record(dict):
    """A dict shown as a two-column table (nested values are left out of the table, not of the dict)."""

    def _repr_markdown_(self) -> str:
        rows = [{"": k, "value": v} for k, v in self.items() if not isinstance(v, (dict, list))]
        return markdown_table(rows, ["", "value"])


class Table(list):
    """A list of dicts shown as a table of the given columns (default: the first row's keys)."""

    def __init__(self, rows=(), columns: list[str] | None = None):
        super().__init__(rows)
        self.columns = columns

    def _repr_markdown_(self) -> str:
        columns = self.columns or (list(self[0]) if self else [])
        return markdown_table(list(self), columns)
