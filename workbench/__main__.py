import os
import sys

try:  # Ctrl-C while the command line is still importing: exit 130 quietly, no traceback
    from .cli import entry
except KeyboardInterrupt:
    sys.stderr.write("workbench: interrupted\n")
    sys.stderr.flush()
    os._exit(130)

sys.exit(entry())
