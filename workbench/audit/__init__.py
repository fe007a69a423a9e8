"""The offline audit of saved runs (``python -m workbench audit``): baseline -> bottleneck ->
evidence -> actions; ``rules`` and ``catalog`` are pure, ``report`` writes the HTML or JSON."""
