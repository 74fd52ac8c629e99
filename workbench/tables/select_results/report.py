"""An import's report: what it read, what was absent or unreadable, and whether the release
was whole (what every row records)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class ImportReport:
    """What an import read, what it could not, and where the rows went."""

    run_dir: Path
    release_dir: str
    expected: int = 0
    read: list[dict] = field(default_factory=list)  # per file: path, sha256, rows, counts
    absent: list[str] = field(default_factory=list)
    unreadable: list[dict] = field(default_factory=list)  # {path, reason}
    rows: int = 0
    unjoined: int = 0
    ambiguous: int = 0
    unknown_targets: int = 0
    seconds: float = 0.0
    detectors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    release_load: str = "whole"  # or "partial: ..." (what every row records)

    @property
    def results_path(self) -> Path:
        return Path(self.run_dir) / "results.parquet"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir)
        return d

    def summary(self) -> str:
        resumed = sum(1 for f in self.read if f.get("resumed"))
        lines = [
            f"SELECT results from {self.release_dir} -> {self.results_path}",
            f"files: {self.expected} expected, {len(self.read)} read ({resumed} from earlier "
            f"chunks), {len(self.absent)} absent, {len(self.unreadable)} unreadable",
            f"rows: {self.rows}; ids not joined to a question: {self.unjoined}; joined to "
            f"more than one candidate concept: {self.ambiguous}; rows whose target the "
            f"benchmark lacks: {self.unknown_targets}",
            f"detectors: {', '.join(self.detectors)}",
            f"release: {self.release_load}",
            f"wall time: {self.seconds:.1f}s",
        ]
        if self.absent or self.unreadable:
            lines.append(self.missing_lines())
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def missing_lines(self) -> str:
        """One line per absent or unreadable file."""
        return "\n".join(
            [f"absent: {p}" for p in self.absent]
            + [f"unreadable: {u['path']}: {u['reason']}" for u in self.unreadable]
        )


def _check_whole(report: ImportReport, root: Path, allow_partial: bool) -> None:
    """Set ``report.release_load``: "whole", or with ``allow_partial`` "partial: ..." naming
    the absent and unreadable files; without it a :class:`ReleaseError` in one line."""
    from workbench.errors import some_of
    from workbench.releases import RELEASE_COLUMN, ReleaseError

    if not report.absent and not report.unreadable:
        report.release_load = "whole"
        return

    def some(paths: list[str]) -> str:
        return some_of(paths, 4)

    got = report.expected - len(report.absent) - len(report.unreadable)
    parts = [f"{got:,} of {report.expected:,} files"]
    if report.absent:
        parts.append(f"absent {some(report.absent)}")
    if report.unreadable:
        parts.append(
            "unreadable " + some([f"{u['path']} ({u['reason']})" for u in report.unreadable])
        )
    summary = "; ".join(parts)
    if allow_partial:
        report.release_load = f"partial: {summary}"
        return
    raise ReleaseError(
        f"SELECT's results at {root} are incomplete against what its config/ "
        f"lists: {summary}; get the whole release, or pass allow_partial=True "
        f"(--allow-partial) to import what is there, recorded in every row's "
        f"{RELEASE_COLUMN}"
    )
