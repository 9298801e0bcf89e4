"""`falkirk draw`: a PNG of the plan; its layout; a clear error without matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import EXAMPLES, run

from falkirk.cli._layout import layout
from falkirk.cli.render import frontier_text
from falkirk.domains import Epoch, Frontier, Product, Sequence
from falkirk.solver import Dataflow, Edge, Processor

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_draw_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path, path: Path) -> None:
    """draw writes a valid, non-trivial PNG for every example (self-loops and product frontiers included)."""
    pytest.importorskip("matplotlib")
    out = tmp_path / "plan.png"
    code, stdout, err = run(capsys, "draw", str(path), "-o", str(out), "--dpi", "60")
    assert code == 0 and err == "" and stdout == f"wrote {out}\n"
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 5_000


def test_draw_into_a_missing_directory_is_a_clean_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An output path in a directory that does not exist exits 2 with one line."""
    pytest.importorskip("matplotlib")
    code, _, err = run(capsys, "draw", str(EXAMPLES[0]), "-o", str(tmp_path / "no" / "such" / "plan.png"))
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1


def test_draw_without_matplotlib_says_what_to_install(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With matplotlib unavailable, draw exits 1 and names falkirk[draw]."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run(capsys, "draw", str(EXAMPLES[0]), "-o", str(tmp_path / "p.png"))
    assert code == 1
    assert err.startswith("falkirk: error: ") and "falkirk[draw]" in err and "Traceback" not in err
    assert not (tmp_path / "p.png").exists()


def test_acyclic_graphs_are_layered_left_to_right() -> None:
    """Columns follow topological generations; each column is centred; the result is deterministic."""
    df = Dataflow(
        [Processor(n, "epoch") for n in ["a", "b", "c", "d"]],
        [Edge("ab", "a", "b"), Edge("ac", "a", "c"), Edge("bd", "b", "d"), Edge("cd", "c", "d"), Edge("dd", "d", "d")],
    )
    pos = layout(df)
    assert [pos[n][0] for n in "abcd"] == [0.0, 1.0, 1.0, 2.0]
    assert pos["b"][1] == -pos["c"][1] != 0 and pos["a"][1] == pos["d"][1] == 0.0
    assert layout(df) == pos


def test_cyclic_graphs_fall_back_to_a_seeded_spring_layout() -> None:
    """A cycle gets distinct positions, the same on every call."""
    cyclic = Dataflow([Processor("a", "epoch"), Processor("b", "epoch")], [Edge("x", "a", "b"), Edge("y", "b", "a")])
    pos = layout(cyclic)
    assert pos == layout(cyclic) and len(set(pos.values())) == 2


def test_frontier_text_is_short_and_readable() -> None:
    """⊤/∅ symbols, epoch integers, edge counts and before-antichains as compact text."""
    assert frontier_text(Frontier.top(Epoch())) == "⊤"
    assert frontier_text(Frontier.empty(Epoch())) == "∅"
    assert frontier_text(Epoch().frontier(3)) == "3"
    assert frontier_text(Sequence(["a", "b"]).frontier({"a": 3, "b": "top"})) == "a:3 b:⊤"
    assert frontier_text(Frontier.upto(Product(2), [(0, 4)])) == "before (0,5) (1,0)"
