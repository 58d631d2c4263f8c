"""``python -m ppm_reference.interop.peers build|list`` (see the package docstring)."""

import sys

from ppm_reference.interop.peers import main

sys.exit(main())
