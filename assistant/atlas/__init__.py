"""The PyTorch error atlas: every message PyTorch can raise, traced to the check that raised it.

``extract_python`` and ``extract_cpp`` read PyTorch sources into entries (one JSON object per message
template, the schema of ATLAS_BRIEF.md); ``categories`` holds the hand-written category rules;
``scripts/build_atlas.py`` writes ``data/atlas.jsonl.gz`` and ``data/manifest.json``.
"""
