"""Write one API reference page per module of ``workbench`` at build time (mkdocs-gen-files), so
a module added, renamed or split shows up without editing the docs."""

from pathlib import Path

import mkdocs_gen_files

nav = mkdocs_gen_files.Nav()
root = Path(__file__).parent.parent
for path in sorted((root / "workbench").rglob("*.py")):
    module = path.relative_to(root).with_suffix("")
    parts = tuple(module.parts)
    if parts[-1] == "__main__":
        continue
    doc = Path("reference", *parts).with_suffix(".md")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        doc = doc.with_name("index.md")
    nav[parts] = doc.relative_to("reference").as_posix()
    with mkdocs_gen_files.open(doc, "w") as f:
        f.write(f"# `{'.'.join(parts)}`\n\n::: {'.'.join(parts)}\n")
    mkdocs_gen_files.set_edit_path(doc, path.relative_to(root))

with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as f:
    f.writelines(nav.build_literate_nav())
