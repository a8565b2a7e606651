"""tmath: the arithmetic of transformer language models, exactly.

One place for every computation the book 《Transformer 的数学》 shows.
"""

from tmath.sources import SOURCES, Source, source

__all__ = ["SOURCES", "Source", "source"]
__version__ = "0.1.0"
