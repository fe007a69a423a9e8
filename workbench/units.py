"""Time units: the one definition of how many nanoseconds make a microsecond, millisecond, second.

Times inside the package are integer nanoseconds; these convert at the edges
(``*_us`` keys of ``analyze --json``, ``*_ms`` keys of ``show --json``, figure axes).
Plain ints, so ``ns // NS_PER_MS`` stays exact.
"""

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

__all__ = ["NS_PER_MS", "NS_PER_S", "NS_PER_US"]
