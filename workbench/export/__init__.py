"""Static exports: pages that need no kernel and no server (``export-dashboard``)."""
