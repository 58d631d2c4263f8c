"""``python -m interop.peers build|list`` (see the package docstring)."""

import sys

from interop.peers import main

sys.exit(main())
