"""The extraction engine: model loading, prompting, greedy decoding and checking its output."""

import os

# A document's output must not depend on its batch mates. On Intel CPUs MKL's GEMM rounds a row
# differently by the matrix's row count and alignment (15 of 39 row counts differed, measured);
# strict conditional numerical reproducibility fixes the summation order. MKL reads this at its
# first call, so setting it here, before any model runs, is enough; a user's own value wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
