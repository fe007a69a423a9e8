"""Time units: times inside the package are integer nanoseconds; these convert at the edges
(``*_us`` and ``*_ms`` keys, figure axes). Plain ints, so ``ns // NS_PER_MS`` stays exact.
"""

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def ns_to_ms(ns):
    """Nanoseconds (an int, a float, a numpy array or a pandas Series) as float milliseconds."""
    return ns / NS_PER_MS


def ns_to_s(ns):
    """Nanoseconds as float seconds (for ``time.sleep``, ``Condition.wait``, ``call_later``)."""
    return ns / NS_PER_S


def ms_to_ns(ms):
    """Milliseconds as nanoseconds, unrounded (a float for a float argument); see :func:`s_to_ns`."""
    return ms * NS_PER_MS


def s_to_ns(seconds: float) -> int:
    """Seconds as whole nanoseconds, truncated like ``int(seconds * 1e9)``."""
    return int(seconds * NS_PER_S)


__all__ = ["NS_PER_MS", "NS_PER_S", "NS_PER_US", "ms_to_ns", "ns_to_ms", "ns_to_s", "s_to_ns"]
