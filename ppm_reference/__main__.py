import sys

from ppm_reference.cli import main

sys.exit(main())
