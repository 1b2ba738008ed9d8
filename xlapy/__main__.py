"""``python -m xlapy``: the same as the ``xlapy`` console command."""

from xlapy.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
