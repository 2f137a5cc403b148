"""Build the shipped PyTorch error atlas (see assistant/atlas/build.py for the options).

    python scripts/build_atlas.py /work/.mirror/eellison+pytorch/repo/.git    # installed torch + an old checkout
"""

from assistant.atlas.build import main

if __name__ == "__main__":
    raise SystemExit(main())
