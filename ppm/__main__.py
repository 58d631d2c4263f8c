import sys

from ppm.cli import main

sys.exit(main())
