"""`seqstream worker` (the Faust agent) with Faust's own `processing_guarantee="exactly_once"`, for
measuring it (tests/probe_faust_exactly_once.py). The product does not offer this mode.

    python -m tests.faust_eos_worker worker
"""

from __future__ import annotations

import sys

import faust


class ExactlyOnceApp(faust.App):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, processing_guarantee="exactly_once", **kwargs)


if __name__ == "__main__":
    faust.App = ExactlyOnceApp  # streams.workers.faust_app builds its app as faust.App(...)
    from streams.cli.main import main

    sys.exit(main())
