"""Generated Chinese business documents with ground truth: `seqstream-ops corpus generate`."""

from ops.corpus.generate import KINDS, GeneratedDocument, generate_corpus, generate_document, read_truth, write_corpus

__all__ = ["KINDS", "GeneratedDocument", "generate_corpus", "generate_document", "read_truth", "write_corpus"]
