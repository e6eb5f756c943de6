"""The house's rules, checked on the source: what may import what, no import cycles, ui/ in rooms, pages as glue."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ui's rooms, lowest first: a room imports only from itself and the rooms before it.
ROOMS = ("charts", "state", "figures", "models", "compute", "sections")
MAX_PAGE_LINES = 150
MAX_UI_MODULES = 12


def import_statements(path: Path, package: str | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """Every import a file runs, anywhere in it (a function's body too), as (module, names): ``import a.b`` gives
    ("a.b", ()), ``from a.b import c, d`` ("a.b", ("c", "d")). Relative imports (``from ..checks import x``, used
    in transformer/) are resolved against ``package``, the file's package, and skipped without it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # ``if TYPE_CHECKING:`` imports are for the type checker, not at run time
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            elif package is None:
                continue
            else:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            found.append((base, tuple(alias.name for alias in node.names)))
    return found


def imports(path: Path) -> set[str]:
    """Every module a file imports at run time (absolute; ``from . import x`` is not used in ui/), with
    ``from a.b import c`` giving both ``a.b`` and ``a.b.c`` (c may be a module)."""
    return {name for base, names in import_statements(path) for name in (base, *(f"{base}.{n}" for n in names))}


def module_name(path: Path) -> str:
    """``ui/compute/heads.py`` -> ``ui.compute.heads``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """The project's modules (ui/ and transformer/) and, for each, the project modules it imports at run time."""
    files = {module_name(p): p for top in ("ui", "transformer") for p in (ROOT / top).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for base, names in import_statements(path, package):
            submodules = {f"{base}.{n}" for n in names} & files.keys()
            graph[name] |= submodules
            # ``from . import sibling`` needs the own package, already being imported: no edge back to it
            if base in files and not (names and len(submodules) == len(names) and name.startswith(f"{base}.")):
                graph[name].add(base)
        graph[name].discard(name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as its modules in order (the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_package_never_imports_the_app_or_streamlit_or_transformers():
    for path in (ROOT / "transformer").rglob("*.py"):
        bad = {m for m in imports(path) if m.split(".")[0] in ("ui", "streamlit", "transformers", "pages")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_no_import_cycles_in_ui_and_the_package():
    """A cycle works only in one import order and breaks when the other module is imported first; one hidden in a
    function's body (imported on first call) is a cycle all the same."""
    graph = import_graph()
    assert {"ui.compute.heads", "transformer.text.tokenizers", "transformer.checks"} <= set(graph)
    assert "transformer.checks" in graph["transformer.text.tokenizers"]  # ``from ..checks import``: resolved
    assert "transformer.pipeline" in graph["ui.compute.head_reports"]  # an import inside ``main()``: counted
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle_through_several_modules():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room):
    allowed = set(ROOMS[: ROOMS.index(room) + 1])
    for path in (ROOT / "ui" / room).rglob("*.py"):
        used = {m.split(".")[1] for m in imports(path) if m.startswith("ui.") and len(m.split(".")) > 1}
        assert used <= allowed, f"{path.relative_to(ROOT)} imports ui rooms {sorted(used - allowed)}"


# ui/figures: how a figure reaches the browser (margins, text sizes, house style, crowded ticks, the projector's
# restyle, the figure cache). Chart modules only build figures; the rest of the app uses the package's entry point.
FIGURES = ROOT / "ui" / "figures"
MACHINERY = {p.stem for p in FIGURES.glob("*.py")} - {"__init__"}
# the light imports of a submodule from outside: the Model page's SVG diagram measures its text before Plotly, the
# sidebar's language menus measure their labels
FIGURES_SUBMODULES_ALLOWED = {"ui/sections/architecture.py": {"ui.figures.text_size"},
                              "ui/sections/languages.py": {"ui.figures.text_size"}}


def figure_machinery_imported(path: Path) -> set[str]:
    """The submodules of ui.figures that ``path`` imports (``from ui.figures import show_chart`` is not one)."""
    parts = [m.split(".") for m in imports(path) if m.startswith("ui.figures.")]
    return {".".join(p[:3]) for p in parts if p[2] in MACHINERY}


def test_no_chart_module_imports_the_figure_machinery():
    assert {"margins", "text_size", "house_style", "crowding", "projector", "cache"} <= MACHINERY
    for path in (ROOT / "ui" / "charts").rglob("*.py"):
        name = path.relative_to(ROOT)
        assert path.stem not in MACHINERY, f"{name}: the figure machinery lives in ui/figures"
        used = {m for m in imports(path) if m == "ui.figures" or m.startswith("ui.figures.")}
        assert not used, f"{name} imports {sorted(used)}: a chart module builds a plain figure, ui.figures shows it"


def test_pages_and_sections_use_the_figures_entry_point():
    outside = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
               *(p for p in (ROOT / "ui").rglob("*.py") if FIGURES not in p.parents)]
    for path in outside:
        name = path.relative_to(ROOT).as_posix()
        used = figure_machinery_imported(path) - FIGURES_SUBMODULES_ALLOWED.get(name, set())
        assert not used, f"{name} imports {sorted(used)}: use the entry point, ``from ui.figures import ...``"


# Widgets (what a user sets or clicks), layout and content drawn on the page. ui/compute/ computes and caches; it
# may report on its own work (st.progress, st.empty, and a warning when the work was cut), nothing else.
DRAWING = {"button", "checkbox", "code", "columns", "container", "data_editor", "dataframe", "download_button",
           "expander", "file_uploader", "form", "header", "json", "latex", "markdown", "metric", "multiselect",
           "number_input", "plotly_chart", "radio", "segmented_control", "select_slider", "selectbox", "sidebar",
           "slider", "subheader", "table", "tabs", "text", "text_area", "text_input", "title", "toggle", "write"}


def streamlit_calls(path: Path) -> set[str]:
    """The names a file reads off ``st`` (``st.columns(...)`` -> "columns")."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "st"}


def test_the_compute_room_draws_no_widget():
    for path in (ROOT / "ui" / "compute").rglob("*.py"):
        drawn = streamlit_calls(path) & DRAWING
        assert not drawn, f"{path.relative_to(ROOT)} draws {sorted(drawn)}: widgets belong in ui/sections/"


def test_the_chart_room_computes_nothing_with_torch():
    for path in (ROOT / "ui" / "charts").rglob("*.py"):
        used = {m for m in imports(path) if m == "torch" or m.startswith("torch.")}
        assert not used, f"{path.relative_to(ROOT)} imports {sorted(used)}: compute in ui/compute/, draw arrays here"


def test_the_room_checks_find_a_widget_and_torch(tmp_path: Path):
    """The two checks above read what they should: a widget call and a torch import are found."""
    sample = tmp_path / "sample.py"
    sample.write_text("import streamlit as st\nfrom torch import Tensor\nleft, right = st.columns(2)\n"
                      "st.cache_resource\n", encoding="utf-8")
    assert streamlit_calls(sample) & DRAWING == {"columns"}
    assert "torch" in imports(sample)


def test_presentation_state_holds_the_mode_not_the_restyle():
    used = imports(ROOT / "ui" / "state" / "presentation.py")
    assert not {m for m in used if m.split(".")[0] == "plotly" or m.startswith("ui.figures")}, sorted(used)


def test_ui_is_in_rooms_each_with_a_docstring():
    loose = [p.name for p in (ROOT / "ui").glob("*.py") if p.name != "__init__.py"]
    assert len(loose) <= MAX_UI_MODULES, loose
    for room in ROOMS:
        init = ROOT / "ui" / room / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} needs a docstring"


def test_pages_are_glue():
    for page in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        lines = len(page.read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_PAGE_LINES, f"{page.name} has {lines} lines: move its sections into ui/"
        assert not any(m == "torch" or m.startswith("torch.") for m in imports(page)), f"{page.name} imports torch"


def test_test_tooling_lives_with_the_tests():
    assert not (ROOT / "ui" / "devserver.py").exists() and (ROOT / "tests" / "devserver.py").exists()


def test_the_sidebars_choices_are_state_not_a_second_front_to_the_compute_layer():
    """``AppContext`` carries the choices; a page asks ``ui/compute/`` itself with them (one way to each
    computation), so the module of ``AppContext`` imports nothing of ``ui/compute/``."""
    path = ROOT / "ui" / "sections" / "app_context.py"
    assert not {m for m in imports(path) if m.startswith("ui.compute")}, "AppContext forwards to ui/compute"


def test_pil_image_is_imported_with_the_ui_package() -> None:
    """Sessions opening at once raced on Streamlit's lazy import of PIL.Image; importing ``ui`` (every session's
    first import, serialised by the import lock) must bring it in whole."""
    import subprocess
    import sys

    code = "import sys, ui; m = sys.modules.get('PIL.Image'); print(m is not None and hasattr(m, 'open'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "True", done.stderr


# A family is one file (transformer/hub/families/<model_type>.py): nothing outside that folder names a family's
# model_type. The same words name two other vocabularies, which may appear anywhere: the positional layouts of
# network/config.py ("marian": sines, then cosines) and the tokenizer layouts of hub/fast_tokenizer.py ("t5",
# "bart"); a word counts as one of those when it stands beside another word of that vocabulary or is compared
# with a ``layout``.
FAMILIES_FOLDER = ROOT / "transformer" / "hub" / "families"


def family_type_names(path: Path, model_types: set[str], other_words: set[str]) -> list[int]:
    """The lines of ``path`` that name one of ``model_types`` as a string, other than as a layout's word."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def is_layout_word(node: ast.AST) -> bool:
        parent = parents.get(node)
        siblings: list[ast.AST] = []
        if isinstance(parent, ast.Tuple | ast.List | ast.Set):
            siblings = list(parent.elts)
            parent = parents.get(parent)
        elif isinstance(parent, ast.Dict):
            siblings = [key for key in parent.keys if key is not None]
        if any(isinstance(s, ast.Constant) and s.value in other_words - model_types for s in siblings):
            return True
        if isinstance(parent, ast.Compare):
            sides = [parent.left, *parent.comparators]
            return any("layout" in ast.unparse(side).lower() for side in sides if not isinstance(side, ast.Constant))
        return False

    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in model_types and not is_layout_word(node)]


def layout_words() -> set[str]:
    from transformer.hub.fast_tokenizer import LAYOUTS
    from transformer.network.config import POSITIONAL_LAYOUTS

    return set(LAYOUTS) | set(POSITIONAL_LAYOUTS)


def test_nothing_outside_the_families_folder_names_a_familys_model_type():
    from transformer.hub.families import supported

    model_types = set(supported())
    assert model_types >= {"marian", "t5", "bart", "mbart", "m2m_100"}
    outside = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").rglob("*.py"),
               *(p for p in (ROOT / "transformer").rglob("*.py") if FAMILIES_FOLDER not in p.parents)]
    for path in outside:
        lines = family_type_names(path, model_types, layout_words())
        assert not lines, (f"{path.relative_to(ROOT)}:{lines} names a model_type of transformer/hub/families/: "
                           "read what you need from its Family instead")


def test_the_family_name_check_finds_a_model_type_and_spares_a_layout(tmp_path: Path):
    sample = tmp_path / "sample.py"
    sample.write_text('if model_type == "t5":\n    pass\nNAMES = {"marian": "Marian", "bart": "BART"}\n'
                      'if layout == "bart":\n    pass\nTABLE = {"interleaved": 1, "marian": 2}\n'
                      'if kind in ("mbart", "m2m_100"):\n    pass\n', encoding="utf-8")
    assert family_type_names(sample, {"marian", "t5", "bart", "mbart", "m2m_100"}, layout_words()) == [1, 3, 3, 7, 7]
