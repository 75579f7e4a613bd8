"""Formats benchmark rows as a text table, Markdown, and a bar plot."""

from __future__ import annotations

from dataclasses import dataclass

HEADER = ("op", "case", "dtype", "ours ms", "pytorch", "pytorch ms", "ours/pytorch", "ours %copy", "pytorch %copy")


@dataclass
class Row:
    op: str
    case: str
    dtype: str
    ours_ms: float
    baseline: str
    pytorch_ms: float
    ours_share: float  # achieved bandwidth / copy bandwidth
    pytorch_share: float

    def cells(self) -> tuple[str, ...]:
        return (self.op, self.case, self.dtype, f"{self.ours_ms:.4f}", self.baseline, f"{self.pytorch_ms:.4f}",
                f"{self.ours_ms / self.pytorch_ms:.2f}", f"{100 * self.ours_share:.0f}%",
                f"{100 * self.pytorch_share:.0f}%")


def columns(lines: list[tuple[str, ...]]) -> str:
    """Lines of cells (the first is the header) as left-aligned text columns."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)) for line in lines)


def text_table(rows: list[Row]) -> str:
    return columns([HEADER] + [r.cells() for r in rows])


def markdown_table(preamble: str, header, cells) -> str:
    """preamble, then a Markdown table of header and rows of cells."""
    lines = [preamble, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines) + "\n"


def markdown(rows: list[Row], preamble: str) -> str:
    return markdown_table(preamble, HEADER, [r.cells() for r in rows])


def plot(rows: list[Row], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(f"{r.op}\n{r.case}\n{r.dtype}" for r in rows))
    series: dict[str, list[float]] = {"customops": [0.0] * len(cases)}
    for r in rows:
        i = cases.index(f"{r.op}\n{r.case}\n{r.dtype}")
        series["customops"][i] = 100 * r.ours_share
        series.setdefault(f"pytorch {r.baseline}", [0.0] * len(cases))[i] = 100 * r.pytorch_share
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(cases)), 4.5))
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series.items()):
        ax.bar([i + k * width for i in range(len(cases))], values, width, label=name)
    ax.axhline(100, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(cases))], cases, fontsize=7)
    ax.set_ylabel("achieved bandwidth, % of measured copy")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
